//! A run as JUnit test cases (`retrace run --junit FILE`): one case per
//! task (per arm when the run has several), failing with why the task
//! ended wrong: the final round's error or kill, or the wrong answer.

use super::episode::episodes;
use super::error::RenderError;
use super::export::Exporter;
use super::junit::{self, TestCase};
use crate::record::{AttemptRecord, RunConfig};
use crate::task::Task;

/// What a run's JUnit document is made from: the run and its journal,
/// with the suite's tasks for the expected answers named in failures (a
/// task missing from them is named without one).
pub struct JunitView<'a> {
    pub config: &'a RunConfig,
    pub records: &'a [AttemptRecord],
    pub tasks: &'a [Task],
}

/// `retrace run --junit FILE`; the file name is only the default, the
/// user chooses the path.
pub struct JunitExporter;

impl<'a> Exporter<JunitView<'a>> for JunitExporter {
    fn file_name(&self) -> &'static str {
        "junit.xml"
    }

    fn render(&self, view: &JunitView<'a>) -> Result<String, RenderError> {
        Ok(render(view.config, view.records, view.tasks))
    }
}

/// The JUnit document of a run. `tasks` give the expected answers named in
/// failures (a task missing from them is named without one).
pub fn render(config: &RunConfig, records: &[AttemptRecord], tasks: &[Task]) -> String {
    junit::render(
        &format!("retrace run {}", config.provenance.run_id),
        &cases(config, records, tasks),
    )
}

/// One case per task of `config.provenance.task_ids`, arm by arm.
pub fn cases(config: &RunConfig, records: &[AttemptRecord], tasks: &[Task]) -> Vec<TestCase> {
    let one_arm = config.arm_names().len() == 1;
    episodes(config, records, tasks)
        .into_iter()
        .map(|episode| {
            let classname = if one_arm {
                config.spec.tasks.suite.clone()
            } else {
                episode.arm.clone()
            };
            let failure = episode.why_wrong(config).map(|message| {
                let details = match episode.last() {
                    Some(r) => format!(
                        "{message}\n(round {} of 0..={}, {})",
                        r.round,
                        config.spec.policy.rounds,
                        episode
                            .check_rule()
                            .map_or("no answer checked".into(), |rule| format!(
                                "check rule {rule}"
                            ))
                    ),
                    None => message.clone(),
                };
                (message, details)
            });
            TestCase {
                classname,
                name: episode.task_id.to_string(),
                time_secs: episode.cost().total_ms / 1e3,
                failure,
                system_out: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::episode::expected_text;
    use super::super::testing::{config, number, task, two_arms, R};
    use super::*;
    use crate::record::StopOn;
    use crate::sandbox::Verdict;
    use crate::task::Expected;

    #[test]
    fn one_case_per_task_failing_with_the_final_rounds_story() {
        use R::*;
        let (k, s) = (1, StopOn::Clean);
        let mut records = task("right", &[Raised("KeyError"), Right], s, k);
        records.extend(task("wrong", &[Wrong], s, k));
        let mut raised = task("raised", &[Raised("KeyError"), Raised("ValueError")], s, k);
        raised[1]
            .outcome
            .as_mut()
            .unwrap()
            .error
            .as_mut()
            .unwrap()
            .evalue = "bad <x>".into();
        records.extend(raised);
        records.extend(task(
            "killed",
            &[NoCode, Killed(Verdict::TimeoutWall)],
            s,
            k,
        ));
        records.extend(task("infra", &[Infra], s, k));
        let ids = ["right", "wrong", "raised", "killed", "infra", "never"];
        let cfg = config(&ids, k, s);
        let cases = cases(&cfg, &records, &[number("wrong", 42.0)]);
        let names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ids);
        assert!(cases.iter().all(|c| c.classname == "s"));
        let msg = |i: usize| cases[i].failure.as_ref().map(|f| f.0.as_str());
        assert_eq!(msg(0), None);
        assert_eq!(msg(1), Some("wrong answer: got 1, expected 42"));
        assert_eq!(msg(2), Some("ValueError: bad <x>"));
        assert!(
            msg(3)
                .unwrap()
                .starts_with("timeout_wall: Your code did not finish"),
            "{:?}",
            msg(3)
        );
        assert_eq!(msg(4), Some("infrastructure error: endpoint down"));
        assert!(msg(5).unwrap().starts_with("not run"));
        // 16 ms per round, two rounds.
        assert!((cases[0].time_secs - 0.032).abs() < 1e-9);
        let details = &cases[1].failure.as_ref().unwrap().1;
        assert!(
            details.contains("round 0 of 0..=1, check rule number:abs_tol"),
            "{details}"
        );
        let xml = render(&cfg, &records, &[]);
        assert!(xml.contains("tests=\"6\" failures=\"5\""), "{xml}");
        assert!(xml.contains("message=\"wrong answer: got 1\""), "{xml}");
        assert!(xml.contains("bad &lt;x&gt;"));
    }

    #[test]
    fn arms_are_cases_of_their_own_class() {
        let (cfg, records) = two_arms();
        let cases = cases(&cfg, &records, &[]);
        assert_eq!(cases.len(), 12);
        let fat: Vec<&TestCase> = cases.iter().filter(|c| c.classname == "fat").collect();
        assert_eq!(fat.len(), 6);
        // dynamic: b failed (ModuleNotFoundError), f was interrupted.
        let failing: Vec<&str> = cases
            .iter()
            .filter(|c| c.classname == "dynamic" && c.failure.is_some())
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(failing, ["b", "f"]);
    }

    #[test]
    fn expected_answers_read_as_written() {
        assert_eq!(expected_text(&number("a", 481.0).expected), "481");
        assert_eq!(expected_text(&number("a", 0.5).expected), "0.5");
        let text = Expected::Text {
            value: "Paris".into(),
            case_sensitive: false,
        };
        assert_eq!(expected_text(&text), "\"Paris\"");
        let list = Expected::List {
            values: vec![1.into(), 2.into()],
            ordered: false,
            abs_tol: None,
        };
        assert_eq!(expected_text(&list), "[1,2] (any order)");
        let multi = Expected::Multi {
            answers: [("a".to_string(), number("a", 1.0).expected)].into(),
        };
        assert_eq!(expected_text(&multi), "@a[1]");
    }
}
