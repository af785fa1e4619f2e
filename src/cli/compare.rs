//! `retrace compare BASE NEW`: two runs paired on their shared tasks; exit
//! 1 when NEW is worse than BASE beyond the thresholds (a CI gate), 2 when
//! their protocols differ in a field `--vary` does not declare.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::Args;
use retrace::harness::{journal, read_config, HarnessError};
use retrace::record::{AttemptRecord, RunConfig};
use retrace::report::compare::{
    self, pair_arms, regressions, Comparison, Judged, Side, Thresholds, Vary,
};
use retrace::report::false_alarm::{self, harm_rise, FalseAlarm};
use retrace::report::metrics::arm_names;
use retrace::util::file_name::file_name;
use retrace::util::terminal;

use super::Failure;

#[derive(Args)]
pub struct CompareArgs {
    /// The reference run directory; `DIR:ARM` picks one strategy arm.
    pub base: String,
    /// The run under test; `DIR:ARM` picks one arm (`RUN:fat RUN:dynamic`
    /// compares two arms of one run).
    pub new: String,
    /// Where compare.md, compare.html and compare.json go [default:
    /// NEW/compare-<base run id>].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Compare this arm of both runs (else every arm both have).
    #[arg(long)]
    pub arm: Option<String>,
    /// Fail when last-round accuracy drops more than X percentage points
    /// (replaces the default: fail on a significant drop, McNemar p < 0.05).
    #[arg(long, value_name = "X")]
    pub max_acc_drop: Option<f64>,
    /// Fail when the kill rate rises more than X percentage points.
    #[arg(long, value_name = "X")]
    pub max_kill_rate_rise: Option<f64>,
    /// Fail when the p50 round time rises more than X times BASE's (0.2:
    /// 20% slower).
    #[arg(long, value_name = "X")]
    pub max_latency_rise: Option<f64>,
    /// Fail when the false-alarm control's harm rate rises more than X
    /// percentage points (both runs need `--false-alarm N`).
    #[arg(long, value_name = "X")]
    pub max_harm_rise: Option<f64>,
    /// The protocol fingerprint fields meant to differ: dotted names or
    /// their prefixes (`model`, `limits.memory`, `policy.feedback`).
    /// When any other field differs, compare says which and exits 2
    /// without writing. Two arms of one run need none.
    #[arg(long, value_name = "FIELD", value_delimiter = ',')]
    pub vary: Vec<String>,
    /// Write the comparison even when fields --vary does not name differ;
    /// every document then says so at the top.
    #[arg(long)]
    pub allow_differences: bool,
}

struct Loaded {
    dir: PathBuf,
    arm: Option<String>,
    config: RunConfig,
    records: Vec<AttemptRecord>,
}

pub async fn run(args: CompareArgs) -> Result<i32, Failure> {
    let vary = Vary::parse(&args.vary).map_err(|e| Failure::usage(anyhow!(e)))?;
    let base = load(&args.base, args.arm.as_deref())?;
    let new = load(&args.new, args.arm.as_deref())?;
    let pairs = pair_arms(
        &arm_names(&base.config),
        &arm_names(&new.config),
        base.arm.as_deref(),
        new.arm.as_deref(),
    )
    .map_err(|e| Failure::usage(anyhow!(e)))?;
    let thresholds = Thresholds {
        max_acc_drop: args.max_acc_drop,
        max_kill_rate_rise: args.max_kill_rate_rise,
        max_latency_rise: args.max_latency_rise,
        ..Thresholds::default()
    };
    let mut judged = Vec::new();
    for (b, n) in &pairs {
        let bs = Side::new("BASE", &base.config, &base.records, b);
        let ns = Side::new("NEW", &new.config, &new.records, n);
        let Some((mut c, summaries)) = compare::compare(&bs, &ns) else {
            return Err(Failure::usage(anyhow!(
                "{} and {} share no finished task",
                bs.label,
                ns.label
            )));
        };
        c.declare(&vary);
        print_protocol(&c);
        judged.push(Judged {
            regressions: regressions(&c, &thresholds),
            comparison: c,
            summaries,
        });
    }
    if let (Some(max), Some(first)) = (args.max_harm_rise, judged.first_mut()) {
        let (b, n) = (harm(&base, "BASE")?, harm(&new, "NEW")?);
        let rate = |f: &FalseAlarm| f.harm_rate.map_or(0.0, |r| 100.0 * r.value);
        println!("harm rate {:.1}% -> {:.1}%", rate(&b), rate(&n));
        first.regressions.extend(harm_rise(&b, &n, max));
    }
    let mut undeclared: Vec<&str> = judged
        .iter()
        .flat_map(|j| &j.comparison.undeclared_differences)
        .map(|d| d.name.as_str())
        .collect();
    undeclared.sort_unstable();
    undeclared.dedup();
    if !undeclared.is_empty() && !args.allow_differences {
        return Err(Failure::usage(anyhow!(
            "the protocols also differ in {} (not declared): name the fields meant to differ \
             with --vary, or pass --allow-differences to write a labelled comparison anyway",
            undeclared.join(", ")
        )));
    }
    let out = args.out.clone().unwrap_or_else(|| {
        let mut name = format!("compare-{}", base.config.provenance.run_id);
        if base.arm.is_some() || new.arm.is_some() {
            for (b, n) in &pairs {
                name.push_str(&format!("-{b}-{n}"));
            }
        }
        // Run ids and arm names come from the runs' files.
        new.dir.join(file_name(&name))
    });
    let files = compare::write(&out, &judged).map_err(Failure::infra)?;
    for j in &judged {
        print(j);
    }
    for f in &files {
        eprintln!("wrote {}", terminal::line(&f.display().to_string()));
    }
    let worse = judged.iter().any(|j| !j.regressions.is_empty());
    println!(
        "{}",
        if worse {
            "FAIL: NEW is worse than BASE"
        } else {
            "ok: NEW is not worse than BASE beyond the thresholds"
        }
    );
    Ok(i32::from(worse))
}

/// The fingerprint fields that differ, each marked declared or not.
fn print_protocol(c: &Comparison) {
    if c.protocol_differences.is_empty() {
        println!(
            "{} -> {}: identical protocols",
            terminal::line(&c.base),
            terminal::line(&c.new)
        );
        return;
    }
    println!(
        "{} -> {}: protocols differ in",
        terminal::line(&c.base),
        terminal::line(&c.new)
    );
    for d in &c.protocol_differences {
        let undeclared = c.undeclared_differences.iter().any(|u| u.name == d.name);
        let note = if undeclared { "  (NOT DECLARED)" } else { "" };
        println!(
            "  {}: {} -> {}{note}",
            terminal::line(&d.name),
            terminal::line(&d.left),
            terminal::line(&d.right)
        );
    }
}

fn print(j: &Judged) {
    let c = &j.comparison;
    let last = c.last();
    println!(
        "{} -> {} on {} shared tasks: Acc@{} {:.1}% -> {:.1}% ({:+.1} points, 95% CI [{:+.1}, {:+.1}]), McNemar b={} c={} p={:.4}",
        terminal::line(&c.base),
        terminal::line(&c.new),
        c.shared_tasks.len(),
        last.round,
        100.0 * last.base.value,
        100.0 * last.new.value,
        100.0 * last.difference,
        100.0 * last.difference_ci.0,
        100.0 * last.difference_ci.1,
        last.mcnemar.b,
        last.mcnemar.c,
        last.mcnemar.p_value
    );
    let kill = |k: &retrace::report::metrics::KillRate| k.total.map_or(0.0, |r| 100.0 * r.value);
    println!(
        "kill rate {:.1}% -> {:.1}%  round time p50 {:.0} ms -> {:.0} ms",
        kill(&c.base_kill_rate),
        kill(&c.new_kill_rate),
        c.base_latency_total.p50,
        c.new_latency_total.p50
    );
    println!(
        "{}",
        retrace::report::power_sentence(
            last.min_detectable_difference,
            c.shared_tasks.len() as u64
        )
    );
    if !c.now_wrong.is_empty() {
        println!(
            "right in BASE, wrong in NEW: {}",
            terminal::line(&c.now_wrong.join(", "))
        );
    }
    if !c.now_right.is_empty() {
        println!(
            "wrong in BASE, right in NEW: {}",
            terminal::line(&c.now_right.join(", "))
        );
    }
    for r in &j.regressions {
        println!("regression: {}", terminal::line(&r.to_string()));
    }
}

/// `DIR` or `DIR:ARM` (a directory whose own name holds a `:` still works:
/// the whole text is tried as a directory first).
fn split_spec(spec: &str) -> (PathBuf, Option<String>) {
    let whole = Path::new(spec);
    if whole.join("run.json").exists() {
        return (whole.to_path_buf(), None);
    }
    match spec.rsplit_once(':') {
        Some((dir, arm)) if !arm.is_empty() && !arm.contains('/') => {
            (PathBuf::from(dir), Some(arm.to_string()))
        }
        _ => (whole.to_path_buf(), None),
    }
}

fn load(spec: &str, arm: Option<&str>) -> Result<Loaded, Failure> {
    let (dir, own) = split_spec(spec);
    let config = read_config(&dir).map_err(failure)?;
    let records = journal::read(&dir.join("results.jsonl")).map_err(failure)?;
    Ok(Loaded {
        dir,
        arm: own.or(arm.map(str::to_owned)),
        config,
        records,
    })
}

/// The false-alarm control of a run, for `--max-harm-rise`.
fn harm(run: &Loaded, side: &str) -> Result<FalseAlarm, Failure> {
    let controls = false_alarm::read(&run.dir).map_err(Failure::infra)?;
    FalseAlarm::of(&run.config, &run.records, &controls).ok_or_else(|| {
        Failure::usage(anyhow!(
            "--max-harm-rise: {side} ({}) has no false-alarm control; make it with \
             `retrace run --false-alarm N`",
            terminal::line(&run.dir.display().to_string())
        ))
    })
}

fn failure(e: HarnessError) -> Failure {
    if e.is_usage() {
        Failure::usage(e)
    } else {
        Failure::infra(e)
    }
}
