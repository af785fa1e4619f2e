//! `retrace compare`: two runs (or two arms of runs) paired on the tasks
//! both finished: per-round accuracy with McNemar's exact test and a
//! paired bootstrap interval of the difference, recovery, kill rate by
//! reason, latency by round, the tasks that flipped; and the CI decision.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::metrics::{arm_names, KillRate, Percentiles, Rate};
use super::strategies::McNemar;
use super::task_rounds::{by_task, TaskRounds};
use super::{percent, plots, summarize, Plot, ReportError, Summary};
use crate::kernel::ExecutorInfo;
use crate::record::{AttemptRecord, RunConfig};
use crate::util::stats::percentile;

/// Bootstrap resamples, and the seed that makes the interval reproducible.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;
pub const BOOTSTRAP_SEED: u64 = 0x5eed_c0de;

/// One side of a comparison: one arm of one run.
#[derive(Debug, Clone)]
pub struct Side {
    /// How reports name it, e.g. `BASE 20261201-…-oracle [fat]`.
    pub label: String,
    pub config: RunConfig,
    pub strategy: String,
    /// The arm's records only.
    pub records: Vec<AttemptRecord>,
}

impl Side {
    /// The arm `strategy` of a run (a one-arm run's records are all its own,
    /// whatever strategy they name, as in its summary).
    pub fn new(role: &str, config: &RunConfig, records: &[AttemptRecord], strategy: &str) -> Side {
        let one_arm = arm_names(config).len() == 1;
        Side {
            label: format!("{role} {} [{strategy}]", config.provenance.run_id),
            config: config.clone(),
            strategy: strategy.to_string(),
            records: records
                .iter()
                .filter(|r| one_arm || r.strategy == strategy)
                .cloned()
                .collect(),
        }
    }

    /// The same arm restricted to `ids` (config and records), summarized as
    /// a one-arm run.
    fn restricted(&self, ids: &[String]) -> (RunConfig, Vec<AttemptRecord>) {
        let mut config = self.config.clone();
        config.provenance.task_ids = ids.to_vec();
        if let Some(arm) = config
            .spec
            .arms()
            .into_iter()
            .find(|a| a.name == self.strategy)
        {
            config.spec = arm.spec;
        }
        let records = self
            .records
            .iter()
            .filter(|r| ids.contains(&r.task_id))
            .cloned()
            .collect();
        (config, records)
    }
}

/// Which arms to compare: explicit picks win; else two one-arm runs are
/// compared whatever their strategies; else the arms both runs have, in
/// BASE's order. `Err` says why nothing can be paired.
pub fn pair_arms(
    base: &[String],
    new: &[String],
    base_pick: Option<&str>,
    new_pick: Option<&str>,
) -> Result<Vec<(String, String)>, String> {
    let pick = |arms: &[String], p: Option<&str>, role: &str| -> Result<Vec<String>, String> {
        match p {
            Some(p) if arms.iter().any(|a| a == p) => Ok(vec![p.to_string()]),
            Some(p) => Err(format!(
                "{role} has no arm `{p}` (its arms: {})",
                arms.join(", ")
            )),
            None => Ok(arms.to_vec()),
        }
    };
    let (b, n) = (pick(base, base_pick, "BASE")?, pick(new, new_pick, "NEW")?);
    if b.len() == 1 && n.len() == 1 {
        return Ok(vec![(b[0].clone(), n[0].clone())]);
    }
    let pairs: Vec<(String, String)> = b
        .iter()
        .filter(|a| n.contains(a))
        .map(|a| (a.clone(), a.clone()))
        .collect();
    if pairs.is_empty() {
        return Err(format!(
            "the runs share no arm (BASE: {}; NEW: {}); pick one each with RUN:ARM or --arm",
            b.join(", "),
            n.join(", ")
        ));
    }
    Ok(pairs)
}

/// Acc@r of both sides on the shared tasks.
#[derive(Debug, Clone, Serialize)]
pub struct RoundComparison {
    pub round: u32,
    pub base: Rate,
    pub new: Rate,
    /// new − base, as a fraction.
    pub difference: f64,
    /// Paired bootstrap 95% interval of the difference.
    pub difference_ci: (f64, f64),
    /// b: BASE right and NEW wrong; c: the reverse.
    pub mcnemar: McNemar,
}

/// p50/p95 of model and exec time of one round, both sides (ms).
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRound {
    pub round: u32,
    pub base_model: Percentiles,
    pub new_model: Percentiles,
    pub base_exec: Percentiles,
    pub new_exec: Percentiles,
}

/// One arm of BASE against one arm of NEW.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub base: String,
    pub new: String,
    pub base_model: String,
    pub new_model: String,
    /// Where each side's kernels ran (absent when local).
    #[serde(skip_serializing_if = "ExecutorInfo::is_local")]
    pub base_executor: ExecutorInfo,
    #[serde(skip_serializing_if = "ExecutorInfo::is_local")]
    pub new_executor: ExecutorInfo,
    /// Tasks both sides finished, in BASE's order.
    pub shared_tasks: Vec<String>,
    /// Tasks of one side only (or unfinished on the other): not paired.
    pub unpaired_tasks: usize,
    /// r = 0..=max(K of BASE, K of NEW); a task's answer is carried past
    /// its last round.
    pub rounds: Vec<RoundComparison>,
    pub base_recovery: Option<Rate>,
    pub new_recovery: Option<Rate>,
    pub base_kill_rate: KillRate,
    pub new_kill_rate: KillRate,
    /// Round time (model + exec + the rest), all rounds.
    pub base_latency_total: Percentiles,
    pub new_latency_total: Percentiles,
    pub latency_by_round: Vec<LatencyRound>,
    /// Right in BASE, wrong in NEW at the last round.
    pub now_wrong: Vec<String>,
    /// Wrong in BASE, right in NEW at the last round.
    pub now_right: Vec<String>,
    /// Both sides summarized over the shared tasks (for the chart).
    #[serde(skip)]
    pub summaries: (Summary, Summary),
}

impl Comparison {
    /// The last round's comparison (there is always one).
    pub fn last(&self) -> &RoundComparison {
        self.rounds.last().expect("round 0 at least")
    }
}

/// Pairs `base` and `new` on the tasks both finished. `None` when they
/// share none.
pub fn compare(base: &Side, new: &Side) -> Option<Comparison> {
    let base_refs: Vec<&AttemptRecord> = base.records.iter().collect();
    let new_refs: Vec<&AttemptRecord> = new.records.iter().collect();
    let b_tasks = by_task(&base.config, &base_refs);
    let n_tasks = by_task(&new.config, &new_refs);
    let finished_new: Vec<&String> = new
        .config
        .provenance
        .task_ids
        .iter()
        .zip(&n_tasks)
        .filter(|(_, t)| t.finished())
        .map(|(id, _)| id)
        .collect();
    let mut pairs: Vec<(&String, &TaskRounds, &TaskRounds)> = Vec::new();
    for (id, bt) in base.config.provenance.task_ids.iter().zip(&b_tasks) {
        if !bt.finished() || !finished_new.contains(&id) {
            continue;
        }
        let i = new
            .config
            .provenance
            .task_ids
            .iter()
            .position(|x| x == id)?;
        pairs.push((id, bt, &n_tasks[i]));
    }
    if pairs.is_empty() {
        return None;
    }
    let ids: Vec<String> = pairs.iter().map(|(id, _, _)| (*id).clone()).collect();
    let all: std::collections::BTreeSet<&String> = base
        .config
        .provenance
        .task_ids
        .iter()
        .chain(&new.config.provenance.task_ids)
        .collect();
    let k = base
        .config
        .spec
        .policy
        .rounds
        .max(new.config.spec.policy.rounds) as usize;
    let n = pairs.len() as u64;
    let rounds = (0..=k)
        .map(|r| {
            let b: Vec<bool> = pairs.iter().map(|(_, t, _)| t.correct_at(r)).collect();
            let o: Vec<bool> = pairs.iter().map(|(_, _, t)| t.correct_at(r)).collect();
            let count = |v: &[bool]| v.iter().filter(|x| **x).count() as u64;
            let disc = |x: bool| {
                b.iter()
                    .zip(&o)
                    .filter(|(p, q)| **p == x && **q != x)
                    .count()
            };
            let (base_rate, new_rate) = (
                Rate::new(count(&b), n).expect("n > 0"),
                Rate::new(count(&o), n).expect("n > 0"),
            );
            RoundComparison {
                round: r as u32,
                base: base_rate,
                new: new_rate,
                difference: new_rate.value - base_rate.value,
                difference_ci: paired_bootstrap(&b, &o, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED),
                mcnemar: McNemar::new(disc(true) as u64, disc(false) as u64),
            }
        })
        .collect();
    let flipped = |to_right: bool| -> Vec<String> {
        pairs
            .iter()
            .filter(|(_, b, o)| b.correct_at(k) != to_right && o.correct_at(k) == to_right)
            .map(|(id, _, _)| (*id).clone())
            .collect()
    };
    let (bc, br) = base.restricted(&ids);
    let (nc, nr) = new.restricted(&ids);
    let (bs, ns) = (summarize(&bc, &br), summarize(&nc, &nr));
    let latency_by_round = (0..=k)
        .map(|r| {
            let phase = |records: &[AttemptRecord], exec: bool| {
                Percentiles::of(
                    records
                        .iter()
                        .filter(|x| x.round as usize == r && (!exec || x.executed()))
                        .map(|x| {
                            if exec {
                                x.timings_ms.exec
                            } else {
                                x.timings_ms.model
                            }
                        })
                        .collect(),
                )
            };
            LatencyRound {
                round: r as u32,
                base_model: phase(&br, false),
                new_model: phase(&nr, false),
                base_exec: phase(&br, true),
                new_exec: phase(&nr, true),
            }
        })
        .collect();
    Some(Comparison {
        base: base.label.clone(),
        new: new.label.clone(),
        base_model: base.config.provenance.model.clone(),
        new_model: new.config.provenance.model.clone(),
        base_executor: base.config.provenance.executor.clone(),
        new_executor: new.config.provenance.executor.clone(),
        unpaired_tasks: all.len() - ids.len(),
        shared_tasks: ids,
        rounds,
        base_recovery: bs.recovery_rate,
        new_recovery: ns.recovery_rate,
        base_kill_rate: bs.kill_rate.clone(),
        new_kill_rate: ns.kill_rate.clone(),
        base_latency_total: bs.latency_ms.total,
        new_latency_total: ns.latency_ms.total,
        latency_by_round,
        now_wrong: flipped(false),
        now_right: flipped(true),
        summaries: (bs, ns),
    })
}

/// The 95% percentile interval of mean(new) − mean(base) over `resamples`
/// resamples of the task pairs (with replacement), from a fixed seed: the
/// same journals always give the same interval.
pub fn paired_bootstrap(base: &[bool], new: &[bool], resamples: usize, seed: u64) -> (f64, f64) {
    let n = base.len().min(new.len());
    if n == 0 || resamples == 0 {
        return (0.0, 0.0);
    }
    let d: Vec<i64> = (0..n).map(|i| new[i] as i64 - base[i] as i64).collect();
    let mut rng = SplitMix64(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| {
            let sum: i64 = (0..n).map(|_| d[rng.below(n)]).sum();
            sum as f64 / n as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    (
        percentile(&means, 2.5).unwrap_or(0.0),
        percentile(&means, 97.5).unwrap_or(0.0),
    )
}

/// A small, seedable generator (Steele et al.'s SplitMix64): enough for
/// resampling, and no dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (multiply-shift; the bias is below 2^-32 for any n
    /// a run has).
    fn below(&mut self, n: usize) -> usize {
        ((self.next() as u128 * n as u128) >> 64) as usize
    }
}

/// When NEW counts as worse than BASE.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Largest allowed drop of last-round accuracy, in percentage points.
    /// Unset: a statistically significant drop fails (McNemar p < `alpha`
    /// with b > c).
    pub max_acc_drop: Option<f64>,
    /// Largest allowed rise of the kill rate, in percentage points.
    pub max_kill_rate_rise: Option<f64>,
    /// Largest allowed rise of the p50 round time, as a fraction of BASE's
    /// (0.2: NEW may be 20% slower).
    pub max_latency_rise: Option<f64>,
    pub alpha: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            max_acc_drop: None,
            max_kill_rate_rise: None,
            max_latency_rise: None,
            alpha: 0.05,
        }
    }
}

/// Why NEW is worse than BASE beyond the thresholds; empty when it is not.
pub fn regressions(c: &Comparison, t: &Thresholds) -> Vec<String> {
    let mut why = Vec::new();
    let last = c.last();
    let drop_pp = -100.0 * last.difference;
    match t.max_acc_drop {
        Some(max) if drop_pp > max + 1e-9 => why.push(format!(
            "Acc@{} dropped {drop_pp:.1} points (allowed {max})",
            last.round
        )),
        Some(_) => {}
        None if last.mcnemar.b > last.mcnemar.c && last.mcnemar.p_value < t.alpha => {
            why.push(format!(
                "Acc@{} dropped {drop_pp:.1} points, significantly (McNemar b={} c={} p={:.4} < {})",
                last.round, last.mcnemar.b, last.mcnemar.c, last.mcnemar.p_value, t.alpha
            ))
        }
        None => {}
    }
    if let Some(max) = t.max_kill_rate_rise {
        let rate = |k: &KillRate| k.total.map_or(0.0, |r| r.value);
        let rise = 100.0 * (rate(&c.new_kill_rate) - rate(&c.base_kill_rate));
        if rise > max + 1e-9 {
            why.push(format!("kill rate rose {rise:.1} points (allowed {max})"));
        }
    }
    if let Some(max) = t.max_latency_rise {
        let (b, n) = (c.base_latency_total.p50, c.new_latency_total.p50);
        if b > 0.0 && (n - b) / b > max + 1e-9 {
            why.push(format!(
                "p50 round time rose from {b:.0} ms to {n:.0} ms (+{:.0}%, allowed +{:.0}%)",
                100.0 * (n - b) / b,
                100.0 * max
            ));
        }
    }
    why
}

/// A comparison with its decision, as written and printed.
#[derive(Debug, Clone, Serialize)]
pub struct Judged {
    #[serde(flatten)]
    pub comparison: Comparison,
    /// Empty: NEW is not worse beyond the thresholds.
    pub regressions: Vec<String>,
}

/// Writes `compare.json`, `compare.md` and `compare.html` (with the chart
/// inlined) into `dir`; returns the files written.
pub fn write(dir: &Path, judged: &[Judged]) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let runs: Vec<(String, &Summary)> = judged
        .iter()
        .flat_map(|j| {
            // Short legend labels (run ids are long): side, model, arm.
            let c = &j.comparison;
            let (b, n) = (&c.summaries.0, &c.summaries.1);
            [
                (format!("BASE {} ({})", c.base_model, b.strategy), b),
                (format!("NEW {} ({})", c.new_model, n.strategy), n),
            ]
        })
        .collect();
    let labelled: Vec<(&str, &Summary)> = runs.iter().map(|(l, s)| (l.as_str(), *s)).collect();
    let plots = plots::draw_comparison(&labelled, dir)?;
    let mut written: Vec<PathBuf> = plots.iter().flat_map(|p| p.files.clone()).collect();
    let json = serde_json::to_string_pretty(judged).map_err(|e| ReportError::Render {
        file: "compare.json",
        source: Box::new(e),
    })?;
    for (name, text) in [
        ("compare.json", json),
        ("compare.md", markdown(judged, &plots, dir)),
        ("compare.html", html(judged, &plots)),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| ReportError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// One round of the comparison table, cell by cell (Markdown and HTML).
fn round_cells(r: &RoundComparison) -> [String; 7] {
    [
        r.round.to_string(),
        percent(Some(&r.base)),
        percent(Some(&r.new)),
        pp(r.difference),
        format!("[{}, {}]", pp(r.difference_ci.0), pp(r.difference_ci.1)),
        format!("{} / {}", r.mcnemar.b, r.mcnemar.c),
        format!("{:.4}", r.mcnemar.p_value),
    ]
}

fn pp(x: f64) -> String {
    format!("{:+.1}", 100.0 * x)
}

/// `p50 / p95`, or a dash when the round had no such time.
fn p50_p95(p: &Percentiles, unit: &str) -> String {
    if p.n == 0 {
        "–".into()
    } else {
        format!("{:.0} / {:.0}{unit}", p.p50, p.p95)
    }
}

fn ids(list: &[String]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}

fn kill_reasons(c: &Comparison) -> Vec<(String, u64, u64)> {
    let mut reasons: Vec<&String> = c
        .base_kill_rate
        .counts
        .keys()
        .chain(c.new_kill_rate.counts.keys())
        .collect();
    reasons.sort();
    reasons.dedup();
    reasons
        .into_iter()
        .map(|r| {
            let get = |k: &KillRate| k.counts.get(r).copied().unwrap_or(0);
            (r.clone(), get(&c.base_kill_rate), get(&c.new_kill_rate))
        })
        .collect()
}

/// `compare.md`: tables, flipped tasks, the decision, links to the chart.
/// Where the two sides' kernels ran, when either was not local: the
/// comparison then also compares executors (their limits differ).
fn executors(c: &Comparison) -> Option<String> {
    if c.base_executor.is_local() && c.new_executor.is_local() {
        return None;
    }
    Some(format!(
        "Executors: {} → {}.",
        c.base_executor.describe(),
        c.new_executor.describe()
    ))
}

pub fn markdown(judged: &[Judged], plots: &[Plot], dir: &Path) -> String {
    let mut w = String::new();
    let _ = writeln!(w, "# retrace compare\n");
    for p in plots {
        for f in p
            .files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "svg"))
        {
            let rel = f.strip_prefix(dir).unwrap_or(f);
            let _ = writeln!(w, "![{}]({})\n", p.title, rel.display());
        }
    }
    for j in judged {
        let c = &j.comparison;
        let _ = writeln!(w, "## {} → {}\n", c.base, c.new);
        let _ = writeln!(
            w,
            "Models `{}` → `{}`; {} shared tasks ({} unpaired).\n",
            c.base_model,
            c.new_model,
            c.shared_tasks.len(),
            c.unpaired_tasks
        );
        if let Some(line) = executors(c) {
            let _ = writeln!(w, "{line}\n");
        }
        match j.regressions.as_slice() {
            [] => {
                let _ = writeln!(
                    w,
                    "**Verdict: pass** (NEW is not worse beyond the thresholds)\n"
                );
            }
            why => {
                let _ = writeln!(w, "**Verdict: FAIL**\n");
                for r in why {
                    let _ = writeln!(w, "- {r}");
                }
                let _ = writeln!(w);
            }
        }
        let _ = writeln!(
            w,
            "| round | BASE Acc@r | NEW Acc@r | Δ (points) | 95% CI of Δ (paired bootstrap) | McNemar b / c | p |"
        );
        let _ = writeln!(w, "|---|---|---|---|---|---|---|");
        for r in &c.rounds {
            let _ = writeln!(w, "| {} |", round_cells(r).join(" | "));
        }
        let _ = writeln!(w, "\n| metric | BASE | NEW |\n|---|---|---|");
        let _ = writeln!(
            w,
            "| recovery rate | {} | {} |",
            percent(c.base_recovery.as_ref()),
            percent(c.new_recovery.as_ref())
        );
        let _ = writeln!(
            w,
            "| kill rate | {} | {} |",
            percent(c.base_kill_rate.total.as_ref()),
            percent(c.new_kill_rate.total.as_ref())
        );
        for (reason, b, n) in kill_reasons(c) {
            let _ = writeln!(w, "| kills: {reason} | {b} | {n} |");
        }
        let _ = writeln!(
            w,
            "| round time p50 / p95 (ms) | {:.0} / {:.0} | {:.0} / {:.0} |",
            c.base_latency_total.p50,
            c.base_latency_total.p95,
            c.new_latency_total.p50,
            c.new_latency_total.p95
        );
        let _ = writeln!(
            w,
            "\n| round | model p50 / p95 BASE (ms) | NEW | exec p50 / p95 BASE (ms) | NEW |\n|---|---|---|---|---|"
        );
        for l in &c.latency_by_round {
            let f = |p: &Percentiles| p50_p95(p, "");
            let _ = writeln!(
                w,
                "| {} | {} | {} | {} | {} |",
                l.round,
                f(&l.base_model),
                f(&l.new_model),
                f(&l.base_exec),
                f(&l.new_exec)
            );
        }
        let _ = writeln!(w, "\nRight in BASE, wrong in NEW: {}\n", ids(&c.now_wrong));
        let _ = writeln!(w, "Wrong in BASE, right in NEW: {}\n", ids(&c.now_right));
    }
    w
}

/// `compare.html`: the same, one file with no outside reference.
pub fn html(judged: &[Judged], plots: &[Plot]) -> String {
    use super::junit::escape;
    let mut w = String::new();
    w.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>retrace compare</title><style>\
         :root{color-scheme:light dark}body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}\
         table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #8888;padding:.3em .6em;text-align:right}\
         th:first-child,td:first-child{text-align:left}.fail{color:#c0392b}.pass{color:#1e8449}\
         figure svg{max-width:100%;height:auto;background:#fff}\
         </style></head><body>\n<h1>retrace compare</h1>\n",
    );
    for p in plots {
        let _ = writeln!(
            w,
            "<figure>{}<figcaption>{}</figcaption></figure>",
            p.svg,
            escape(&p.title)
        );
    }
    for j in judged {
        let c = &j.comparison;
        let _ = writeln!(
            w,
            "<h2>{} → {}</h2>\n<p>Models <code>{}</code> → <code>{}</code>; {} shared tasks ({} unpaired).</p>",
            escape(&c.base),
            escape(&c.new),
            escape(&c.base_model),
            escape(&c.new_model),
            c.shared_tasks.len(),
            c.unpaired_tasks
        );
        if let Some(line) = executors(c) {
            let _ = writeln!(w, "<p>{}</p>", escape(&line));
        }
        if j.regressions.is_empty() {
            w.push_str("<p class=\"pass\"><strong>Verdict: pass</strong></p>\n");
        } else {
            w.push_str("<p class=\"fail\"><strong>Verdict: FAIL</strong></p><ul>\n");
            for r in &j.regressions {
                let _ = writeln!(w, "<li>{}</li>", escape(r));
            }
            w.push_str("</ul>\n");
        }
        w.push_str(
            "<table><tr><th>round</th><th>BASE Acc@r</th><th>NEW Acc@r</th><th>Δ (points)</th>\
             <th>95% CI of Δ</th><th>McNemar b / c</th><th>p</th></tr>\n",
        );
        for r in &c.rounds {
            let _ = writeln!(w, "<tr><td>{}</td></tr>", round_cells(r).join("</td><td>"));
        }
        w.push_str("</table>\n<table><tr><th>metric</th><th>BASE</th><th>NEW</th></tr>\n");
        let row = |w: &mut String, m: &str, b: String, n: String| {
            let _ = writeln!(
                w,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(m),
                escape(&b),
                escape(&n)
            );
        };
        row(
            &mut w,
            "recovery rate",
            percent(c.base_recovery.as_ref()),
            percent(c.new_recovery.as_ref()),
        );
        row(
            &mut w,
            "kill rate",
            percent(c.base_kill_rate.total.as_ref()),
            percent(c.new_kill_rate.total.as_ref()),
        );
        for (reason, b, n) in kill_reasons(c) {
            row(
                &mut w,
                &format!("kills: {reason}"),
                b.to_string(),
                n.to_string(),
            );
        }
        for l in &c.latency_by_round {
            let f = |p: &Percentiles| p50_p95(p, " ms");
            row(
                &mut w,
                &format!("round {} model p50 / p95", l.round),
                f(&l.base_model),
                f(&l.new_model),
            );
            row(
                &mut w,
                &format!("round {} exec p50 / p95", l.round),
                f(&l.base_exec),
                f(&l.new_exec),
            );
        }
        w.push_str("</table>\n");
        let _ = writeln!(
            w,
            "<p>Right in BASE, wrong in NEW: {}</p>\n<p>Wrong in BASE, right in NEW: {}</p>",
            escape(&ids(&c.now_wrong)),
            escape(&ids(&c.now_right))
        );
    }
    w.push_str("</body></html>\n");
    w
}

#[cfg(test)]
mod tests {
    use super::super::testing::{config, task, two_arms, R};
    use super::*;
    use crate::record::StopOn;

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
        let err = pair_arms(&two, &two, Some("slim"), None).unwrap_err();
        assert!(err.contains("no arm `slim`"), "{err}");
        let err = pair_arms(&two, &names(&["slim", "x"]), None, None).unwrap_err();
        assert!(err.contains("share no arm"), "{err}");
    }

    #[test]
    fn tasks_pair_on_ids_both_finished() {
        let (cfg, records) = two_arms();
        let base = Side::new("BASE", &cfg, &records, "fat");
        let new = Side::new("NEW", &cfg, &records, "dynamic");
        let c = compare(&base, &new).unwrap();
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
        assert_eq!(c.summaries.0.tasks, 5);
        assert_eq!(c.summaries.1.strategy, "dynamic");
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
        let c = compare(&base, &side).unwrap();
        assert_eq!(c.shared_tasks, ["c"]);
        assert_eq!(c.unpaired_tasks, 6);
        let none = Side::new("NEW", &config(&["zz"], 1, StopOn::Clean), &[], "fat");
        assert!(compare(&base, &none).is_none());
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_difference() {
        let base: Vec<bool> = (0..40).map(|i| i % 2 == 0).collect();
        let new: Vec<bool> = (0..40).map(|i| i % 4 != 3).collect();
        let a = paired_bootstrap(&base, &new, 2000, 7);
        assert_eq!(a, paired_bootstrap(&base, &new, 2000, 7));
        assert_ne!(a, paired_bootstrap(&base, &new, 2000, 8));
        // The observed difference is 30/40 − 20/40 = 0.25.
        assert!(a.0 < 0.25 && 0.25 < a.1, "{a:?}");
        assert!(a.0 > 0.0 && a.1 < 0.5, "{a:?}");
        // No discordant pair: every resample has difference 0.
        assert_eq!(paired_bootstrap(&base, &base, 500, 1), (0.0, 0.0));
        // Every pair says NEW is worse: the interval is the point -1.
        assert_eq!(
            paired_bootstrap(&[true; 5], &[false; 5], 100, 3),
            (-1.0, -1.0)
        );
        assert_eq!(paired_bootstrap(&[], &[], 100, 3), (0.0, 0.0));
    }

    /// A comparison of `n` tasks where BASE is right on `b_right` and NEW
    /// on `n_right` (NEW's right tasks a prefix of BASE's, or the reverse).
    fn comparison(n: usize, b_right: usize, n_right: usize) -> Comparison {
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
        let c = comparison(10, 8, 2);
        let judged = [Judged {
            regressions: regressions(&c, &Thresholds::default()),
            comparison: c,
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
}
