//! What one execution produced: streams, rich results, error, answer value,
//! artifacts, caps and timings. Serialised as-is by `retrace exec --json` and
//! by the journal, so field names are part of the output format.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::code_size::CodeTooLarge;
use super::text::decode_json_str;
use crate::sandbox::{ExitInfo, Verdict};

/// How the kernel reported the execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecStatus {
    /// `execute_reply` with status ok.
    Ok,
    /// The code raised, or the execution was ended by a limit or a dead kernel.
    Error,
}

/// A Python exception as the kernel reported it, ANSI escapes removed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorInfo {
    pub ename: String,
    pub evalue: String,
    pub traceback: Vec<String>,
}

/// One `execute_result` or `display_data` message: MIME type to payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bundle {
    pub data: Map<String, Value>,
}

impl Bundle {
    pub fn text(&self) -> Option<&str> {
        self.data.get("text/plain").and_then(Value::as_str)
    }
}

/// An image written to the caller's artifact directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Artifact {
    /// Path relative to the artifact directory: the artifact's URI.
    pub path: String,
    pub mime: String,
    pub bytes: u64,
    /// Base64 payload, kept so vision models can be shown the image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    /// A file the cell wrote into its working directory: its name there
    /// (made a safe file name); absent for a displayed image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Which rule produced the answer value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnswerRule {
    /// A variable named `answer` that this cell assigned, read by retrace's
    /// own serializer in the kernel.
    AnswerVariable,
    /// The value of the last `execute_result` (read by the same
    /// serializer; IPython's `text/plain` only for kernels without it).
    LastResult,
    /// The last non-empty line of stdout.
    LastStdoutLine,
}

/// An answer value that is not a plain value (numbers, strings, bools,
/// None, lists / tuples / string-keyed dicts of those) or is too big, too
/// deep or too slow to read. The model is told `message()`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Unsupported {
    /// `int`, `pandas.DataFrame`, `__main__.Slow`, ...
    pub type_name: String,
    pub reason: String,
}

impl Unsupported {
    pub fn message(&self) -> String {
        format!("unsupported answer: {} ({})", self.type_name, self.reason)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Answer {
    /// The text checkers read: Python-literal form of the plain value
    /// (`42`, `2.5`, `'Paris'`, `[1, 2]`, `{'@a': 1}`, `3/4`), built by
    /// retrace's serializer (numpy / Decimal / Fraction / sympy numbers as
    /// plain numbers), or the raw line for `last_stdout_line`. Empty when
    /// `unsupported` is set.
    pub value: String,
    pub rule: AnswerRule,
    /// The same value as JSON (non-finite floats and unrepresentable
    /// numbers as null); `None` for stdout text and unsupported values.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_value"
    )]
    pub json: Option<Value>,
    /// The Python type of the value (`float`, `numpy.float64`, `dict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_name: Option<String>,
    /// Set when the value was not read: the answer exists but is unusable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<Unsupported>,
}

impl Answer {
    /// The text to hand to a checker; `None` for an unsupported value.
    pub fn checkable(&self) -> Option<&str> {
        match self.unsupported {
            Some(_) => None,
            None => Some(self.value.as_str()),
        }
    }

    fn text(value: String, rule: AnswerRule) -> Answer {
        Answer {
            value,
            rule,
            json: None,
            type_name: None,
            unsupported: None,
        }
    }
}

/// What was cut when an execution's output passed its cap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Truncation {
    pub truncated: bool,
    pub dropped_bytes: u64,
    pub dropped_messages: u64,
    /// Images not saved for being past the per-execution count.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_artifacts: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Milliseconds spent in each part of one execution.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timings {
    /// From sending `execute_request` to having both reply and idle.
    pub total: f64,
    /// The kernel's own busy→idle span from its status message timestamps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_busy: Option<f64>,
    /// Time spent killing and restarting after a limit, if that happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill: Option<f64>,
    /// CPU time the kernel's processes used during this execution, from
    /// its cgroup's counter; `None` where retrace does not watch CPU time
    /// (an unconfined kernel, a gateway's own kernels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Outcome {
    pub status: ExecStatus,
    pub verdict: Verdict,
    pub flags: Vec<String>,
    pub execution_count: Option<u64>,
    pub stdout: String,
    pub stderr: String,
    /// `execute_result` bundles.
    pub results: Vec<Bundle>,
    /// `display_data` / `update_display_data` bundles (images are also in `artifacts`).
    pub displays: Vec<Bundle>,
    pub error: Option<ErrorInfo>,
    pub answer: Option<Answer>,
    pub artifacts: Vec<Artifact>,
    pub truncated: bool,
    pub truncation: Truncation,
    pub timings_ms: Timings,
    /// Milliseconds from the kill decision to every process of the kernel gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill_ms: Option<f64>,
    /// Which mechanism killed the kernel (`cgroup.kill`, `freezer`, `killpg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_method: Option<String>,
    /// How the kernel process ended, when it died during this execution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<ExitInfo>,
    /// The kernel was restarted after this execution; its variables are gone.
    pub state_lost: bool,
    /// Peak memory of the kernel's cgroup so far (its whole life, not
    /// this execution alone), when the cgroup reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak_bytes: Option<u64>,
    /// The uid the kernel ran as (each live confined kernel has its own;
    /// `None` unconfined).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_uid: Option<u32>,
    /// What the package policy told the model about this execution (a
    /// refused or failed install, strategy `dynamic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Every limit whose evidence shows it fired in this execution, the
    /// verdict included when it is a limit (children OOM-killed while the
    /// cell ran into the wall timeout: `[oom_killed, timeout_wall]`);
    /// sorted by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fired: Vec<Verdict>,
    /// The limit the error's text claims when no OS evidence confirms it:
    /// the verdict is then `error` with flag `unverified_claim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested: Option<Verdict>,
    /// Which limits retrace enforced for this execution and which it left
    /// to someone else (a gateway's kernels are limited by the gateway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<Enforcement>,
    /// The execution was lost to the infrastructure (a gateway that went
    /// away or dropped the connection and did not come back within the
    /// retries): the harness records an infrastructure error, never a
    /// model failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra_error: Option<String>,
    /// Sequences of text that were not valid Unicode (bytes that are not
    /// UTF-8, lone UTF-16 surrogates) in what the kernel sent for this
    /// execution, each kept as U+FFFD in the outcome's text (see
    /// `kernel::text`): output is never dropped for its encoding.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub text_replacements: u64,
    /// The code was not run for its size (verdict `code_too_large`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_too_large: Option<CodeTooLarge>,
}

impl Outcome {
    /// An execution of one cell that printed nothing, raised nothing and
    /// ended with `verdict` (status `ok` for [`Verdict::Ok`], else `error`)
    /// after `total_ms`: the base that test fixtures change.
    pub fn ended(verdict: Verdict, total_ms: f64) -> Outcome {
        let status = if verdict == Verdict::Ok {
            ExecStatus::Ok
        } else {
            ExecStatus::Error
        };
        let mut outcome = Outcome::blank(status, verdict);
        outcome.execution_count = Some(1);
        outcome.timings_ms.total = total_ms;
        outcome
    }
}

/// Who enforced an execution's limits. Limit names: `timeout_wall`,
/// `timeout_cpu`, `output`, `memory`, `pids`, `cpus`, `disk`, `network`,
/// `filesystem`, `syscalls`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Enforcement {
    /// `local` (retrace's own kernels) or `gateway`.
    pub executor: String,
    /// Limits retrace itself enforced.
    pub enforced: Vec<String>,
    /// Limits the run asked for that retrace did not enforce: an
    /// unconfined local kernel has none of them; a gateway's kernel has the
    /// limits of its kernelspec (pod limits), to which retrace passes the
    /// run's CPU and memory limits as Enterprise Gateway's `KERNEL_*`
    /// variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requested: Vec<String>,
}

/// Limits retrace enforces on its side of the wire, whoever runs the kernel.
const WIRE_LIMITS: [&str; 2] = ["timeout_wall", "output"];
/// Limits that need the kernel's own jail.
const JAIL_LIMITS: [&str; 8] = [
    "timeout_cpu",
    "memory",
    "pids",
    "cpus",
    "disk",
    "network",
    "filesystem",
    "syscalls",
];

impl Enforcement {
    /// A local kernel: confined, it has every limit; unconfined, only those
    /// retrace enforces from outside.
    pub fn local(confined: bool) -> Enforcement {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        if confined {
            Enforcement {
                executor: "local".into(),
                enforced: names(&[&WIRE_LIMITS[..], &JAIL_LIMITS[..]].concat()),
                requested: Vec::new(),
            }
        } else {
            Enforcement {
                executor: "local".into(),
                enforced: names(&WIRE_LIMITS),
                requested: names(&JAIL_LIMITS),
            }
        }
    }

    /// A gateway's kernel: retrace enforces what it can from its side of
    /// the socket; the rest belongs to the gateway.
    pub fn gateway() -> Enforcement {
        Enforcement {
            executor: "gateway".into(),
            ..Enforcement::local(false)
        }
    }

    /// A gateway's kernel that retrace's launcher confined on its host
    /// (retrace's kernelspec): the jail is retrace's, with the run's memory
    /// and CPU limits and the kernelspec's others; a cell's CPU time and
    /// output are watched on the host.
    pub fn gateway_confined() -> Enforcement {
        let mut enforcement = Enforcement::local(true);
        enforcement.executor = "gateway".into();
        enforcement
    }
}

impl Outcome {
    pub fn succeeded(&self) -> bool {
        self.status == ExecStatus::Ok
    }

    /// The outcome of code the harness did not run (or could not): an
    /// error named `ename` with `message`, under `verdict`.
    pub fn not_run(verdict: Verdict, ename: &str, message: String) -> Outcome {
        Outcome {
            error: Some(ErrorInfo {
                ename: ename.into(),
                evalue: message,
                traceback: Vec::new(),
            }),
            ..Outcome::blank(ExecStatus::Error, verdict)
        }
    }

    /// An outcome with nothing in it yet.
    pub(super) fn blank(status: ExecStatus, verdict: Verdict) -> Outcome {
        Outcome {
            status,
            verdict,
            flags: Vec::new(),
            execution_count: None,
            stdout: String::new(),
            stderr: String::new(),
            results: Vec::new(),
            displays: Vec::new(),
            error: None,
            answer: None,
            artifacts: Vec::new(),
            truncated: false,
            truncation: Default::default(),
            timings_ms: Timings::default(),
            kill_ms: None,
            kill_method: None,
            exit: None,
            state_lost: false,
            memory_peak_bytes: None,
            kernel_uid: None,
            policy: None,
            fired: Vec::new(),
            suggested: None,
            enforcement: None,
            infra_error: None,
            text_replacements: 0,
            code_too_large: None,
        }
    }
}

/// A field that is present is `Some`, even when it is JSON `null` (the
/// value `None`); only a missing field is `None`.
fn present_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// What retrace's reader in the kernel reported after a cell (see
/// `probe.py`): whether its hooks ran for this cell, and the values it read.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ProbeReport {
    #[serde(default)]
    armed: bool,
    #[serde(default)]
    variable: Option<ReadValue>,
    #[serde(default)]
    result: Option<ReadValue>,
    /// Invalid text sequences replaced in the envelope itself.
    #[serde(skip)]
    replaced: u64,
}

#[derive(Debug, Clone, Deserialize)]
struct ReadValue {
    ok: bool,
    #[serde(rename = "type", default)]
    type_name: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default, deserialize_with = "present_value")]
    json: Option<Value>,
    #[serde(default)]
    reason: Option<String>,
    /// Lone surrogates the reader replaced by U+FFFD in the value's strings.
    #[serde(default)]
    replaced: u64,
}

impl ReadValue {
    fn into_answer(self, rule: AnswerRule) -> Answer {
        if self.ok {
            Answer {
                value: self.text.unwrap_or_default(),
                rule,
                json: self.json,
                type_name: Some(self.type_name),
                unsupported: None,
            }
        } else {
            Answer {
                value: String::new(),
                rule,
                json: None,
                type_name: Some(self.type_name.clone()),
                unsupported: Some(Unsupported {
                    type_name: self.type_name,
                    reason: self.reason.unwrap_or_else(|| "not a plain value".into()),
                }),
            }
        }
    }
}

/// The prefix of every envelope the kernel-side code returns.
pub(crate) const ENVELOPE_PREFIX: &str = "retrace:";

/// The JSON of an envelope (`text/plain` of a user expression), decoded
/// by the kernel text decoder, and how many invalid sequences it held;
/// `None` when it is not ours or not what `T` reads.
pub(crate) fn read_envelope<T: serde::de::DeserializeOwned>(text: &str) -> Option<(T, u64)> {
    let decoded = decode_json_str(text.strip_prefix(ENVELOPE_PREFIX)?);
    let value = serde_json::from_str(&decoded.json).ok()?;
    Some((value, decoded.replaced))
}

impl ProbeReport {
    /// Parses the `text/plain` of the reader's user expression; `None` when
    /// it is missing or not ours.
    pub(crate) fn parse(text: &str) -> Option<ProbeReport> {
        let (report, replaced) = read_envelope::<ProbeReport>(text)?;
        Some(ProbeReport { replaced, ..report })
    }

    /// Invalid text sequences replaced in the envelope and by the reader
    /// in the values it read.
    pub(crate) fn replaced(&self) -> u64 {
        // Counts the kernel reports: a forged envelope can claim any.
        [&self.variable, &self.result]
            .iter()
            .flat_map(|v| v.as_ref())
            .fold(self.replaced, |n, v| n.saturating_add(v.replaced))
    }
}

/// Picks the answer value: the `answer` variable this cell assigned, else
/// the last result, else the last non-empty stdout line. Without a report
/// from the reader (its hooks were removed by the cell's code) `answer` is
/// not read at all, so a stale value can never count.
pub(crate) fn choose_answer(
    report: Option<ProbeReport>,
    results: &[Bundle],
    stdout: &str,
) -> Option<Answer> {
    match report {
        Some(r) if r.armed => {
            if let Some(v) = r.variable {
                return Some(v.into_answer(AnswerRule::AnswerVariable));
            }
            if let Some(v) = r.result {
                return Some(v.into_answer(AnswerRule::LastResult));
            }
        }
        _ => {
            if let Some(value) = results.iter().rev().find_map(Bundle::text) {
                return Some(Answer::text(value.to_string(), AnswerRule::LastResult));
            }
        }
    }
    stdout
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| Answer::text(l.to_string(), AnswerRule::LastStdoutLine))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(text: &str) -> Bundle {
        let mut data = Map::new();
        data.insert("text/plain".into(), Value::String(text.into()));
        Bundle { data }
    }

    #[test]
    fn answer_rule_order() {
        let results = vec![bundle("1"), bundle("2")];
        let report = |body: &str| ProbeReport::parse(&format!("retrace:{body}"));
        let var = r#"{"armed":true,"variable":{"ok":true,"type":"int","text":"42","json":42},"result":{"ok":true,"type":"int","text":"2","json":2}}"#;
        let a = choose_answer(report(var), &results, "x\n").unwrap();
        assert_eq!(
            (a.value.as_str(), a.rule),
            ("42", AnswerRule::AnswerVariable)
        );
        assert_eq!(a.json, Some(serde_json::json!(42)));
        let res =
            r#"{"armed":true,"result":{"ok":true,"type":"list","text":"[1, 2]","json":[1,2]}}"#;
        let a = choose_answer(report(res), &results, "x\n").unwrap();
        assert_eq!(
            (a.value.as_str(), a.rule),
            ("[1, 2]", AnswerRule::LastResult)
        );
        // Armed and nothing read: stdout, never the bundles' text/plain.
        let a = choose_answer(report(r#"{"armed":true}"#), &results, "x\n").unwrap();
        assert_eq!(
            (a.value.as_str(), a.rule),
            ("x", AnswerRule::LastStdoutLine)
        );
        // No reader: the bundles' text, and `answer` is never read.
        let a = choose_answer(report(r#"{"armed":false}"#), &results, "x\n").unwrap();
        assert_eq!((a.value.as_str(), a.rule), ("2", AnswerRule::LastResult));
        let a = choose_answer(None, &[], "first\n last \n\n").unwrap();
        assert_eq!(
            (a.value.as_str(), a.rule),
            ("last", AnswerRule::LastStdoutLine)
        );
        assert!(choose_answer(None, &[], " \n").is_none());
    }

    #[test]
    fn unsupported_values_have_no_checkable_text() {
        let body = r#"retrace:{"armed":true,"variable":{"ok":false,"type":"pandas.DataFrame","reason":"not a plain value"}}"#;
        let a = choose_answer(ProbeReport::parse(body), &[], "7\n").unwrap();
        assert_eq!(a.rule, AnswerRule::AnswerVariable);
        assert_eq!(a.checkable(), None);
        let u = a.unsupported.unwrap();
        assert_eq!(
            u.message(),
            "unsupported answer: pandas.DataFrame (not a plain value)"
        );
        assert!(ProbeReport::parse("{\"armed\":true}").is_none(), "not ours");
    }

    #[test]
    fn an_envelope_with_a_lone_surrogate_is_read_with_a_replacement() {
        // A type name the reader wrote as an escape of a lone surrogate made
        // the whole report unreadable: the answer was lost with no reason.
        let body = r#"retrace:{"armed":true,"variable":{"ok":true,"type":"X\ud800","text":"'a\ufffd'","json":"a\ufffd","replaced":1}}"#;
        let report = ProbeReport::parse(body).expect("read");
        assert_eq!(
            report.replaced(),
            2,
            "one in the envelope, one by the reader"
        );
        let a = choose_answer(Some(report), &[], "7\n").unwrap();
        assert_eq!(a.rule, AnswerRule::AnswerVariable);
        assert_eq!(a.type_name.as_deref(), Some("X\u{FFFD}"));
        assert_eq!(a.value, "'a\u{FFFD}'");
        // Counts are the kernel's word: a forged one cannot overflow.
        let forged = format!(
            r#"retrace:{{"armed":true,"variable":{{"ok":true,"type":"\udc00","text":"1","json":1,"replaced":{}}},"result":{{"ok":true,"type":"int","text":"1","json":1,"replaced":{}}}}}"#,
            u64::MAX,
            u64::MAX
        );
        assert_eq!(ProbeReport::parse(&forged).unwrap().replaced(), u64::MAX);
    }

    #[test]
    fn old_answers_still_deserialize() {
        let a: Answer = serde_json::from_str(r#"{"value":"42","rule":"answer_variable"}"#).unwrap();
        assert_eq!(a.checkable(), Some("42"));
        assert!(a.json.is_none() && a.unsupported.is_none());
    }
}
