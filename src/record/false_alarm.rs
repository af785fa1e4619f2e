//! Where a false-alarm control is written down and what its arm is
//! called: `false_alarm.jsonl` beside `results.jsonl`, so that no metric
//! of the run's arms, which all read `results.jsonl`, can count it.

/// The control's journal, in the run directory.
pub const JOURNAL: &str = "false_alarm.jsonl";

/// The control arm of `baseline` (the run's first arm).
pub fn arm_name(baseline: &str) -> String {
    format!("{baseline}/false-alarm")
}
