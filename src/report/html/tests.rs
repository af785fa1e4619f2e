use std::path::Path;

use serde_json::{json, Value};

use super::super::export::Exporter;
use super::super::summarize;
use super::super::testing::{config, render, task, two_arms, R};
use super::super::view::RunView;
use super::HtmlExporter;
use crate::kernel::ErrorInfo;
use crate::model::{Message, Role};
use crate::record::{AttemptRecord, RunConfig, StopOn};
use crate::sandbox::Verdict;

const HOSTILE: &str = "<script>alert('x')</script></script><!-- </SCRIPT> & \u{2028}";

/// Tasks a (right), b (KeyError then right: recovered), c (timeout then
/// wrong), with a hostile reply on a's round 0 and tags on a and c.
fn journal() -> (RunConfig, Vec<AttemptRecord>) {
    let (k, s) = (1, StopOn::Clean);
    let mut cfg = config(&["a", "b", "c"], k, s);
    cfg.provenance
        .task_tags
        .insert("a".into(), vec!["easy".into()]);
    cfg.provenance
        .task_tags
        .insert("c".into(), vec!["hard".into(), "slow".into()]);
    let mut records = task("a", &[R::Right], s, k);
    records[0].reply = Some(HOSTILE.into());
    records[0].prompt = vec![
        Message::text(Role::System, "You write Python."),
        Message::text(Role::User, "What is 6 times 7?"),
    ];
    let mut b = task("b", &[R::Raised("AttributeError"), R::Right], s, k);
    b[0].prompt = vec![
        Message::text(Role::System, "You write Python."),
        Message::text(Role::User, "Sum the list."),
    ];
    b[0].code = Some("xs = [1, 2, 3]\nxs.push(4)\nanswer = sum(xs)".into());
    b[0].outcome.as_mut().unwrap().error = Some(ErrorInfo {
        ename: "AttributeError".into(),
        evalue: "'list' object has no attribute 'push'".into(),
        traceback: vec![
            "-".repeat(75),
            "AttributeError                            Traceback (most recent call last)".into(),
            "Cell In[1], line 2\n      1 xs = [1, 2, 3]\n----> 2 xs.push(4)\n      3 answer = sum(xs)\n"
                .into(),
            "AttributeError: 'list' object has no attribute 'push'".into(),
        ],
    });
    records.extend(b);
    let mut c = task("c", &[R::Killed(Verdict::TimeoutWall), R::Wrong], s, k);
    c[1].outcome.as_mut().unwrap().stdout = "y".repeat(50_000);
    records.extend(c);
    (cfg, records)
}

/// The JSON blob the page's script reads.
fn data(page: &str) -> Value {
    let start = page.find("const DATA = ").expect("a DATA blob") + "const DATA = ".len();
    let end = start + page[start..].find(";\n").expect("the blob ends");
    serde_json::from_str(&page[start..end]).expect("the blob is JSON")
}

#[test]
fn one_self_contained_page_with_one_script_and_no_external_urls() {
    let (cfg, records) = journal();
    let page = render(&HtmlExporter, &cfg, &records).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    let lower = page.to_lowercase();
    assert_eq!(lower.matches("<script").count(), 1, "one script element");
    assert_eq!(
        lower.matches("</script").count(),
        1,
        "nothing closes it early"
    );
    assert_eq!(lower.matches("<style").count(), 1);
    for external in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
        "url(http",
        "url(//",
        "@import",
        "<link",
        "<iframe",
    ] {
        assert!(!lower.contains(external), "`{external}` in the page");
    }
    // The headline numbers are there, with intervals.
    assert!(page.contains("<h2>Accuracy by round</h2>"));
    assert!(page.contains("Acc@1"));
    assert!(
        page.contains("66.7% ["),
        "Acc@1 of 2 of 3 with its interval"
    );
}

#[test]
fn a_hostile_reply_is_data_not_markup() {
    let (cfg, records) = journal();
    let page = render(&HtmlExporter, &cfg, &records).unwrap();
    assert!(!page.contains("<script>alert"));
    assert!(!page.contains("<!-- </SCRIPT>"));
    assert!(page.contains("\\u003cscript\\u003ealert('x')\\u003c/script\\u003e"));
    let d = data(&page);
    // ...and the script gets the reply back exactly.
    assert_eq!(d["tasks"][0]["rounds"][0]["reply"]["text"], HOSTILE);
}

#[test]
fn hostile_names_in_the_headline_are_escaped() {
    let (mut cfg, records) = journal();
    cfg.provenance.model = "<img src=x onerror=alert(1)>".into();
    let page = render(&HtmlExporter, &cfg, &records).unwrap();
    assert!(!page.contains("<img src=x"));
    assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));
}

/// The data of a small fixed journal, field by field (the golden file of
/// this exporter: what the page shows comes from here).
#[test]
fn task_data_of_a_fixed_journal() {
    let (cfg, records) = journal();
    let d = data(&render(&HtmlExporter, &cfg, &records).unwrap());
    assert_eq!(d["arms"], json!(["fat"]));
    assert_eq!(d["tags"], json!(["easy", "hard", "slow"]));
    assert_eq!(
        d["strings"],
        json!(["You write Python.", "What is 6 times 7?", "Sum the list."])
    );
    let tasks = d["tasks"].as_array().unwrap();
    let summary: Vec<Value> = tasks
        .iter()
        .map(|t| {
            json!([
                t["id"],
                t["tags"],
                t["first"],
                t["last"],
                t["killed"],
                t["finished"],
                t["stop"],
                t["rounds"].as_array().unwrap().len()
            ])
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            json!(["a", ["easy"], true, true, false, true, "clean_answer", 1]),
            json!(["b", null, false, true, false, true, "rounds_exhausted", 2]),
            json!([
                "c",
                ["hard", "slow"],
                false,
                false,
                true,
                true,
                "rounds_exhausted",
                2
            ]),
        ]
    );
    let a0 = &tasks[0]["rounds"][0];
    assert_eq!(a0["prompt"], json!([["system", 0], ["user", 1]]));
    assert_eq!(
        tasks[1]["rounds"][0]["prompt"],
        json!([["system", 0], ["user", 2]])
    );
    assert_eq!(a0["code"], json!({"text": "x = 1"}));
    assert_eq!(a0["verdict"], "ok");
    assert_eq!(a0["ms"], json!([10.0, 5.0, 16.0]));
    assert_eq!(a0["tokens"], json!([100, 20]));
    assert_eq!(a0["check"]["rule"], "number:abs_tol");

    let b0 = &tasks[1]["rounds"][0];
    assert_eq!(b0["verdict"], "error");
    assert_eq!(
        b0["error"],
        "AttributeError: 'list' object has no attribute 'push'"
    );
    let parsed = b0["traceback"]["text"].as_str().unwrap();
    assert!(
        parsed.starts_with("AttributeError: 'list' object has no attribute 'push'"),
        "{parsed}"
    );
    assert!(parsed.contains("line 2 of your code"), "{parsed}");
    assert!(parsed.contains("xs.push(4)"), "{parsed}");
    assert!(b0["traceback_raw"]["text"]
        .as_str()
        .unwrap()
        .contains("Traceback (most recent call last)"));
    assert_eq!(b0["feedback_kind"], "error");

    let c = &tasks[2]["rounds"];
    assert_eq!(c[0]["verdict"], "timeout_wall");
    assert_eq!(c[0]["killed"], true);
    // Huge output is shortened, and says so.
    let stdout = &c[1]["stdout"];
    assert_eq!(stdout["full"], 50_000);
    let kept = stdout["text"].as_str().unwrap();
    assert!(kept.chars().count() <= 20_000);
    assert!(kept.contains("characters cut"));
}

#[test]
fn several_arms_give_a_row_per_task_and_arm_and_the_strategies_table() {
    let (cfg, records) = two_arms();
    let page = render(&HtmlExporter, &cfg, &records).unwrap();
    assert!(page.contains("<h2>Strategies</h2>"));
    assert!(page.contains("<th>fat (baseline)</th><th>dynamic</th>"));
    assert!(page.contains("<code>dynamic</code> vs <code>fat</code>: 5 shared tasks"));
    let d = data(&page);
    assert_eq!(d["arms"], json!(["fat", "dynamic"]));
    let rows: Vec<String> = d["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            format!(
                "{}/{}",
                t["arm"].as_str().unwrap(),
                t["id"].as_str().unwrap()
            )
        })
        .collect();
    let ids = ["a", "b", "c", "d", "e", "f"];
    let expected: Vec<String> = ["fat", "dynamic"]
        .iter()
        .flat_map(|arm| ids.iter().map(move |id| format!("{arm}/{id}")))
        .collect();
    assert_eq!(rows, expected);
    // dynamic/f was interrupted: shown, not finished.
    assert_eq!(d["tasks"][11]["finished"], false);
}

#[test]
fn the_self_repair_tables_have_an_arm_column() {
    let (mut cfg, records) = two_arms();
    cfg.spec.policy.after_failure = crate::record::AfterFailure::Resample;
    let page = render(&HtmlExporter, &cfg, &records).unwrap();
    let section = page
        .split("<h2>Self-repair</h2>")
        .nth(1)
        .and_then(|s| s.split("<h2>").next())
        .expect("a Self-repair section");
    for wanted in [
        "<h3>Accuracy at comparable budgets</h3>",
        "<th>budget (round r)</th><th>tokens</th><th>fat</th><th>dynamic</th>",
        "<tr><td>1</td><td>160</td><td>66.7%</td><td>72.2%</td></tr>",
        "<tr><td>fat</td><td>0 → 1</td><td>3</td><td>0</td><td>1</td><td>2</td></tr>",
        "<td>dynamic</td><td>2</td><td>83.3%</td>",
        "<h3>Failure classes: round 0 against round 1</h3>",
    ] {
        assert!(section.contains(wanted), "no `{wanted}` in\n{section}");
    }
}

#[test]
fn labels_are_shown() {
    let (mut cfg, mut records) = journal();
    cfg.provenance.synthetic_model = true;
    cfg.spec.policy.stop_on = StopOn::Correct;
    for r in &mut records {
        r.synthetic_model = true;
        r.stop_on = StopOn::Correct;
    }
    cfg.provenance.sandbox.confined = false;
    let page = render(&HtmlExporter, &cfg, &records).unwrap();
    assert!(page.contains("<p class=\"label\">SYNTHETIC MODEL"));
    assert!(page.contains("<p class=\"label\">ORACLE FEEDBACK"));
    assert!(page.contains("<p class=\"label\">UNCONFINED"));
}

#[test]
fn skipped_records_are_listed_escaped_only_when_there_are_some() {
    let (mut cfg, records) = journal();
    let page = render(&HtmlExporter, &cfg, &records).unwrap();
    assert!(!page.contains("id=\"skipped\""));
    cfg.spec.tasks.skip_invalid = true;
    cfg.provenance.skipped = vec![crate::task::load::Skipped {
        id: Some("7".into()),
        file: "data/da-dev-labels.jsonl".into(),
        line: 2,
        reason: format!("answer `{HOSTILE}` is given twice"),
    }];
    let page = render(&HtmlExporter, &cfg, &records).unwrap();
    let section = &page[page
        .find("<section id=\"skipped\">")
        .expect("a skipped section")..];
    assert!(section.contains("1 invalid dataset record(s)"));
    assert!(
        section.contains("<li>data/da-dev-labels.jsonl:2:"),
        "{section}"
    );
    assert!(section.contains("&lt;script&gt;alert"));
    assert!(!section.contains("<script>alert"));
}

#[test]
fn images_the_code_produced_are_embedded_from_the_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, mut records) = journal();
    let png = b"\x89PNG\r\n\x1a\nnot really".to_vec();
    std::fs::create_dir_all(dir.path().join("artifacts/a")).unwrap();
    std::fs::write(dir.path().join("artifacts/a/r0-000.png"), &png).unwrap();
    let artifact = |path: &str| {
        serde_json::from_value(json!({"path": path, "mime": "image/png", "bytes": png.len()}))
            .unwrap()
    };
    records[0].outcome.as_mut().unwrap().artifacts =
        vec![artifact("r0-000.png"), artifact("r0-001.png")];
    let summary = summarize(&cfg, &records);
    let view = RunView {
        dir: dir.path(),
        config: &cfg,
        records: &records,
        summary: &summary,
        plots: &[],
    };
    let d = data(&HtmlExporter.render(&view).unwrap());
    let images = &d["tasks"][0]["rounds"][0]["artifacts"];
    assert_eq!(images[0]["path"], "artifacts/a/r0-000.png");
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&png);
    assert_eq!(images[0]["src"], format!("data:image/png;base64,{b64}"));
    assert!(images[1]["src"].is_null());
    assert!(images[1]["missing"]
        .as_str()
        .unwrap()
        .starts_with("not found in the run directory"));
}

#[test]
fn plots_are_inlined_with_their_title() {
    let (cfg, records) = journal();
    let summary = summarize(&cfg, &records);
    let plot = super::super::Plot {
        name: "recovery".into(),
        title: "Accuracy by round <95% band>".into(),
        svg: "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"><rect/></svg>"
            .into(),
        files: vec![],
    };
    let view = RunView {
        dir: Path::new(""),
        config: &cfg,
        records: &records,
        summary: &summary,
        plots: std::slice::from_ref(&plot),
    };
    let page = HtmlExporter.render(&view).unwrap();
    assert!(page.contains(
        "<figure class=\"plot\" id=\"plot-recovery\"><svg xmlns=\"http://www.w3.org/2000/svg\"><rect/></svg>\
         <figcaption>Accuracy by round &lt;95% band&gt;</figcaption></figure>"
    ));
    assert!(!page.contains("<?xml"));
}
