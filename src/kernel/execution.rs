//! One execution on the wire, whichever executor runs the kernel: the cell
//! and its completion probe sent, then the messages that answer them
//! gathered into what becomes the [`Outcome`](super::Outcome).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use console::strip_ansi_codes;
use jupyter_protocol::{
    CommInfoRequest, ExecuteRequest, ExecutionState, ExpressionResult, JupyterMessage,
    JupyterMessageContent, Media, ReplyStatus, Stdio,
};
use serde_json::{Map, Value};

use super::artifact;
use super::capture::{Capture, OutputCap, Stream};
use super::client::{parent_id, Channels};
use super::options::ExecOptions;
use super::outcome::{
    choose_answer, Artifact, Bundle, ErrorInfo, ExecStatus, Outcome, ProbeReport, Timings,
};
use super::probe::{answer_expression, ANSWER_KEY};
use super::KernelError;
use crate::sandbox::{Flag, HarnessReason, Verdict};

/// The comm target the completion probe asks about: none is registered
/// under it, so the reply is empty. `probe.py` answers it at the kernel's
/// dispatcher (its `_COMPLETION_TARGET`).
const PROBE_COMM_TARGET: &str = "retrace.completion";

/// What a traceback line costs on the wire beyond its text (quotes, comma).
const LINE_FRAMING: usize = 3;
/// Traceback lines kept of the first error (a recursion's is about 60;
/// Python folds repeated frames): the last ones, where the error is.
const MAX_TRACEBACK_LINES: usize = 1000;

/// The traceback as kept: escape codes stripped, at most
/// [`MAX_TRACEBACK_LINES`] (the last), after a line saying how many went.
fn kept_traceback(lines: &[String]) -> Vec<String> {
    let dropped = lines.len().saturating_sub(MAX_TRACEBACK_LINES);
    let kept = lines[dropped..]
        .iter()
        .map(|l| strip_ansi_codes(l).into_owned());
    if dropped == 0 {
        return kept.collect();
    }
    std::iter::once(format!("[{dropped} traceback lines dropped]"))
        .chain(kept)
        .collect()
}

/// Sends the cell, then (when `verify`) the completion probe behind it.
pub(super) async fn send_cell(
    channels: &mut Channels,
    code: &str,
    verify: bool,
    cap: OutputCap,
) -> Result<Sent, KernelError> {
    let request = ExecuteRequest {
        code: code.to_string(),
        silent: false,
        store_history: true,
        user_expressions: Some(HashMap::from([(
            ANSWER_KEY.into(),
            answer_expression(cap.bytes),
        )])),
        allow_stdin: false,
        // One request at a time: nothing queued may be aborted after an error.
        stop_on_error: false,
    };
    // Watched: from here on only this cell's IOPub messages are queued;
    // anything left from before (a thread still printing) is dropped.
    let msg_id = channels.send_shell_watched(request.into()).await?;

    // The shell handles requests one at a time, so the reply to this
    // probe cannot come before the cell has really finished: code in the
    // kernel holds the HMAC key and can forge its own reply and idle.
    // `comm_info` for a target nobody registers: of the requests that
    // wait for the cell (comm messages do not), the one whose reply is
    // cheapest to build.
    let probe_id = if verify {
        let probe = CommInfoRequest {
            target_name: Some(PROBE_COMM_TARGET.into()),
        };
        Some(channels.send_shell(probe.into()).await?)
    } else {
        None
    };
    Ok(Sent { msg_id, probe_id })
}

/// The requests of one execution.
pub(super) struct Sent {
    pub(super) msg_id: String,
    /// The completion probe's msg_id until its reply arrives; `None` when
    /// completion is not verified.
    pub(super) probe_id: Option<String>,
}

impl Sent {
    /// A shell message: the cell's reply goes to `run`; the probe's means
    /// the cell has returned. Anything else is not this execution's.
    pub(super) fn on_shell(&mut self, run: &mut Run, msg: JupyterMessage) {
        match parent_id(&msg) {
            Some(id) if id == self.msg_id => run.on_shell(msg),
            Some(id) if self.probe_id.as_deref() == Some(id) => self.probe_id = None,
            _ => {}
        }
    }

    /// The cell's reply and idle are in, and so is the probe's reply when
    /// one was sent.
    pub(super) fn complete(&self, run: &Run) -> bool {
        run.reply.is_some() && run.idle && self.probe_id.is_none()
    }
}

/// Milliseconds, for timings and logs.
pub(super) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The state of one execution while its messages arrive.
pub(super) struct Run {
    pub(super) capture: Capture,
    pub(super) reply: Option<ReplyStatus>,
    pub(super) idle: bool,
    pub(super) busy_at: Option<chrono::DateTime<chrono::Utc>>,
    pub(super) idle_at: Option<chrono::DateTime<chrono::Utc>>,
    pub(super) execution_count: Option<u64>,
    pub(super) results: Vec<Bundle>,
    pub(super) displays: Vec<Bundle>,
    /// Images and files to save as artifacts, in the order they came.
    pub(super) images: Vec<artifact::Pending>,
    pub(super) error: Option<ErrorInfo>,
    /// `text/plain` of the answer reader's envelope.
    pub(super) probe: Option<String>,
    pub(super) reason: Option<HarnessReason>,
    pub(super) kernel_gone: bool,
    /// The reply asked the frontend to exit (`quit()`).
    pub(super) ask_exit: bool,
    /// Invalid text sequences replaced in this execution's messages.
    pub(super) replaced_text: u64,
}

impl Run {
    pub(super) fn new(cap: OutputCap) -> Self {
        Self {
            capture: Capture::new(cap),
            reply: None,
            idle: false,
            busy_at: None,
            idle_at: None,
            execution_count: None,
            results: Vec::new(),
            displays: Vec::new(),
            images: Vec::new(),
            error: None,
            probe: None,
            reason: None,
            kernel_gone: false,
            ask_exit: false,
            replaced_text: 0,
        }
    }

    /// A cell the kernel replied `ok` to raised nothing of its own: an
    /// `error` message on IOPub then came from elsewhere (a failing event
    /// callback an earlier cell registered, or code publishing one) and is
    /// kept as a line of stderr, not as the cell's error.
    pub(super) fn settle_error(&mut self) {
        if self.reply != Some(ReplyStatus::Ok) || self.reason.is_some() {
            return;
        }
        if let Some(e) = self.error.take() {
            let line = format!(
                "[retrace] error output the cell did not raise: {}: {}\n",
                e.ename, e.evalue
            );
            self.capture.push_stream(Stream::Stderr, &line);
        }
    }

    pub(super) fn busy_span_ms(&self) -> Option<f64> {
        let span = self.idle_at? - self.busy_at?;
        span.num_microseconds().map(|us| us as f64 / 1e3)
    }

    pub(super) fn on_iopub(&mut self, msg: JupyterMessage) {
        match msg.content {
            JupyterMessageContent::Status(status) => match status.execution_state {
                ExecutionState::Busy => self.busy_at = Some(msg.header.date),
                ExecutionState::Idle => {
                    self.idle = true;
                    self.idle_at = Some(msg.header.date);
                }
                ExecutionState::Dead
                | ExecutionState::Restarting
                | ExecutionState::AutoRestarting
                | ExecutionState::Terminating => self.kernel_gone = true,
                _ => {}
            },
            JupyterMessageContent::StreamContent(stream) => {
                let which = match stream.name {
                    Stdio::Stdout => Stream::Stdout,
                    Stdio::Stderr => Stream::Stderr,
                };
                self.capture.push_stream(which, &stream.text);
            }
            JupyterMessageContent::DisplayData(jupyter_protocol::DisplayData { data, .. })
            | JupyterMessageContent::UpdateDisplayData(jupyter_protocol::UpdateDisplayData {
                data,
                ..
            }) => {
                if let Some(bundle) = self.admit(&data) {
                    self.displays.push(bundle);
                }
            }
            JupyterMessageContent::ExecuteResult(result) => {
                self.execution_count = Some(result.execution_count.0 as u64);
                if let Some(bundle) = self.admit(&result.data) {
                    self.results.push(bundle);
                }
            }
            JupyterMessageContent::ErrorOutput(error) => {
                // Charged as on the wire: a traceback of a million empty
                // lines is megabytes of JSON and of parsed strings.
                let size = error.ename.len()
                    + error.evalue.len()
                    + error
                        .traceback
                        .iter()
                        .map(|l| l.len() + LINE_FRAMING)
                        .sum::<usize>();
                // Every error counts against the cap; the first is kept even
                // past it (one message, bounded by the wire cap): the cell's
                // own traceback comes before anything a post-run callback of
                // an earlier cell shows, and a cell stopped at the cap still
                // says how it ended.
                self.capture.count(size);
                if self.error.is_some() {
                    return;
                }
                self.error = Some(ErrorInfo {
                    ename: error.ename,
                    evalue: strip_ansi_codes(&error.evalue).into_owned(),
                    traceback: kept_traceback(&error.traceback),
                });
            }
            _ => {}
        }
    }

    /// A rich output (display, display update or execution result) if it
    /// fits under the cap: every kind of output shares one budget, and only
    /// admitted bundles give artifacts, so their count and bytes are bounded
    /// by the cap too. A file the cell wrote (`artifact::FILE_KEY`) is
    /// counted the same way but, past the cap, only dropped (see
    /// `Capture::admit_file`).
    fn admit(&mut self, data: &Media) -> Option<Bundle> {
        let map = media_map(data);
        // Payload bytes (base64 images included), without re-encoding.
        let size = map
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or_else(|| v.to_string().len(), str::len))
            .sum();
        if map.contains_key(artifact::FILE_KEY) {
            return self.capture.admit_file(size).then(|| self.take_images(map));
        }
        self.capture
            .admit_display(size)
            .then(|| self.take_images(map))
    }

    /// Moves image and file payloads out of a bundle into the artifact
    /// queue; the bundle keeps a placeholder so the display is still
    /// visible. Past [`artifact::MAX_PER_EXECUTION`] they are dropped and
    /// the output counts as truncated.
    fn take_images(&mut self, mut map: Map<String, Value>) -> Bundle {
        for (mime, _) in artifact::IMAGE_TYPES {
            if let Some(Value::String(payload)) = map.remove(mime) {
                let pending = artifact::Pending {
                    mime: mime.to_string(),
                    payload,
                    name: None,
                };
                let placeholder = self.queue(pending);
                map.insert(mime.to_string(), Value::String(placeholder.into()));
            }
        }
        if let Some(mut entry) = map.remove(artifact::FILE_KEY) {
            let placeholder = match artifact::Pending::file(&entry) {
                Some(pending) => self.queue(pending),
                None => "<not collected: not a kind of file retrace collects>",
            };
            if let Some(fields) = entry.as_object_mut() {
                fields.insert("base64".into(), Value::String(placeholder.into()));
            }
            map.insert(artifact::FILE_KEY.into(), entry);
        }
        Bundle { data: map }
    }

    /// Queues one artifact; the placeholder its payload leaves behind.
    fn queue(&mut self, pending: artifact::Pending) -> &'static str {
        if self.images.len() < artifact::MAX_PER_EXECUTION {
            self.images.push(pending);
            "<artifact>"
        } else {
            self.capture.drop_artifact();
            "<artifact dropped: too many images>"
        }
    }

    pub(super) fn on_shell(&mut self, msg: JupyterMessage) {
        if let JupyterMessageContent::ExecuteReply(reply) = msg.content {
            self.execution_count = Some(reply.execution_count.0 as u64);
            self.ask_exit = reply
                .payload
                .iter()
                .any(|p| matches!(p, jupyter_protocol::Payload::AskExit { .. }));
            if let Some(expressions) = &reply.user_expressions {
                if let Some(ExpressionResult::Ok { data, .. }) = expressions.get(ANSWER_KEY) {
                    self.probe = data.content.iter().find_map(|m| match m {
                        jupyter_protocol::MediaType::Plain(text) => Some(text.clone()),
                        _ => None,
                    });
                }
            }
            if reply.status != ReplyStatus::Ok {
                if let Some(e) = reply.error {
                    // The reply names the exception the cell raised; an
                    // error message on IOPub may be another one's.
                    let evalue = strip_ansi_codes(&e.evalue).into_owned();
                    let same = self
                        .error
                        .as_ref()
                        .is_some_and(|have| have.ename == e.ename && have.evalue == evalue);
                    if !same {
                        self.error = Some(ErrorInfo {
                            ename: e.ename,
                            evalue,
                            traceback: e
                                .traceback
                                .iter()
                                .map(|l| strip_ansi_codes(l).into_owned())
                                .collect(),
                        });
                    }
                } else if reply.status == ReplyStatus::Aborted && self.error.is_none() {
                    self.error = Some(ErrorInfo {
                        ename: "Aborted".into(),
                        evalue: "the kernel aborted the execution".into(),
                        traceback: Vec::new(),
                    });
                }
            }
            self.reply = Some(reply.status);
        }
    }
}

/// A MIME bundle as the JSON object it is on the wire.
pub(super) fn media_map(data: &Media) -> Map<String, Value> {
    match serde_json::to_value(data) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

impl Run {
    /// The outcome of what the messages said: artifacts saved (numbered on
    /// from `artifact_seq`), the answer read from a cell that succeeded
    /// only. The executor adds what it knows beyond the messages (kill,
    /// exit, memory, state lost).
    pub(super) fn into_outcome(
        mut self,
        exec: &ExecOptions,
        artifact_seq: &mut u32,
        verdict: Verdict,
        mut flags: Vec<Flag>,
        started: Instant,
    ) -> Outcome {
        let artifacts = self.save_artifacts(exec, artifact_seq);
        let status = if verdict == Verdict::Ok {
            ExecStatus::Ok
        } else {
            ExecStatus::Error
        };
        let stdout = self.capture.stdout();
        let mut text_replacements = self.replaced_text;
        let answer = if status == ExecStatus::Ok {
            let report = self.probe.take().and_then(|t| ProbeReport::parse(&t));
            let read = report.as_ref().map_or(0, ProbeReport::replaced);
            text_replacements = text_replacements.saturating_add(read);
            choose_answer(report, &self.results, &stdout)
        } else {
            None
        };
        let truncation = self.capture.truncation();
        flags.sort();
        flags.dedup();
        Outcome {
            flags: flags.iter().map(|f| f.as_str().to_string()).collect(),
            execution_count: self.execution_count,
            stdout,
            stderr: self.capture.stderr(),
            error: self.error.take(),
            answer,
            artifacts,
            truncated: truncation.truncated,
            truncation,
            timings_ms: Timings {
                total: started.elapsed().as_secs_f64() * 1e3,
                kernel_busy: self.busy_span_ms(),
                kill: None,
                cpu: None,
            },
            results: self.results,
            displays: self.displays,
            text_replacements,
            ..Outcome::blank(status, verdict)
        }
    }

    fn save_artifacts(&mut self, exec: &ExecOptions, artifact_seq: &mut u32) -> Vec<Artifact> {
        let mut saved = Vec::new();
        for pending in self.images.drain(..) {
            let stem = format!("{}-{:03}", exec.artifact_prefix, *artifact_seq);
            *artifact_seq += 1;
            let result = match &exec.artifact_dir {
                Some(dir) => artifact::save(dir, &stem, &pending),
                None => Ok(Artifact {
                    path: String::new(),
                    mime: pending.mime,
                    bytes: pending.payload.len() as u64,
                    base64: Some(pending.payload),
                    name: pending.name,
                }),
            };
            match result {
                Ok(a) => saved.push(a),
                Err(e) => self
                    .capture
                    .push_stream(Stream::Stderr, &format!("[retrace] {}\n", e.full())),
            }
        }
        saved
    }
}

#[cfg(test)]
mod tests {
    use super::{kept_traceback, MAX_TRACEBACK_LINES, PROBE_COMM_TARGET};
    use crate::kernel::probe::PROBE_SOURCE;

    #[test]
    fn a_traceback_is_kept_to_its_last_lines() {
        let short: Vec<String> = vec!["\u{1b}[31mTraceback\u{1b}[0m".into(), "E: v".into()];
        assert_eq!(kept_traceback(&short), ["Traceback", "E: v"]);
        let long: Vec<String> = (0..MAX_TRACEBACK_LINES + 5)
            .map(|i| i.to_string())
            .collect();
        let kept = kept_traceback(&long);
        assert_eq!(kept.len(), MAX_TRACEBACK_LINES + 1);
        assert_eq!(kept[0], "[5 traceback lines dropped]");
        assert_eq!(kept[1], "5");
        assert_eq!(kept.last().unwrap(), &(MAX_TRACEBACK_LINES + 4).to_string());
    }

    #[test]
    fn the_kernel_side_answers_the_target_the_harness_asks_about() {
        let line = format!("_COMPLETION_TARGET = \"{PROBE_COMM_TARGET}\"");
        assert!(PROBE_SOURCE.lines().any(|l| l == line), "{line}");
    }
}
