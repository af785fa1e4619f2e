use std::path::Path;

use super::*;
use crate::record::AttemptRecord;
use crate::record::StopOn;
use crate::report::stats::Rate;
use crate::report::testing::{config, task, two_arms, R};

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn arms_pair_by_pick_by_name_or_as_the_only_ones() {
    let one = names(&["fat"]);
    let other = names(&["dynamic"]);
    let two = names(&["fat", "dynamic"]);
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    // Two one-arm runs: compared across strategies.
    assert_eq!(
        pair_arms(&one, &other, None, None).unwrap(),
        [pair("fat", "dynamic")]
    );
    // Multi-arm runs: arm by arm, in BASE's order.
    assert_eq!(
        pair_arms(&two, &names(&["dynamic", "fat"]), None, None).unwrap(),
        [pair("fat", "fat"), pair("dynamic", "dynamic")]
    );
    assert_eq!(
        pair_arms(&two, &one, None, None).unwrap(),
        [pair("fat", "fat")]
    );
    // Two arms of one run.
    assert_eq!(
        pair_arms(&two, &two, Some("fat"), Some("dynamic")).unwrap(),
        [pair("fat", "dynamic")]
    );
    let err = pair_arms(&two, &two, Some("slim"), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no arm `slim`"), "{err}");
    let err = pair_arms(&two, &names(&["slim", "x"]), None, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("share no arm"), "{err}");
}

#[test]
fn tasks_pair_on_ids_both_finished() {
    let (cfg, records) = two_arms();
    let base = Side::new("BASE", &cfg, &records, "fat");
    let new = Side::new("NEW", &cfg, &records, "dynamic");
    let (c, summaries) = compare(&base, &new).unwrap();
    // f was interrupted in the dynamic arm.
    assert_eq!(c.shared_tasks, names(&["a", "b", "c", "d", "e"]));
    assert_eq!(c.unpaired_tasks, 1);
    let accs: Vec<(u64, u64)> = c
        .rounds
        .iter()
        .map(|r| (r.base.successes, r.new.successes))
        .collect();
    assert_eq!(accs, [(2, 2), (3, 4)]);
    assert_eq!((c.last().mcnemar.b, c.last().mcnemar.c), (1, 2));
    assert_eq!(c.now_wrong, ["b"]);
    assert_eq!(c.now_right, ["c", "e"]);
    assert!((c.last().difference - 0.2).abs() < 1e-12);
    // The arm's own summaries on the shared tasks.
    assert_eq!(summaries.0.header.tasks, 5);
    assert_eq!(summaries.1.header.strategy, "dynamic");
    assert_eq!(c.latency_by_round.len(), 2);
    assert_eq!(c.latency_by_round[1].new_model.n, 3); // b d e
    assert_eq!(
        (c.base.as_str(), c.new.as_str()),
        ("BASE t [fat]", "NEW t [dynamic]")
    );

    // Another run with other ids: only the shared ones are paired; a
    // one-arm run takes its records whatever strategy they name.
    let other_cfg = config(&["c", "x"], 1, StopOn::Clean);
    let mut other = task("c", &[R::Wrong], StopOn::Clean, 1);
    other.extend(task("x", &[R::Right], StopOn::Clean, 1));
    let side = Side::new("NEW", &other_cfg, &other, "fat");
    let c = compare(&base, &side).unwrap().0;
    assert_eq!(c.shared_tasks, ["c"]);
    assert_eq!(c.unpaired_tasks, 6);
    let none = Side::new("NEW", &config(&["zz"], 1, StopOn::Clean), &[], "fat");
    assert!(compare(&base, &none).is_none());
}

/// A comparison of `n` tasks where BASE is right on `b_right` and NEW
/// on `n_right` (NEW's right tasks a prefix of BASE's, or the reverse).
fn comparison(n: usize, b_right: usize, n_right: usize) -> Comparison {
    compared(n, b_right, n_right).0
}

/// The same with both sides' summaries.
fn compared(n: usize, b_right: usize, n_right: usize) -> (Comparison, Summaries) {
    let ids: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let cfg = config(&refs, 0, StopOn::Clean);
    let side = |right: usize| -> Vec<AttemptRecord> {
        ids.iter()
            .enumerate()
            .flat_map(|(i, id)| {
                let how = if i < right { R::Right } else { R::Wrong };
                task(id, &[how], StopOn::Clean, 0)
            })
            .collect()
    };
    let base = Side::new("BASE", &cfg, &side(b_right), "fat");
    let new = Side::new("NEW", &cfg, &side(n_right), "fat");
    compare(&base, &new).unwrap()
}

#[test]
fn the_default_gate_fails_a_significant_drop_only() {
    let t = Thresholds::default();
    // 6 discordant pairs all against NEW: p = 2/64 < 0.05.
    let worse = comparison(10, 8, 2);
    let why = regressions(&worse, &t);
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(why[0].contains("significantly"), "{why:?}");
    // The reverse is an improvement.
    assert!(regressions(&comparison(10, 2, 8), &t).is_empty());
    // A drop of 2 of 10 is not significant (p = 0.5).
    assert!(regressions(&comparison(10, 8, 6), &t).is_empty());
    assert!(regressions(&comparison(10, 5, 5), &t).is_empty());
}

#[test]
fn explicit_thresholds_replace_the_significance_rule() {
    // A 20-point drop, not significant.
    let c = comparison(10, 8, 6);
    let allow = |x| Thresholds {
        max_acc_drop: Some(x),
        ..Thresholds::default()
    };
    assert!(regressions(&c, &allow(20.0)).is_empty());
    let why = regressions(&c, &allow(10.0));
    assert!(
        why[0].contains("dropped 20.0 points (allowed 10)"),
        "{why:?}"
    );
    // A significant drop within an explicit allowance passes.
    assert!(regressions(&comparison(10, 8, 2), &allow(60.0)).is_empty());

    let mut c = comparison(10, 5, 5);
    c.base_kill_rate.total = Rate::new(1, 10);
    c.new_kill_rate.total = Rate::new(3, 10);
    let kill = |x| Thresholds {
        max_kill_rate_rise: Some(x),
        ..Thresholds::default()
    };
    assert!(regressions(&c, &kill(20.0)).is_empty());
    assert!(regressions(&c, &kill(19.0))[0].contains("kill rate rose 20.0 points"));

    c.base_latency_total.p50 = 100.0;
    c.new_latency_total.p50 = 150.0;
    let slow = |x| Thresholds {
        max_latency_rise: Some(x),
        ..Thresholds::default()
    };
    assert!(regressions(&c, &slow(0.5)).is_empty());
    let why = regressions(&c, &slow(0.2));
    assert!(why[0].contains("from 100 ms to 150 ms (+50%"), "{why:?}");
    // Without thresholds, latency and kills never fail a run.
    assert!(regressions(&c, &Thresholds::default()).is_empty());
}

#[test]
fn documents_list_flips_and_the_verdict() {
    let (c, summaries) = compared(10, 8, 2);
    let judged = [Judged {
        regressions: regressions(&c, &Thresholds::default()),
        comparison: c,
        summaries,
    }];
    let md = markdown(&judged, &[], Path::new("out"));
    assert!(md.contains("**Verdict: FAIL**"), "{md}");
    assert!(md.contains("Right in BASE, wrong in NEW: t2, t3, t4, t5, t6, t7"));
    assert!(md.contains("Wrong in BASE, right in NEW: none"));
    assert!(md.contains("| 0 | 80.0% ["), "{md}");
    let page = html(&judged, &[]);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("src="));
    assert!(page.contains("Verdict: FAIL"));
    let json = serde_json::to_value(&judged).unwrap();
    assert_eq!(json[0]["now_wrong"].as_array().unwrap().len(), 6);
    assert!(json[0].get("summaries").is_none());
}

#[test]
fn arms_of_one_run_differ_by_declaration_other_runs_by_vary_only() {
    let (cfg, records) = two_arms();
    let base = Side::new("BASE", &cfg, &records, "fat");
    let c = compare(&base, &Side::new("NEW", &cfg, &records, "dynamic"))
        .unwrap()
        .0;
    let names: Vec<&str> = c
        .protocol_differences
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert!(names.contains(&"image.strategy"), "{names:?}");
    assert!(
        c.undeclared_differences.is_empty(),
        "the run declares its arms"
    );

    // Another run with more memory and another temperature.
    let mut other = cfg.clone();
    other.provenance.run_id = "u".into();
    other.provenance.fingerprints.clear();
    other.spec.execution.limits.memory_bytes *= 2;
    other.spec.model.generation.temperature = 0.5;
    let new = Side::new("NEW", &other, &records, "fat");
    let (mut c, summaries) = compare(&base, &new).unwrap();
    let names = |d: &[crate::record::Difference]| -> Vec<String> {
        d.iter().map(|x| x.name.clone()).collect()
    };
    let both = ["generation.temperature", "limits.memory"];
    assert_eq!(names(&c.protocol_differences), both);
    assert_eq!(names(&c.undeclared_differences), both);
    c.declare(&Vary::parse(&["generation".into()]).unwrap());
    assert_eq!(names(&c.undeclared_differences), ["limits.memory"]);

    // The documents say so at the top, and the JSON lists them.
    let judged = [Judged {
        regressions: Vec::new(),
        comparison: c.clone(),
        summaries,
    }];
    let md = markdown(&judged, &[], Path::new("out"));
    let top = md.lines().nth(2).unwrap();
    assert!(top.contains("UNDECLARED PROTOCOL DIFFERENCES"), "{md}");
    assert!(top.contains("limits.memory"), "{md}");
    assert!(
        md.contains("| generation.temperature | 0.0 | 0.5 | yes |"),
        "{md}"
    );
    assert!(
        md.contains("| limits.memory | 536870912 | 1073741824 | NO |"),
        "{md}"
    );
    assert!(html(&judged, &[]).contains("UNDECLARED PROTOCOL DIFFERENCES"));
    let json = serde_json::to_value(&judged).unwrap();
    assert_eq!(
        json[0]["undeclared_differences"][0]["name"],
        "limits.memory"
    );
    c.declare(&Vary::parse(&["limits.memory".into()]).unwrap());
    assert!(c.undeclared_differences.is_empty());
    let judged = [Judged {
        regressions: Vec::new(),
        comparison: c,
        summaries: judged[0].summaries.clone(),
    }];
    assert!(!markdown(&judged, &[], Path::new("out")).contains("UNDECLARED"));
}

#[test]
fn vary_takes_names_and_prefixes_and_refuses_typos() {
    let vary = Vary::parse(&["model".into(), " limits.pids ".into()]).unwrap();
    assert!(vary.declares("model.name") && vary.declares("model.file_hash"));
    assert!(vary.declares("limits.pids") && !vary.declares("limits.memory"));
    let err = Vary::parse(&["modle".into()]).unwrap_err().to_string();
    assert!(err.contains("`modle` names no fingerprint field"), "{err}");
    assert!(err.contains("model.name"), "{err}");
    assert!(
        Vary::parse(&["mod".into()]).is_err(),
        "a prefix is whole segments"
    );
}

#[test]
fn documents_state_the_minimum_detectable_difference() {
    // 10 tasks, 6 discordant: ψ = 0.6.
    let (c, summaries) = compared(10, 8, 2);
    let mdd = crate::report::stats::min_detectable_difference(10, 6).unwrap();
    assert_eq!(c.last().min_detectable_difference, Some(mdd));
    let judged = [Judged {
        regressions: Vec::new(),
        comparison: c,
        summaries,
    }];
    let md = markdown(&judged, &[], Path::new("out"));
    let want = format!(
        "no difference larger than {:.1} points could be seen",
        100.0 * mdd
    );
    assert!(md.contains(&want), "{md}");
    assert!(md.contains("Protocols: identical fingerprints."), "{md}");
    assert!(html(&judged, &[]).contains(&want));
}
