//! The data of `report.html`'s task list: every task (per arm) with its
//! rounds, as the page's script reads it. Long text is shortened (the
//! journal keeps it whole), repeated prompt text is stored once, and the
//! images the code produced are embedded as `data:` URIs within a budget.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use base64::Engine;
use serde::Serialize;

use super::super::view::RunView;
use crate::kernel::Outcome;
use crate::record::{artifacts, AttemptRecord, RecordKind};
use crate::repair::traceback::{cut_middle, parse, render};

/// Characters kept of one text field (reply, code, stdout, ...).
const TEXT_MAX: usize = 20_000;
/// Characters of the parsed traceback view (what a model is shown is
/// usually less; this is for people).
const TRACEBACK_VIEW: usize = 6_000;
/// Largest image embedded, and all images of a run together.
const IMAGE_MAX: u64 = 2 << 20;
const IMAGES_TOTAL: u64 = 24 << 20;

#[derive(Serialize)]
pub struct Data {
    /// Arms in `--strategy` order (one entry for a one-strategy run).
    pub arms: Vec<String>,
    /// Every tag of the selected tasks, sorted.
    pub tags: Vec<String>,
    /// Prompt texts, stored once (the system prompt repeats on every task).
    pub strings: Vec<String>,
    pub tasks: Vec<TaskView>,
}

/// One task in one arm.
#[derive(Serialize)]
pub struct TaskView {
    pub id: String,
    pub arm: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The task has a final record (a stop reason).
    pub finished: bool,
    /// Correct with the answer available after round 0 / the last round.
    pub first: bool,
    pub last: bool,
    /// Some execution of the task was killed (timeout, oom, pids, ...).
    pub killed: bool,
    pub infra: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    pub rounds: Vec<RoundView>,
}

#[derive(Serialize)]
pub struct RoundView {
    pub round: u32,
    /// `attempt` or `infra_error`.
    pub kind: &'static str,
    /// The messages of the round: role and an index into `strings`.
    pub prompt: Vec<(String, usize)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<Text>,
    /// How the code was found in the reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extraction: Option<String>,
    /// The verdict of the execution; `None` when nothing ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    pub killed: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// `ExcType: message`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The parsed traceback, rendered as the repair feedback renders it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceback: Option<Text>,
    /// The traceback as the kernel sent it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceback_raw: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<ImageView>,
    /// The check of the answer in force after the round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<serde_json::Value>,
    pub correct: bool,
    pub answered: bool,
    pub kept_answer: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub installs: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Masking rules the round's repair broke.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub masking: Vec<&'static str>,
    /// Why the round's repair was not checked for masking.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub masking_unchecked: Option<String>,
    /// The arm whose round 0 this is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infra_error: Option<String>,
    /// Model, exec and total milliseconds.
    pub ms: [f64; 3],
    /// Prompt and completion tokens (`null`: the server's count was unknown).
    pub tokens: [Option<u64>; 2],
}

/// A text field, possibly shortened.
#[derive(Serialize)]
pub struct Text {
    pub text: String,
    /// Characters of the original (set only when it was shortened).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full: Option<usize>,
}

impl Text {
    fn of(text: &str) -> Text {
        let n = text.chars().count();
        if n <= TEXT_MAX {
            return Text {
                text: text.to_string(),
                full: None,
            };
        }
        Text {
            text: cut_middle(text, TEXT_MAX),
            full: Some(n),
        }
    }

    fn nonempty(text: &str) -> Option<Text> {
        (!text.is_empty()).then(|| Text::of(text))
    }
}

/// An image the code produced: embedded, or why not.
#[derive(Serialize)]
pub struct ImageView {
    /// Path inside the run directory.
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

/// Everything the page's task list shows.
pub fn collect(run: &RunView) -> Data {
    let mut arms: Vec<String> = run.config.arm_names();
    let several = arms.len() > 1;
    let mut by_key: BTreeMap<(&str, &str), Vec<&AttemptRecord>> = BTreeMap::new();
    for r in run.records {
        if !arms.iter().any(|a| a == r.arm_name()) {
            arms.push(r.arm_name().to_string());
        }
        by_key
            .entry((r.arm_name(), r.task_id.as_str()))
            .or_default()
            .push(r);
    }
    let mut ids: Vec<&str> = run
        .config
        .provenance
        .task_ids
        .iter()
        .map(String::as_str)
        .collect();
    for r in run.records {
        if !ids.contains(&r.task_id.as_str()) {
            ids.push(&r.task_id);
        }
    }
    let mut pool = Pool::default();
    let mut images = Images {
        spent: 0,
        dir: run.dir,
    };
    let mut tasks = Vec::new();
    for arm in &arms {
        for id in &ids {
            let mut records = by_key.remove(&(arm.as_str(), *id)).unwrap_or_default();
            records.sort_by_key(|r| r.round);
            // A resumed run may repeat a round; the later record wins.
            records.dedup_by(|later, earlier| {
                if later.round == earlier.round {
                    std::mem::swap(later, earlier);
                    true
                } else {
                    false
                }
            });
            let artifact_dir = artifacts::dir(several.then_some(arm.as_str()), id);
            let tags = run
                .config
                .provenance
                .task_tags
                .get(*id)
                .cloned()
                .unwrap_or_default();
            tasks.push(task(
                id,
                arm,
                tags,
                &records,
                &artifact_dir,
                &mut pool,
                &mut images,
            ));
        }
    }
    let mut tags: Vec<String> = run
        .config
        .provenance
        .task_tags
        .values()
        .flatten()
        .cloned()
        .collect();
    tags.sort();
    tags.dedup();
    Data {
        arms,
        tags,
        strings: pool.strings,
        tasks,
    }
}

fn task(
    id: &str,
    arm: &str,
    tags: Vec<String>,
    records: &[&AttemptRecord],
    artifact_dir: &Path,
    pool: &mut Pool,
    images: &mut Images,
) -> TaskView {
    let last = records.last();
    TaskView {
        id: id.to_string(),
        arm: arm.to_string(),
        tags,
        finished: last.is_some_and(|r| r.is_final()),
        first: records.first().is_some_and(|r| r.correct),
        last: last.is_some_and(|r| r.correct),
        killed: records
            .iter()
            .any(|r| r.outcome.as_ref().is_some_and(|o| o.verdict.is_kill())),
        infra: records.iter().any(|r| r.kind == RecordKind::InfraError),
        stop: last.and_then(|r| r.stop).map(|s| name(&s)),
        fault: records.iter().find_map(|r| r.fault.clone()),
        rounds: records
            .iter()
            .map(|r| round(r, artifact_dir, pool, images))
            .collect(),
    }
}

fn round(
    r: &AttemptRecord,
    artifact_dir: &Path,
    pool: &mut Pool,
    images: &mut Images,
) -> RoundView {
    let o = r.outcome.as_ref();
    let code = r.code.as_deref().unwrap_or("");
    let error = o.and_then(|o| o.error.as_ref());
    RoundView {
        round: r.round,
        kind: match r.kind {
            RecordKind::Attempt => "attempt",
            RecordKind::InfraError => "infra_error",
        },
        prompt: r
            .prompt
            .iter()
            .map(|m| (name(&m.role), pool.intern(m.joined_text())))
            .collect(),
        reply: r.reply.as_deref().map(Text::of),
        code: r.code.as_deref().map(Text::of),
        extraction: r
            .extraction
            .as_ref()
            .map(|e| format!("{} ({} block{})", name(&e.rule), e.blocks, plural(e.blocks))),
        verdict: o.map(|o| o.verdict.as_str().to_string()),
        killed: o.is_some_and(|o| o.verdict.is_kill()),
        flags: o.map(|o| o.flags.clone()).unwrap_or_default(),
        error: error.map(|e| {
            if e.evalue.is_empty() {
                e.ename.clone()
            } else {
                format!("{}: {}", e.ename, cut_middle(&e.evalue, 2_000))
            }
        }),
        traceback: error
            .filter(|e| !e.traceback.is_empty())
            .map(|e| Text::of(&render(&parse(e, code), code, TRACEBACK_VIEW))),
        traceback_raw: error.and_then(|e| Text::nonempty(&e.traceback.join("\n"))),
        stdout: o.and_then(|o| Text::nonempty(&o.stdout)),
        stderr: o.and_then(|o| Text::nonempty(&o.stderr)),
        answer: o.and_then(answer),
        policy: o.and_then(|o| o.policy.clone()),
        artifacts: o
            .map(|o| {
                o.artifacts
                    .iter()
                    .map(|a| images.embed(artifact_dir, &a.path, &a.mime, a.bytes))
                    .collect()
            })
            .unwrap_or_default(),
        check: r.check.as_ref().and_then(|c| serde_json::to_value(c).ok()),
        correct: r.correct,
        answered: r.answered,
        kept_answer: r.kept_answer,
        installs: r.installs.iter().map(install).collect(),
        fault: r.fault.clone(),
        note: r.note.clone(),
        masking: r.masking.iter().flatten().map(|f| f.name()).collect(),
        masking_unchecked: r.masking_unchecked.as_ref().map(|u| u.to_string()),
        shared_from: r.shared_from.clone(),
        stop: r.stop.map(|s| name(&s)),
        feedback_kind: r.feedback_kind.map(|k| name(&k)),
        infra_error: r.infra_error.clone(),
        ms: [r.timings_ms.model, r.timings_ms.exec, r.timings_ms.total],
        tokens: [r.tokens.prompt_tokens, r.tokens.completion_tokens],
    }
}

fn answer(o: &Outcome) -> Option<String> {
    let a = o.answer.as_ref()?;
    let rule = name(&a.rule);
    Some(match (&a.unsupported, &a.type_name) {
        (Some(u), _) => format!("{} (by {rule})", u.message()),
        (None, Some(t)) => format!("{} ({t}, by {rule})", cut_middle(&a.value, 2_000)),
        (None, None) => format!("{} (by {rule})", cut_middle(&a.value, 2_000)),
    })
}

/// One install step in a line: why, what was decided, what it cost.
fn install(step: &crate::record::InstallStep) -> String {
    let trigger = match &step.trigger {
        crate::record::InstallTrigger::ExplicitLines => "pip lines in the code".to_string(),
        crate::record::InstallTrigger::MissingImport { module } => {
            format!("missing import `{module}`")
        }
    };
    let decisions: Vec<String> = step
        .decisions
        .iter()
        .map(|d| {
            let v = serde_json::to_value(d).unwrap_or_default();
            let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
            let requested = v
                .pointer("/request/requested")
                .and_then(|x| x.as_str())
                .unwrap_or("?");
            match field("decision").as_str() {
                "allowed" => format!(
                    "{requested}: allowed {} {}",
                    field("distribution"),
                    field("version")
                ),
                other => format!("{requested}: {other} ({})", field("reason")),
            }
        })
        .collect();
    let wheels = step.wheels.len();
    let source = if step.store_hit { "store" } else { "download" };
    let mut line = format!(
        "{trigger}: {}; {wheels} wheel{} from {source}, {:.0} ms",
        decisions.join(", "),
        plural(wheels),
        step.ms
    );
    if let Some(e) = &step.error {
        line.push_str(&format!("; failed: {}", cut_middle(e, 500)));
    }
    if let Some(r) = &step.refused {
        line.push_str(&format!("; refused: {}", cut_middle(r, 500)));
    }
    line
}

/// A serde enum's name as written in the journal.
fn name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// An image's bytes, at most one more than [`IMAGE_MAX`]; a link, a FIFO
/// or a device is refused.
fn read_image(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut data = Vec::new();
    crate::util::nofollow::open_regular(path)?
        .take(IMAGE_MAX + 1)
        .read_to_end(&mut data)?;
    Ok(data)
}

/// Prompt texts stored once.
#[derive(Default)]
struct Pool {
    strings: Vec<String>,
    index: HashMap<String, usize>,
}

impl Pool {
    fn intern(&mut self, text: String) -> usize {
        if let Some(&i) = self.index.get(&text) {
            return i;
        }
        let i = self.strings.len();
        self.strings.push(cut_middle(&text, TEXT_MAX));
        self.index.insert(text, i);
        i
    }
}

/// Images embedded so far, against the run's budget.
struct Images<'a> {
    spent: u64,
    dir: &'a Path,
}

impl Images<'_> {
    fn embed(&mut self, artifact_dir: &Path, file: &str, mime: &str, bytes: u64) -> ImageView {
        let rel = artifact_dir.join(file);
        let path = rel.to_string_lossy().into_owned();
        let missing = |why: String| ImageView {
            path: path.clone(),
            src: None,
            missing: Some(why),
        };
        if !crate::kernel::is_image_artifact(mime) {
            return missing(format!("not embedded: {mime}"));
        }
        if bytes > IMAGE_MAX || self.spent + bytes > IMAGES_TOTAL {
            return missing(format!(
                "not embedded ({bytes} bytes; the report keeps its images under {} MiB)",
                IMAGES_TOTAL >> 20
            ));
        }
        // The record names a file in the task's directory; a record that
        // names any other path, or a link, is not followed out of it.
        if !crate::util::file_name::is_plain(file) {
            return missing("not embedded: not a file name of the run".into());
        }
        match read_image(&self.dir.join(&rel)) {
            Ok(data) if data.len() as u64 > IMAGE_MAX.min(IMAGES_TOTAL - self.spent) => {
                missing(format!(
                    "not embedded ({} bytes or more; the report keeps its images under {} MiB)",
                    data.len(),
                    IMAGES_TOTAL >> 20
                ))
            }
            Ok(data) => {
                self.spent += data.len() as u64;
                let b64 = base64::engine::general_purpose::STANDARD.encode(&data);
                ImageView {
                    path: path.clone(),
                    src: Some(format!("data:{mime};base64,{b64}")),
                    missing: None,
                }
            }
            Err(e) => missing(format!("not found in the run directory: {e}")),
        }
    }
}
