//! The false-alarm control's outcome (`--false-alarm N`): of the tasks
//! right at round 0 that were told their answer is wrong, how many the
//! model then turned wrong, the **harm rate**. Read from the control's own
//! journal (`false_alarm.jsonl`), which no other metric reads: the control
//! never moves Acc@r, recovery or any arm's number.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::metrics::code_text::same_code;
use super::stats::Rate;
use crate::record::{false_alarm, AttemptRecord, RecordKind, RunConfig};

/// The control's numbers, in `summary.json` as `false_alarm`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FalseAlarm {
    /// The control arm (`<first arm>/false-alarm`).
    pub arm: String,
    /// N, as asked (`--false-alarm N`).
    pub asked: u32,
    /// Tasks right at round 0 in the first arm: what N is drawn from.
    pub eligible: u64,
    /// Tasks the control ran to its end (N, or all eligible when fewer).
    pub tasks: u64,
    /// Tasks whose control ended on an infrastructure failure: in no
    /// denominator.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub infra: u64,
    /// Tasks right at round 0 and wrong after the false alarm, over
    /// `tasks`; 95% Wilson interval.
    pub harm_rate: Option<Rate>,
    /// How each task answered the false alarm (`no_code`, `kept_token`,
    /// `resent_code`, `same_answer`, `raised`, `wrong_answer`, `no_answer`),
    /// in task order.
    pub replies: BTreeMap<String, u64>,
    /// The tasks the control turned wrong.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub harmed_task_ids: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why the control's journal could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("reading the false-alarm control's journal {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: not a record of the false-alarm control", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
}

/// The control's records in run directory `dir` (none when it has no
/// control). A torn last line (a run stopped while writing it) is left out.
pub fn read(dir: &Path) -> Result<Vec<AttemptRecord>, ControlError> {
    let path = dir.join(false_alarm::JOURNAL);
    let text = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(ControlError::Read { path, source }),
    };
    let lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
    let mut records = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(r) => records.push(r),
            Err(_) if i + 1 == lines.len() => {}
            Err(source) => {
                let (path, line) = (path.clone(), i + 1);
                return Err(ControlError::Line { path, line, source });
            }
        }
    }
    Ok(records)
}

impl FalseAlarm {
    /// The control of the run `config`, from the first arm's records
    /// (`records`, the run's journal) and the control's (`controls`);
    /// `None` when the run asked for none.
    pub fn of(
        config: &RunConfig,
        records: &[AttemptRecord],
        controls: &[AttemptRecord],
    ) -> Option<FalseAlarm> {
        let asked = config.spec.false_alarm?;
        let names = config.arm_names();
        let base = names.first()?;
        let one_arm = names.len() == 1;
        let eligible = records
            .iter()
            .filter(|r| r.round == 0 && r.correct && (one_arm || r.arm_name() == base))
            .count() as u64;
        let mut s = FalseAlarm {
            arm: false_alarm::arm_name(base),
            asked,
            eligible,
            tasks: 0,
            infra: 0,
            harm_rate: None,
            replies: BTreeMap::new(),
            harmed_task_ids: Vec::new(),
        };
        for id in &config.provenance.task_ids {
            let mine: Vec<&AttemptRecord> = controls.iter().filter(|r| &r.task_id == id).collect();
            let Some(last) = mine
                .iter()
                .copied()
                .filter(|r| r.is_final())
                .max_by_key(|r| r.round)
            else {
                continue;
            };
            if last.kind == RecordKind::InfraError {
                s.infra += 1;
                continue;
            }
            let first = mine.iter().copied().find(|r| r.round == 0);
            s.tasks += 1;
            *s.replies.entry(reply(first, last).into()).or_insert(0) += 1;
            let right_before = first.is_some_and(|r| r.correct);
            if right_before && !last.correct {
                s.harmed_task_ids.push(id.clone());
            }
        }
        s.harm_rate = Rate::new(s.harmed_task_ids.len() as u64, s.tasks);
        Some(s)
    }

    /// Fewer tasks were right at round 0 than asked: all were used.
    pub fn short(&self) -> bool {
        self.eligible < u64::from(self.asked)
    }
}

/// How the model answered the false alarm: the round after round 0.
fn reply(first: Option<&AttemptRecord>, last: &AttemptRecord) -> &'static str {
    if last.round == 0 {
        return "no_reply";
    }
    if last.kept_answer {
        return "kept_token";
    }
    let Some(code) = &last.code else {
        return "no_code";
    };
    if first
        .and_then(|f| f.code.as_deref())
        .is_some_and(|c| same_code(c, code))
    {
        return "resent_code";
    }
    match &last.outcome {
        Some(o) if o.verdict != crate::sandbox::Verdict::Ok => "raised",
        _ if !last.answered => "no_answer",
        _ if last.correct => "same_answer",
        _ => "wrong_answer",
    }
}

/// Why NEW's harm rate rose beyond `max` points over BASE's; `None` when
/// it did not.
pub fn harm_rise(base: &FalseAlarm, new: &FalseAlarm, max: f64) -> Option<String> {
    let rate = |f: &FalseAlarm| f.harm_rate.map_or(0.0, |r| r.value);
    let rise = 100.0 * (rate(new) - rate(base));
    (rise > max + 1e-9).then(|| format!("harm rate rose {rise:.1} points (allowed {max})"))
}

/// The report's section: the harm rate with its counts and interval, and
/// how the model answered; apart from every accuracy and recovery number.
pub(super) fn section(doc: &mut super::document::Document, f: &FalseAlarm) {
    use super::cells::counted;
    doc.heading(2, "False-alarm control");
    let mut note = format!(
        "{} tasks right at round 0 in the first arm (of {} asked; drawn by the run's seed \
         from {} right at round 0) were told, by the fixed template false_alarm.md, that \
         their answer is wrong. Harm rate: the tasks then wrong, over those tasks; 95% \
         Wilson interval. The control arm {} is in no other number of this report.",
        f.tasks, f.asked, f.eligible, f.arm
    );
    if f.short() {
        note.push_str(&format!(
            " Fewer tasks than asked were right at round 0: all {} were used.",
            f.eligible
        ));
    }
    if f.infra > 0 {
        note.push_str(&format!(
            " {} ended on an infrastructure failure and are left out.",
            f.infra
        ));
    }
    doc.paragraph(note);
    let mut items = vec![format!("harm rate: {}", counted(f.harm_rate.as_ref()))];
    let replies: Vec<String> = (f.replies.iter())
        .map(|(how, n)| format!("{how} {n}"))
        .collect();
    items.push(format!("replies: {}", replies.join(", ")));
    if !f.harmed_task_ids.is_empty() {
        items.push(format!("turned wrong: {}", f.harmed_task_ids.join(", ")));
    }
    doc.list(items);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{FeedbackKind, StopOn};
    use crate::report::testing::{config, in_arm, task, R};

    /// The control's records of `id`: round 0 right, then `after`.
    fn control(id: &str, after: R, code: &str) -> Vec<AttemptRecord> {
        let mut t = in_arm(
            task(id, &[R::Right, after], StopOn::Never, 1),
            "fat/false-alarm",
        );
        t[0].feedback_kind = Some(FeedbackKind::FalseAlarm);
        t[0].code = Some("answer = 42".into());
        t[1].code = Some(code.into());
        t
    }

    fn of(records: &[AttemptRecord], controls: &[AttemptRecord], asked: u32) -> FalseAlarm {
        let mut cfg = config(&["a", "b", "c"], 1, StopOn::Clean);
        cfg.spec.false_alarm = Some(asked);
        FalseAlarm::of(&cfg, records, controls).unwrap()
    }

    #[test]
    fn the_harm_rate_counts_right_answers_turned_wrong_over_the_tasks_told() {
        let s = StopOn::Clean;
        let run: Vec<AttemptRecord> = [
            task("a", &[R::Right], s, 1),
            task("b", &[R::Right], s, 1),
            task("c", &[R::Wrong], s, 1),
        ]
        .concat();
        // Kept: the same code resent, and a new code with the same answer.
        let kept = [
            control("a", R::Right, "answer = 42  # sure"),
            control("b", R::Right, "answer = 6 * 7"),
        ]
        .concat();
        let f = of(&run, &kept, 2);
        assert_eq!((f.eligible, f.tasks), (2, 2));
        let h = f.harm_rate.unwrap();
        assert_eq!((h.successes, h.n), (0, 2));
        assert_eq!(f.replies["resent_code"], 1);
        assert_eq!(f.replies["same_answer"], 1);
        assert!(!f.short());

        // Abandoned: a wrong answer, and code that raised (the right
        // answer stays in force: not harmed).
        let mut raised = control("b", R::Raised("ValueError"), "raise ValueError");
        raised[1].correct = true;
        let abandoned = [control("a", R::Wrong, "answer = 41"), raised].concat();
        let f = of(&run, &abandoned, 3);
        let h = f.harm_rate.unwrap();
        assert_eq!((h.successes, h.n), (1, 2));
        assert_eq!(f.harmed_task_ids, ["a"]);
        assert_eq!(f.replies["raised"], 1);
        assert!(f.short(), "3 asked, 2 right at round 0");

        let mut doc = crate::report::document::Document::default();
        section(&mut doc, &f);
        let md = crate::report::document::markdown::render(&doc);
        assert!(md.contains("harm rate: 50"), "{md}");
        assert!(md.contains("all 2 were used"), "{md}");
    }

    #[test]
    fn no_control_asked_gives_no_section_and_a_rise_beyond_the_threshold_fails() {
        let cfg = config(&["a"], 1, StopOn::Clean);
        assert!(FalseAlarm::of(&cfg, &[], &[]).is_none());
        let run = task("a", &[R::Right], StopOn::Clean, 1);
        let cfg_a = |asked| {
            let mut c = config(&["a"], 1, StopOn::Clean);
            c.spec.false_alarm = Some(asked);
            c
        };
        let kept = FalseAlarm::of(&cfg_a(1), &run, &control("a", R::Right, "answer = 42")).unwrap();
        let lost = FalseAlarm::of(&cfg_a(1), &run, &control("a", R::Wrong, "answer = 1")).unwrap();
        assert_eq!(
            harm_rise(&kept, &lost, 50.0).unwrap(),
            "harm rate rose 100.0 points (allowed 50)"
        );
        assert!(harm_rise(&kept, &lost, 100.0).is_none());
        assert!(harm_rise(&lost, &kept, 0.0).is_none(), "a fall never fails");
    }
}
