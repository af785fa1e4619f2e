//! The Jupyter channels of one kernel: shell and control requests, IOPub and
//! shell replies delivered through queues by reader tasks (a queue receive is
//! cancel-safe, a socket read inside `select!` might not be).

use std::path::PathBuf;
use std::time::Duration;

use jupyter_protocol::connection_info::ConnectionInfo;
use jupyter_protocol::{JupyterMessage, JupyterMessageContent};
use jupyter_zmq_client::{
    create_client_control_connection, create_client_iopub_connection,
    create_client_shell_connection_with_identity, peer_identity_for_session, DealerSendConnection,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::KernelError;

/// Open channels to one kernel.
pub struct Channels {
    shell: DealerSendConnection,
    control: DealerSendConnection,
    pub iopub_rx: mpsc::UnboundedReceiver<JupyterMessage>,
    pub shell_rx: mpsc::UnboundedReceiver<JupyterMessage>,
    /// Replies on control (interrupt, shutdown).
    pub control_rx: mpsc::UnboundedReceiver<JupyterMessage>,
    readers: Vec<JoinHandle<()>>,
}

impl Drop for Channels {
    fn drop(&mut self) {
        for reader in &self.readers {
            reader.abort();
        }
    }
}

/// Waits until the kernel has bound its sockets (the files exist).
pub async fn wait_for_sockets(paths: &[PathBuf]) {
    while !paths.iter().all(|p| p.exists()) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

impl Channels {
    pub async fn connect(info: &ConnectionInfo) -> Result<Self, KernelError> {
        let session = uuid::Uuid::new_v4().to_string();
        let zmq = |e: jupyter_zmq_client::RuntimeError| KernelError::Protocol(e.to_string());
        let identity = peer_identity_for_session(&session).map_err(zmq)?;
        let iopub = create_client_iopub_connection(info, "", &session)
            .await
            .map_err(zmq)?;
        let shell = create_client_shell_connection_with_identity(info, &session, identity)
            .await
            .map_err(zmq)?;
        let control = create_client_control_connection(info, &session)
            .await
            .map_err(zmq)?;
        let (shell_tx, shell_rx_half) = shell.split();
        let (control_tx, mut control_rx) = control.split();
        let (control_send, control_replies) = mpsc::unbounded_channel();
        let control_reader = tokio::spawn(async move {
            loop {
                match control_rx.read().await {
                    Ok(msg) => {
                        let _ = control_send.send(msg);
                    }
                    Err(e) if is_fatal(&e) => break,
                    Err(_) => continue,
                }
            }
        });

        let (iopub_send, iopub_rx) = mpsc::unbounded_channel();
        let (shell_send, shell_rx) = mpsc::unbounded_channel();
        let mut iopub = iopub;
        let iopub_reader = tokio::spawn(async move {
            // A message that fails to parse or verify is dropped, not fatal:
            // code in the kernel can write garbage to its own sockets.
            loop {
                match iopub.read().await {
                    Ok(msg) => {
                        if iopub_send.send(msg).is_err() {
                            break;
                        }
                    }
                    Err(e) if is_fatal(&e) => break,
                    Err(_) => continue,
                }
            }
        });
        let mut shell_rx_half = shell_rx_half;
        let shell_reader = tokio::spawn(async move {
            loop {
                match shell_rx_half.read().await {
                    Ok(msg) => {
                        if shell_send.send(msg).is_err() {
                            break;
                        }
                    }
                    Err(e) if is_fatal(&e) => break,
                    Err(_) => continue,
                }
            }
        });
        Ok(Self {
            shell: shell_tx,
            control: control_tx,
            iopub_rx,
            shell_rx,
            control_rx: control_replies,
            readers: vec![iopub_reader, shell_reader, control_reader],
        })
    }

    /// Sends a request on shell; returns its msg_id.
    pub async fn send_shell(
        &mut self,
        content: JupyterMessageContent,
    ) -> Result<String, KernelError> {
        let msg = JupyterMessage::new(content, None);
        let id = msg.header.msg_id.clone();
        self.shell
            .send(msg)
            .await
            .map_err(|e| KernelError::Protocol(format!("sending on shell: {e}")))?;
        Ok(id)
    }

    /// Sends a request on control; the reply is not awaited (control replies
    /// are read lazily because a dying kernel may never send them).
    pub async fn send_control(
        &mut self,
        content: JupyterMessageContent,
    ) -> Result<(), KernelError> {
        let msg = JupyterMessage::new(content, None);
        self.control
            .send(msg)
            .await
            .map_err(|e| KernelError::Protocol(format!("sending on control: {e}")))
    }
}

fn is_fatal(e: &jupyter_zmq_client::RuntimeError) -> bool {
    // Transport errors end the stream; a bad message (parse, signature,
    // framing) is only that message's problem.
    use jupyter_zmq_client::RuntimeError as E;
    matches!(e, E::ZmqError(_) | E::IoError(_))
}

/// The parent msg_id of a message, if it has one.
pub fn parent_id(msg: &JupyterMessage) -> Option<&str> {
    msg.parent_header.as_ref().map(|h| h.msg_id.as_str())
}
