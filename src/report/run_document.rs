//! A run's report as one [`Document`]: what `report.md` and `report.html`
//! show, built once from the summary. The tables are shared; the lists of
//! facts differ (the page counts its rates and puts the headline numbers
//! in cards) and are marked for their format.

use super::cells::{counted, denials, p50_p95, size, strategy_rows};
use super::compare::Comparison;
use super::document::{Block, Document, Figure, Format, Item, Table, Text};
use super::installs::InstallMetrics;
use super::labels::{id_list, labels, limits_line, percent, power_sentence};
use super::repair_tables;
use super::stats::Rate;
use super::view::RunView;
use super::Summary;
use crate::task::load::Skipped;

/// The whole report of a run.
pub(super) fn build(run: &RunView) -> Document {
    let s = run.summary;
    let (skipped_md, skipped_page) = skipped_records(&run.config.provenance.skipped);
    let mut doc = Document::default();
    doc.section("header", None, header(s));
    doc.only(Format::Markdown, skipped_md);
    let mut headline = Document::default();
    headline.only_one(Format::Html, cards(s));
    if !s.arms.is_empty() {
        strategies(&mut headline, s);
    }
    accuracy(&mut headline, s);
    self_repair(&mut headline, s);
    code_origin(&mut headline, s);
    if let Some(f) = &s.false_alarm {
        super::false_alarm::section(&mut headline, f);
    }
    executions(&mut headline, s);
    doc.section("section", Some("headline"), headline);
    doc.only(Format::Html, skipped_page);
    if !run.plots.is_empty() {
        let mut plots = Document::default();
        plots.heading(2, "Plots");
        plots.push(Block::Figures(
            run.plots
                .iter()
                .map(|p| Figure {
                    id: Some(p.name.clone()),
                    title: p.title.clone(),
                    // The SVG beside the Markdown (`plots/`); the PNG has the same stem.
                    src: format!("plots/{}.svg", p.name),
                    svg: p.svg.clone(),
                })
                .collect(),
        ));
        plots.push(Block::Gap);
        doc.section("section", Some("plots"), plots);
    }
    doc
}

/// The title, the labels, what ran and under which limits.
fn header(s: &Summary) -> Document {
    let mut doc = Document::default();
    doc.heading(1, Text::from("retrace run ").code(&s.header.run_id));
    for label in labels(s) {
        doc.push(Block::Callout("label", label.into()));
    }
    let mut what = Text::from("Suite ").code(&s.header.suite);
    what = what.text(", model ").code(&s.header.model).text(", ");
    if s.arms.is_empty() {
        what = what.text("strategy ").code(&s.header.strategy);
    } else {
        what = what.text("arms ");
        for (i, a) in s.arms.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            what = what.text(sep).code(&a.header.strategy);
        }
        what = what.text(" (baseline ").code(&s.header.strategy).text(")");
    }
    what = what
        .text(format!(
            ", {} tasks ({} finished), rounds 0..={}, stop rule ",
            s.header.tasks, s.header.tasks_finished, s.header.rounds
        ))
        .code(&s.header.stop_on)
        .text(", feedback ")
        .code(&s.header.feedback)
        .text(".");
    let limits = format!("Limits: {}.", limits_line(s));
    let mut md = Document::default();
    md.paragraph(what.clone());
    if !s.header.model_info.is_null() {
        md.paragraph(Text::from("Model details: ").code(&s.header.model_info));
    }
    md.paragraph(limits.clone());
    doc.only(Format::Markdown, md);
    let meta = Block::Paragraph(Some("meta"), what.text(" ").text(limits));
    doc.only_one(Format::Html, meta);
    doc
}

/// The few numbers people look for first, on the page.
fn cards(s: &Summary) -> Block {
    let mut cards = Vec::new();
    if let Some(a) = s.answers.accuracy_by_round.first() {
        cards.push(("Acc@0".to_string(), percent(Some(a))));
    }
    if let Some(a) = s.answers.accuracy_by_round.last() {
        cards.push((format!("Acc@{}", s.header.rounds), percent(Some(a))));
    }
    for (name, rate) in [
        ("recovery rate", &s.answers.recovery_rate),
        ("regression rate", &s.answers.regression_rate),
        ("kill rate", &s.execution.kill_rate.total),
        ("infra-error tasks", &s.execution.infra_error_rate),
    ] {
        cards.push((name.to_string(), percent(rate.as_ref())));
    }
    Block::Cards(cards)
}

/// Every arm side by side, and the paired test of each against the baseline.
fn strategies(doc: &mut Document, s: &Summary) {
    let baseline = &s.header.strategy;
    doc.heading(2, "Strategies");
    let rows: Vec<Vec<String>> = (strategy_rows(s).into_iter())
        .map(|(name, cells)| [vec![name], cells].concat())
        .collect();
    let head = |code: bool| {
        let names = s.arms.iter().map(|a| {
            let n = &a.header.strategy;
            let t = if code {
                Text::default().code(n)
            } else {
                Text::from(n.as_str())
            };
            if n == baseline {
                t.text(" (baseline)")
            } else {
                t
            }
        });
        std::iter::once(Text::default()).chain(names).collect()
    };
    let table = |code: bool| Table {
        head: head(code),
        row_heads: true,
        head_break: Some(1),
        ..Table::plain(&[], rows.clone()).class("strategies")
    };
    // The Markdown names the arms as code, the page as text.
    doc.only_one(Format::Markdown, Block::Table(table(true)));
    doc.only_one(Format::Html, Block::Table(table(false)));
    doc.paragraph(
        "Paired on the tasks both arms finished, final round (McNemar, exact; b = baseline \
         right and arm wrong, c = baseline wrong and arm right):",
    );
    doc.list(s.comparisons.iter().map(|c| {
        let last = c.last();
        Text::default()
            .code(&c.new)
            .text(" vs ")
            .code(&c.base)
            .text(format!(
                ": {} shared tasks, Acc@{} {} vs {}; b = {}, c = {}, p = {:.4}; ",
                c.shared_tasks.len(),
                last.round,
                percent(Some(&last.new)),
                percent(Some(&last.base)),
                last.mcnemar.b,
                last.mcnemar.c,
                last.mcnemar.p_value,
            ))
            .text(paired_line(c))
    }));
    let mut md = Document::default();
    for a in &s.arms {
        if let Some(m) = &a.environment.installs {
            md.heading(
                3,
                Text::from("Installs (").code(&a.header.strategy).text(")"),
            );
            md.list(installs(m));
        }
    }
    let below = |what: &'static str| Text::default().own(what).code(baseline).text(").");
    md.paragraph(below("The sections below are the baseline's ("));
    doc.only(Format::Markdown, md);
    doc.only_one(
        Format::Html,
        Block::Paragraph(None, below("The numbers below are the baseline's (")),
    );
}

/// The difference's interval, the power and the flips of an arm against
/// the baseline: `Δ +20.0 points [-20.0, +60.0] (paired bootstrap); the
/// smallest difference …; now right: c, e; now wrong: b`.
fn paired_line(c: &Comparison) -> String {
    let pp = |x: f64| format!("{:+.1}", 100.0 * x);
    let last = c.last();
    let (lo, hi) = last.difference_ci;
    let delta = last.new.value - last.base.value;
    let shared = c.shared_tasks.len() as u64;
    [
        format!(
            "Δ {} points [{}, {}] (paired bootstrap)",
            pp(delta),
            pp(lo),
            pp(hi)
        ),
        power_sentence(last.min_detectable_difference, shared),
        format!("now right: {}", id_list(&c.now_right)),
        format!("now wrong: {}", id_list(&c.now_wrong)),
    ]
    .join("; ")
}

/// Acc@r by round, the rates of self-correction and the round-0 failures.
fn accuracy(doc: &mut Document, s: &Summary) {
    let a = &s.answers;
    doc.heading(2, "Accuracy by round");
    let rows = (a.accuracy_by_round.iter().enumerate())
        .map(|(r, acc)| {
            vec![
                r.to_string(),
                percent(Some(acc)),
                format!(
                    "{:+.1}",
                    100.0 * a.delta_by_round.get(r).copied().unwrap_or(0.0)
                ),
                format!(
                    "{:.1}%",
                    100.0 * a.solved_by_round.get(r).copied().unwrap_or(0.0)
                ),
                percent(a.exec_success_by_round.get(r)),
                percent(a.parse_by_round.get(r)),
            ]
        })
        .collect();
    let head = [
        "round",
        "Acc@r (95% CI)",
        "Δ",
        "solved ≤ r",
        "exec-success",
        "parse",
    ];
    doc.table(Table::plain(&head, rows).class("accuracy"));
    doc.only(Format::Markdown, self_correction_markdown(s));
    doc.only(Format::Html, self_correction_html(s));
    if !a.round0_failures.is_empty() {
        doc.heading(
            3,
            format!(
                "Round-0 failures and their fate by round {}",
                s.header.rounds
            ),
        );
        let rows = (a.round0_failures.iter())
            .map(|(kind, f)| {
                let n = [f.tasks, f.fixed, f.ran_clean_later].map(|n| n.to_string());
                [vec![kind.clone()], n.to_vec()].concat()
            })
            .collect();
        let head = [
            "round-0 failure",
            "tasks",
            "correct at K",
            "ran cleanly later",
        ];
        doc.table(Table::plain(&head, rows));
    }
    if !a.final_answers_read.is_empty() {
        doc.heading(3, "How the final answers were read");
        let rows = (a.final_answers_read.iter())
            .map(|(reading, n)| {
                vec![
                    reading.clone(),
                    n.answers.to_string(),
                    n.correct.to_string(),
                ]
            })
            .collect();
        doc.table(Table::plain(&["reading", "answers", "correct"], rows));
    }
    if !a.accuracy_by_fault.is_empty() {
        doc.heading(3, "Accuracy by injected fault (synthetic)");
        let rows = (a.accuracy_by_fault.iter())
            .map(|(fault, f)| {
                vec![
                    fault.clone(),
                    f.tasks.to_string(),
                    percent(f.round0.as_ref()),
                    percent(f.final_round.as_ref()),
                ]
            })
            .collect();
        doc.table(Table::plain(&["fault", "tasks", "Acc@0", "Acc@K"], rows));
    }
}

/// The Markdown's section of recovery, regression, reviews and resent code.
fn self_correction_markdown(s: &Summary) -> Document {
    let a = &s.answers;
    let line = |what: &str, r: &Option<Rate>| format!("{what}: {}", percent(r.as_ref()));
    let mut items = vec![
        line(
            "recovery rate (over tasks wrong at round 0)",
            &a.recovery_rate,
        ),
        line(
            "recovery rate (over tasks wrong at round 0 that got a repair round)",
            &a.recovery_rate_repaired,
        ),
        line(
            "regression rate (over tasks right at round 0)",
            &a.regression_rate,
        ),
        format!("rounds used per task: {:.2}", s.cost.rounds_used_mean),
    ];
    let mut rate = |what: &str, r: &Option<Rate>| {
        if let Some(r) = r {
            let (pct, k, n) = (percent(Some(r)), r.successes, r.n);
            items.push(format!("{what}: {pct} ({k} of {n})"));
        }
    };
    rate(
        "repair rounds that resent the previous code unchanged",
        &s.repairs.resent_code,
    );
    rate(
        "repair rounds that raised the previous round's error at the same line",
        &s.repairs.repeated_error,
    );
    rate(
        "rounds that returned to the code of an earlier round than the last (oscillating)",
        &s.repairs.oscillating,
    );
    rate(
        "tasks whose code cycled (an oscillating round)",
        &s.repairs.cycling_tasks,
    );
    let r = &s.repairs.reviews;
    if r.prompts > 0 {
        items.push(format!(
            "reviews: {} prompts, {} kept, {} revised ({} wrong→right, {} right→wrong)",
            r.prompts, r.kept, r.revised, r.wrong_to_right, r.right_to_wrong
        ));
    }
    if let Some(last) = a.multi_part_accuracy_by_round.last() {
        items.push(format!(
            "multi-answer parts correct at round {}: {}",
            s.header.rounds,
            percent(Some(last))
        ));
    }
    let mut doc = Document::default();
    doc.heading(2, "Self-correction");
    doc.list(items);
    doc
}

/// The page's facts under the accuracy table, each rate with its counts.
fn self_correction_html(s: &Summary) -> Document {
    let a = &s.answers;
    let mut items = Vec::new();
    let mut item = |name: &str, r: Option<&Rate>| items.push(format!("{name}: {}", counted(r)));
    item(
        "recovery rate (over tasks wrong at round 0)",
        a.recovery_rate.as_ref(),
    );
    item(
        "recovery rate (over tasks wrong at round 0 that got a repair round)",
        a.recovery_rate_repaired.as_ref(),
    );
    item(
        "regression rate (over tasks right at round 0)",
        a.regression_rate.as_ref(),
    );
    if let Some(r) = &s.repairs.repeated_error {
        item(
            "repair rounds that raised the previous round's error at the same line",
            Some(r),
        );
    }
    if let Some(r) = &s.repairs.resent_code {
        item(
            "repair rounds that resent the previous code unchanged",
            Some(r),
        );
    }
    if let Some(r) = &s.repairs.oscillating {
        item(
            "rounds that returned to the code of an earlier round than the last (oscillating)",
            Some(r),
        );
    }
    if let Some(r) = &s.repairs.cycling_tasks {
        item("tasks whose code cycled (an oscillating round)", Some(r));
    }
    items.push(format!(
        "rounds used per task: {:.2}",
        s.cost.rounds_used_mean
    ));
    let mut doc = Document::default();
    doc.push(Block::List(
        Some("facts"),
        items.into_iter().map(Item::from).collect(),
    ));
    doc
}

/// The self-repair views, every arm in one table each.
fn self_repair(doc: &mut Document, s: &Summary) {
    let tables = repair_tables::tables(s);
    if tables.is_empty() {
        return;
    }
    doc.heading(2, "Self-repair");
    for t in tables {
        doc.heading(3, t.title);
        doc.paragraph(t.note);
        doc.table(Table {
            head: t.head.into_iter().map(Text::from).collect(),
            head_break: Some(0),
            ..Table::plain(&[], t.rows).class("self-repair")
        });
    }
    doc.push(Block::Gap);
}

/// `--round0-from`: the recorded round 0 and each arm's recovery from it,
/// own code or foreign.
fn code_origin(doc: &mut Document, s: &Summary) {
    let Some(o) = &s.code_origin else {
        return;
    };
    doc.heading(2, "Own and foreign code");
    doc.paragraph(
        Text::from("Round 0 of every task is ")
            .code(&o.source)
            .text(format!(
                "'s (written by {}); each arm's model repairs it from round 1. \
                 Recovery is over the tasks wrong at round 0, the same tasks in every arm.",
                o.model
            )),
    );
    let rows = (o.arms.iter())
        .map(|a| {
            vec![
                a.arm.clone(),
                a.model.clone(),
                a.code.name().to_string(),
                counted(a.recovery_rate.as_ref()),
            ]
        })
        .collect();
    doc.table(Table::plain(&["arm", "model", "code", "recovery"], rows).class("code-origin"));
    doc.push(Block::Gap);
}

/// Verdicts, kills, infrastructure errors, the environment, installs,
/// latency and tokens.
fn executions(doc: &mut Document, s: &Summary) {
    let e = &s.execution;
    doc.heading(2, "Executions");
    let verdicts =
        e.verdicts
            .iter()
            .enumerate()
            .fold(Text::from("verdicts: "), |t, (i, (k, v))| {
                let sep = if i == 0 { "" } else { ", " };
                t.text(sep).text(k.as_str()).text(format!(" {v}"))
            });
    let kills = |rate: String| format!("{} executions, kill rate {rate}", e.executions);
    let infra = |rate: String| format!("infrastructure errors (tasks): {rate}");
    let mut md = vec![
        Item {
            text: kills(percent(e.kill_rate.total.as_ref())).into(),
            sub: (e.kill_rate.counts.iter())
                .map(|(reason, n)| Text::from(reason.as_str()).text(format!(": {n}")))
                .collect(),
        },
        verdicts.clone().into(),
        infra(percent(e.infra_error_rate.as_ref())).into(),
    ];
    md.extend(environment(s).into_iter().map(Item::from));
    // The page's item breaks its line before the reasons (as it always has).
    let mut page = Text::from(kills(counted(e.kill_rate.total.as_ref()))).own("\n");
    if !e.kill_rate.counts.is_empty() {
        let reasons: Vec<String> = (e.kill_rate.counts.iter())
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        page = page.text(format!(" ({})", reasons.join(", ")));
    }
    let mut html: Vec<Item> = vec![
        page.into(),
        verdicts.into(),
        infra(counted(e.infra_error_rate.as_ref())).into(),
    ];
    if let Some(m) = &s.environment.installs {
        html.push(Item::from(format!(
            "installs: {} steps, {:.2} per task, store hits {}, downloads {}, failures {}, \
             denials {}",
            m.steps,
            m.installs_per_task,
            m.store_hits,
            m.downloads,
            m.failures,
            denials(m)
        )));
    }
    let mut markdown = Document::default();
    markdown.push(Block::List(None, md));
    if let (Some(m), true) = (&s.environment.installs, s.arms.is_empty()) {
        markdown.heading(2, "Installs");
        markdown.list(installs(m));
    }
    markdown.heading(2, "Latency (ms) and tokens");
    let l = &s.cost.latency_ms;
    let rows: Vec<Vec<String>> = [("model", &l.model), ("exec", &l.exec), ("total", &l.total)]
        .into_iter()
        .map(|(name, p)| {
            vec![
                name.into(),
                format!("{:.1}", p.p50),
                format!("{:.1}", p.p95),
            ]
        })
        .collect();
    markdown.table(Table::plain(&["", "p50", "p95"], rows.clone()));
    doc.only(Format::Markdown, markdown);
    let mut page = Document::default();
    page.push(Block::List(Some("facts"), html));
    page.table(Table::plain(&["latency (ms)", "p50", "p95"], rows).class("latency"));
    doc.only(Format::Html, page);
    let t = &s.cost.tokens;
    doc.paragraph(format!(
        "Tokens: {} prompt, {} completion, {:.0} per task, {:.1} completion tokens/s (p50).",
        t.prompt, t.completion, t.per_task_mean, t.per_second.p50
    ));
    if let Some(t) = &s.time {
        let mut time = Text::from(format!("Time: {}.", t.line()));
        if t.requests_with_timings > 0 {
            time = time.line_break().text(format!(
                "Of {} requests the server timed: {:.0} s waiting, {:.0} s reading prompts \
                 ({} tokens evaluated, {} from its cache), {:.0} s generating.",
                t.requests_with_timings,
                t.queue_ms / 1e3,
                t.prompt_ms / 1e3,
                t.prompt_tokens_evaluated,
                t.prompt_tokens_cached,
                t.generation_ms / 1e3
            ));
        }
        doc.only_one(Format::Markdown, Block::Paragraph(None, time));
    }
}

/// Environment costs of the baseline, each only when known.
fn environment(s: &Summary) -> Vec<String> {
    let env = &s.environment;
    let mut items = Vec::new();
    if let Some(r) = &env.environment_error_rounds {
        items.push(format!(
            "environment-error rounds (missing module, refused install): {}",
            counted(Some(r))
        ));
    }
    if let Some(p) = &env.kernel_start_ms {
        items.push(format!(
            "kernel start (ms): p50 {:.0}, p95 {:.0}",
            p.p50, p.p95
        ));
    }
    if let Some(m) = &env.memory_peak_bytes {
        items.push(format!(
            "memory peak per kernel: p50 {}, max {} ({} kernels)",
            size(m.p50),
            size(m.max),
            m.n
        ));
    }
    if let Some(bytes) = env.image_bytes {
        items.push(format!("image size on disk: {}", size(bytes)));
    }
    items
}

fn installs(m: &InstallMetrics) -> Vec<Text> {
    vec![
        format!(
            "{} install steps; {:.2} installs per task ({} tasks installed something)",
            m.steps, m.installs_per_task, m.tasks_with_installs
        )
        .into(),
        format!(
            "store hits {}: p50 / p95 {} ms; downloads {}: p50 / p95 {} ms",
            m.store_hits,
            p50_p95(&m.latency_ms_store_hit),
            m.downloads,
            p50_p95(&m.latency_ms_download)
        )
        .into(),
        format!("failures: {}", m.failures).into(),
        Text::from("denials: ").text(denials(m)),
        format!("package store used: {}", size(m.store_bytes)).into(),
    ]
}

/// The dataset records `--skip-invalid` left out (not in any rate): the
/// Markdown lists them under the limits, the page in a section of its own.
fn skipped_records(skipped: &[Skipped]) -> (Document, Document) {
    let (mut md, mut page, mut section) = <(Document, Document, Document)>::default();
    if skipped.is_empty() {
        return (md, page);
    }
    let n = skipped.len();
    let flag = |t: String, end: &str| Text::from(t).code("--skip-invalid").text(end);
    md.paragraph(flag(
        format!("Skipped {n} invalid dataset record(s) ("),
        "; not counted in any rate):",
    ));
    md.list(skipped.iter().map(|s| {
        let mut t = Text::from(s.file.display().to_string()).text(format!(":{}: ", s.line));
        if let Some(id) = &s.id {
            t = t.code(id).text(": ");
        }
        t.text(s.reason.as_str())
    }));
    section.heading(2, "Skipped records");
    section.paragraph(flag(
        format!("{n} invalid dataset record(s) left out by "),
        "; not counted in any rate.",
    ));
    section.list(skipped.iter().map(ToString::to_string));
    page.section("section", Some("skipped"), section);
    (md, page)
}
