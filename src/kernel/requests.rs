//! retrace's own requests to a kernel, never seen by the task: the start
//! handshake, installing the probe, silent executions.

use std::collections::HashMap;
use std::time::Duration;

use console::strip_ansi_codes;
use jupyter_protocol::{
    ExecuteRequest, ExpressionResult, JupyterMessageContent, KernelInfoRequest, ReplyStatus,
};
use tokio::time::sleep_until;

use super::client::{parent_id, Channels};
use super::options::KernelBanner;
use super::probe::ANSWER_KEY;
use super::state::{StateQuery, StateView};
use super::KernelError;

/// How long installing `probe.py` into a fresh kernel may take.
pub(super) const PROBE_INSTALL_TIMEOUT: Duration = Duration::from_secs(20);

/// Sends `kernel_info_request` until the reply and an IOPub message have both
/// arrived, so the IOPub subscription is known to be live.
pub(super) async fn handshake(channels: &mut Channels) -> Result<KernelBanner, KernelError> {
    channels.watch_all_iopub();
    let mut banner = None;
    let mut iopub_live = false;
    loop {
        channels.send_shell(KernelInfoRequest {}.into()).await?;
        let resend = tokio::time::Instant::now() + Duration::from_millis(250);
        loop {
            tokio::select! {
                Some(msg) = channels.shell_rx.recv() => {
                    if let JupyterMessageContent::KernelInfoReply(reply) = msg.content {
                        banner = Some(KernelBanner {
                            implementation: format!("{} {}", reply.implementation, reply.implementation_version),
                            language_version: reply.language_info.version.clone(),
                            probe_preinstalled: false,
                        });
                    }
                }
                Some(_) = channels.iopub_rx.recv() => iopub_live = true,
                _ = sleep_until(resend) => break,
            }
            if iopub_live {
                if let Some(b) = banner.take() {
                    // The handshake's own status messages: from now on the
                    // reader drops them, and what is queued goes now (each
                    // cell's watched send discards stale ones anyway). No
                    // wait for the quiet after them: 5 ms of every start.
                    channels.unwatch_iopub();
                    while channels.iopub_rx.try_recv().is_ok() {}
                    return Ok(b);
                }
            }
        }
    }
}

/// Installs retrace's kernel-side code with `cell` (see [`probe_from_home`],
/// [`probe_inline`]) before any task code runs, so it captures pristine
/// builtins. Silent: no execution count, no history, no names in the
/// user's namespace.
pub(super) async fn install_probe(channels: &mut Channels, cell: &str) -> Result<(), KernelError> {
    silent_ok(
        channels,
        cell,
        PROBE_INSTALL_TIMEOUT,
        "installing the answer reader",
    )
    .await
}

/// Sends a silent `execute_request` (no history, no execution count) and
/// waits for its reply; `Ok(None)` when `timeout` passes first.
pub(super) async fn silent_request(
    channels: &mut Channels,
    code: &str,
    expressions: Option<HashMap<String, String>>,
    timeout: Duration,
) -> Result<Option<jupyter_protocol::ExecuteReply>, KernelError> {
    let request = ExecuteRequest {
        code: code.to_string(),
        silent: true,
        store_history: false,
        user_expressions: expressions,
        allow_stdin: false,
        stop_on_error: false,
    };
    let msg_id = channels.send_shell(request.into()).await?;
    let wait = async {
        while let Some(msg) = channels.shell_rx.recv().await {
            if parent_id(&msg) == Some(msg_id.as_str()) {
                if let JupyterMessageContent::ExecuteReply(reply) = msg.content {
                    return Some(reply);
                }
            }
        }
        None
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(Some(reply)) => Ok(Some(reply)),
        Ok(None) => Err(KernelError::Protocol("the shell channel closed".into())),
        Err(_) => Ok(None),
    }
}

/// Reads a compact view of the kernel's state with retrace's own code in
/// the kernel (`probe.py`'s inspector); `Ok(None)` when `query.timeout`
/// passed first (the caller interrupts the kernel its own way).
pub(super) async fn inspect(
    channels: &mut Channels,
    query: &StateQuery,
) -> Result<Option<StateView>, KernelError> {
    let body = serde_json::to_string(query).map_err(|source| KernelError::Encode {
        what: "the state query",
        source,
    })?;
    let expression = format!("__retrace_inspect__('{}')", hex::encode(body));
    let expressions = HashMap::from([(ANSWER_KEY.to_string(), expression)]);
    let Some(reply) = silent_request(channels, "", Some(expressions), query.timeout).await? else {
        return Ok(None);
    };
    let text = match reply
        .user_expressions
        .as_ref()
        .and_then(|e| e.get(ANSWER_KEY))
    {
        Some(ExpressionResult::Ok { data, .. }) => data.content.iter().find_map(|m| match m {
            jupyter_protocol::MediaType::Plain(text) => Some(text.clone()),
            _ => None,
        }),
        Some(ExpressionResult::Error { ename, evalue, .. }) => {
            return Err(KernelError::Protocol(format!(
                "state inspection failed: {ename}: {}",
                strip_ansi_codes(evalue)
            )))
        }
        None => None,
    };
    text.as_deref()
        .and_then(super::outcome::read_envelope)
        .map(|(view, _)| Some(view))
        .ok_or_else(|| KernelError::Protocol("state inspection returned no view".into()))
}

/// A silent execution of retrace's own `code` that must succeed within
/// `timeout`; the error names `what` was being done.
pub(super) async fn silent_ok(
    channels: &mut Channels,
    code: &str,
    timeout: Duration,
    what: &str,
) -> Result<(), KernelError> {
    let reply = silent_request(channels, code, None, timeout)
        .await?
        .ok_or_else(|| KernelError::Protocol(format!("{what} timed out")))?;
    if reply.status != ReplyStatus::Ok {
        let detail = reply
            .error
            .map(|e| format!("{}: {}", e.ename, strip_ansi_codes(&e.evalue).into_owned()))
            .unwrap_or_default();
        return Err(KernelError::Protocol(format!("{what} failed: {detail}")));
    }
    Ok(())
}
