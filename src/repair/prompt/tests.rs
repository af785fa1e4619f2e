use super::*;
use crate::kernel::ErrorInfo;

#[test]
fn defaults_render_with_their_placeholders() {
    let t = Templates::default();
    for name in TemplateName::ALL {
        let vars: Vec<(&str, &str)> = name.placeholders().iter().map(|p| (*p, "VALUE")).collect();
        let text = t.render(name, &vars).unwrap();
        assert!(!text.contains("{{"), "{name}: {text}");
        // Every known placeholder is used by the default template.
        assert!(
            text.matches("VALUE").count() >= name.placeholders().len(),
            "{name}"
        );
    }
    let system = t
        .render(TemplateName::System, &[("packages_policy", "POLICY")])
        .unwrap();
    assert!(system.contains("POLICY"));
    assert!(system.contains("```python") && system.contains("`answer`"));
    // Answer formats belong to the tasks that need them.
    assert!(!system.contains("@name[value]"));
    // The review prompt is what the synthetic models and the keep rule
    // recognise.
    let review = t.text(TemplateName::Review);
    assert!(review.starts_with(crate::model::REVIEW_MARKER), "{review}");
    assert!(review.contains(crate::model::KEEP_TOKEN), "{review}");
}

#[test]
fn template_errors_name_template_and_placeholder() {
    let t = Templates::default();
    let e = t
        .render(TemplateName::Repair, &[("feedback", "x"), ("stdout", "y")])
        .unwrap_err();
    assert!(matches!(e, PromptError::Unfilled { .. }));
    let msg = e.to_string();
    assert!(
        msg.contains("repair.md") && msg.contains("{{rounds_left}}"),
        "{msg}"
    );

    let e = t
        .render(
            TemplateName::RepairNoCode,
            &[("rounds_left", "2"), ("feedback", "x")],
        )
        .unwrap_err();
    assert!(matches!(e, PromptError::UnknownVariable { .. }));
    assert!(e.to_string().contains("feedback"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("task.md"),
        "Q: {{ question }}\n{{question_id}}",
    )
    .unwrap();
    let e = Templates::from_dir(dir.path()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, PromptError::UnknownPlaceholder { .. }));
    assert!(
        msg.contains("task.md") && msg.contains("{{question_id}}"),
        "{msg}"
    );
}

#[test]
fn overrides_and_single_pass() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("repair_no_code.md"),
        "No code. {{ rounds_left }} left. {{ not a placeholder }} {{}}",
    )
    .unwrap();
    let t = Templates::from_dir(dir.path()).unwrap();
    assert_ne!(t.source(TemplateName::RepairNoCode), "builtin");
    assert_eq!(t.source(TemplateName::Repair), "builtin");
    assert_eq!(
        t.render(
            TemplateName::RepairNoCode,
            &[("rounds_left", "{{rounds_left}}")]
        )
        .unwrap(),
        "No code. {{rounds_left}} left. {{ not a placeholder }} {{}}"
    );
    assert_eq!(
        t.text(TemplateName::System),
        Templates::default().text(TemplateName::System)
    );
    assert!(Templates::from_dir(Path::new("/nonexistent/prompts")).is_ok());
}

fn outcome(verdict: &str, stdout: &str, error: Option<ErrorInfo>) -> Outcome {
    let mut o = Outcome::ended(verdict.parse().unwrap(), 1.0);
    o.status = crate::kernel::ExecStatus::Error;
    o.stdout = stdout.into();
    o.error = error;
    o
}

#[test]
fn feedback_picks_the_right_parts() {
    let limits = SandboxLimits::default();
    let code = "import time\nprint(\"waiting\")\ntime.sleep(100)\n";
    let ki = ErrorInfo {
        ename: "KeyboardInterrupt".into(),
        evalue: String::new(),
        traceback: vec![
            "KeyboardInterrupt                         Traceback (most recent call last)".into(),
            "Cell In[1], line 3\n      1 import time\n      2 print(\"waiting\")\n----> 3 time.sleep(100)\n".into(),
            "KeyboardInterrupt: ".into(),
        ],
    };
    let o = outcome("timeout_wall", "waiting\n", Some(ki));
    let f = feedback(&o, code, &limits, 2000);
    assert!(f.starts_with("Your code did not finish within 10s"), "{f}");
    assert!(
        f.contains("Where your code was when it was stopped:"),
        "{f}"
    );
    assert!(f.contains("--> 3 | time.sleep(100)"), "{f}");
    assert!(f.ends_with("Output (stdout):\nwaiting"), "{f}");
    let parts = feedback_parts(&o, code, &limits, 2000);
    assert_eq!(parts.stdout, "waiting");
    assert!(!parts.error.contains("Output (stdout)"));

    // Huge stdout: at most a quarter of the budget, head and tail kept.
    let big: String = (0..5000).map(|i| format!("row {i}\n")).collect();
    let o = outcome("ok", &big, None);
    let f = feedback(&o, "print(1)\n", &limits, 1000);
    assert!(f.chars().count() <= 1000);
    assert!(f.starts_with("Your code ran without errors."));
    assert!(f.contains("row 0\n") && f.ends_with("row 4999"), "{f}");
    let parts = feedback_parts(&o, "", &limits, 1000);
    assert!(parts.stdout.chars().count() <= 250);
    assert_eq!(
        feedback_parts(&outcome("ok", "", None), "", &limits, 100).stdout,
        NO_OUTPUT
    );

    // Kill without an exception; the restart sentence is appended.
    let mut o = outcome("oom_killed", "", None);
    o.state_lost = true;
    let f = feedback(&o, "x = 1\n", &limits, 500);
    assert!(
        f.contains("512M") && f.ends_with("redefine everything you need."),
        "{f}"
    );

    // No traceback from IPython (ExceptionGroup): stderr carries it.
    let mut o = outcome(
        "error",
        "",
        Some(ErrorInfo {
            ename: "ExceptionGroup".into(),
            evalue: "two problems (2 sub-exceptions)".into(),
            traceback: vec![],
        }),
    );
    o.stderr = "  |   File \"/tmp/ipykernel_2/3893537743.py\", line 2, in <module>\n  | ExceptionGroup: two problems\n    | ValueError: bad a\n".into();
    let f = feedback(&o, "", &limits, 1000);
    assert!(
        f.starts_with("ExceptionGroup: two problems (2 sub-exceptions)"),
        "{f}"
    );
    assert!(
        f.contains("<cell>\", line 2") && f.contains("ValueError: bad a"),
        "{f}"
    );
    assert!(!f.contains("/tmp/"), "{f}");

    for budget in [50, 120, 300, 3000] {
        assert!(feedback(&o, "", &limits, budget).chars().count() <= budget);
    }
}

#[test]
fn helpers() {
    assert_eq!(describe_files(&[]), "(none)");
    assert_eq!(
        describe_files(&[
            ("sales.csv", 2048),
            ("notes.txt", 10),
            ("big.bin", 1_500_000)
        ]),
        "- sales.csv (2K)\n- notes.txt (10 bytes)\n- big.bin (1.4M)"
    );
    let art = |p: &str, m: &str| Artifact {
        path: p.into(),
        mime: m.into(),
        bytes: 1,
        base64: None,
        name: None,
    };
    assert_eq!(describe_images(&[]), "no images");
    assert_eq!(
        describe_images(&[
            art("run/cell1-1.png", "image/png"),
            art("x.svg", "image/svg+xml")
        ]),
        "2 images: cell1-1.png, x.svg"
    );
}

/// A `live` run's prompts hash as they did before execution modes: the
/// eleven templates there were (computed from them before the modes'
/// sentences existed); a mode's sentence counts only for a run with it.
#[test]
fn a_live_runs_prompt_hash_is_unchanged_and_a_modes_sentence_changes_it() {
    let t = Templates::default();
    let live = t.hash(&[ExecutionMode::Live]);
    assert_eq!(
        live,
        "a08c0390bb353765797241a95a49a7cf869b7aa65a8026028142cd4d9235524d"
    );
    assert_eq!(t.hash(&[]), live);
    let fresh = t.hash(&[ExecutionMode::Live, ExecutionMode::Fresh]);
    let both = t.hash(&[
        ExecutionMode::Live,
        ExecutionMode::Replay,
        ExecutionMode::Fresh,
    ]);
    assert_ne!(fresh, live);
    assert_ne!(both, fresh);
    assert_eq!(t.hash(&[ExecutionMode::Fresh, ExecutionMode::Live]), fresh);
}
