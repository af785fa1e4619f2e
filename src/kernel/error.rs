//! Why a kernel could not be started or spoken to.

use std::path::PathBuf;
use std::time::Duration;

use crate::sandbox::SandboxError;

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("kernel did not start: {message}\n--- kernel output (last lines) ---\n{stderr}")]
    Startup { message: String, stderr: String },
    /// A task file to copy into the kernel's working directory has no name
    /// (`/`, `..`) or none the kernel can use.
    #[error("task file {} has no usable file name", .0.display())]
    TaskFileName(PathBuf),
    /// A task file was refused on its way into the kernel (a link planted
    /// after the load, not a regular file, over the bound, not readable by
    /// the kernel's user).
    #[error("task file {}: {source}", file.display())]
    TaskFile {
        file: PathBuf,
        #[source]
        source: crate::util::input_file::InputFileError,
    },
    #[error("the kernel process exited before it could be watched")]
    NotWatched,
    /// retrace's own data could not be encoded as JSON.
    #[error("jupyter protocol: encoding {what}")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// A kernel socket failed (local kernels: ZMQ).
    #[error("jupyter protocol: {what}")]
    Wire {
        what: String,
        #[source]
        source: jupyter_zmq_client::RuntimeError,
    },
    /// The kernel answered retrace's own request wrongly, or not at all.
    #[error("jupyter protocol: {0}")]
    Protocol(String),
    /// A display's image payload is not base64.
    #[error("jupyter protocol: {mime} display is not base64")]
    Base64 {
        mime: String,
        #[source]
        source: base64::DecodeError,
    },
    /// The gateway answered, but not as a Jupyter gateway does (no such
    /// kernelspec, no id, an HTTP error status).
    #[error("gateway: {0}")]
    Gateway(String),
    /// The gateway could not be reached over HTTP (after the retries).
    #[error("gateway: {what}")]
    Http {
        what: String,
        #[source]
        source: reqwest::Error,
    },
    /// The kernel's websocket on the gateway failed.
    #[error("gateway: {what}")]
    Websocket {
        what: String,
        #[source]
        source: Box<tokio_tungstenite::tungstenite::Error>,
    },
    /// The gateway took longer than this to let a kernel answer.
    #[error("gateway: kernel {id} on {url} did not answer within {waited:?}")]
    GatewayTimeout {
        id: String,
        url: String,
        waited: Duration,
    },
    /// A kernel of retrace's launcher ended without the launcher's
    /// reading of its end: the launcher went too, with its host or the
    /// host's connection.
    #[error(
        "gateway: kernel {id} on {url} was lost with its host {host}: the host's launcher never \
         reported the kernel's end; `retrace run --resume` runs the task again"
    )]
    HostLost {
        id: String,
        url: String,
        host: String,
    },
    #[error("the gateway is closed")]
    GatewayClosed,
    /// Only local kernels can do this (a gateway's cannot see this
    /// machine's package store, processes or jail).
    #[error("{0}")]
    LocalOnly(&'static str),
    #[error("state inspection took longer than {0:?}; the kernel was interrupted")]
    StateTimeout(Duration),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Image(#[from] crate::pyenv::PyenvError),
    #[error(transparent)]
    Io(#[from] crate::util::IoError),
}

impl KernelError {
    /// The message with the typed cause after it, as an outcome records it
    /// (`Display` leaves the cause to the error chain).
    pub fn full(&self) -> String {
        use std::error::Error;
        match self {
            KernelError::Encode { .. }
            | KernelError::Wire { .. }
            | KernelError::Base64 { .. }
            | KernelError::Http { .. }
            | KernelError::Websocket { .. } => match self.source() {
                Some(cause) => format!("{self}: {cause}"),
                None => self.to_string(),
            },
            _ => self.to_string(),
        }
    }
}
