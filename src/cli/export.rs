//! `retrace export inspect|eee RUN_DIR`: a run in the formats other tools
//! read, written from its journal (a resumed or re-scored run exports what
//! its journal now says).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use retrace::harness::{journal, read_config};
use retrace::record::{AttemptRecord, RunConfig};
use retrace::report::eee::{self, EeeView, Source};
use retrace::report::inspect::{self, InspectView, LogFormat};
use retrace::report::{summarize, Summary};

use super::report::{failure, suite_tasks};
use super::Failure;

#[derive(Subcommand)]
pub enum ExportCommand {
    /// Inspect eval logs, one per arm: open them with `inspect view
    /// --log-dir DIR` or read them with `inspect_ai.log.read_eval_log`.
    Inspect(InspectArgs),
    /// Every Eval Ever records (schema 0.3.0): per model, the aggregate
    /// record and its instance-level sidecar, laid out as EEE's datastore
    /// (`data/<suite>/<developer>/<model>/`).
    Eee(EeeArgs),
}

#[derive(Args)]
pub struct EeeArgs {
    /// The run directory (holds run.json and results.jsonl).
    pub dir: PathBuf,
    /// Where to write the records [default: RUN_DIR/eee].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The organisation publishing the records (EEE's
    /// `source_organization_name`).
    #[arg(long, value_name = "NAME", default_value = "unknown")]
    pub organization: String,
    /// How the evaluator relates to the model's developer.
    #[arg(long, value_enum, default_value_t = Relationship::ThirdParty)]
    pub relationship: Relationship,
}

/// EEE's `evaluator_relationship`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Relationship {
    FirstParty,
    ThirdParty,
    Collaborative,
    Other,
}

#[derive(Args)]
pub struct InspectArgs {
    /// The run directory (holds run.json and results.jsonl).
    pub dir: PathBuf,
    /// Where to write the logs [default: RUN_DIR/inspect].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// `eval` (Inspect's default, a zip) or `json`.
    #[arg(long, value_enum, default_value_t)]
    pub format: LogFormat,
}

pub async fn run(cmd: ExportCommand) -> Result<i32, Failure> {
    match cmd {
        ExportCommand::Inspect(args) => {
            let (config, records) = read_run(&args.dir)?;
            let out = args.out.unwrap_or_else(|| args.dir.join("inspect"));
            let summary = summarize(&config, &records);
            write_inspect(&config, &records, &summary, &out, args.format)?;
        }
        ExportCommand::Eee(args) => {
            if args.organization.trim().is_empty() {
                return Err(Failure::usage(anyhow::anyhow!(
                    "--organization needs a name (or leave it out: `unknown`)"
                )));
            }
            let (config, records) = read_run(&args.dir)?;
            let out = args.out.unwrap_or_else(|| args.dir.join("eee"));
            let summary = summarize(&config, &records);
            let tasks = suite_tasks(&config);
            let source = Source {
                organization: args.organization,
                relationship: match args.relationship {
                    Relationship::FirstParty => "first_party",
                    Relationship::ThirdParty => "third_party",
                    Relationship::Collaborative => "collaborative",
                    Relationship::Other => "other",
                }
                .into(),
            };
            let view = EeeView {
                config: &config,
                records: &records,
                tasks: &tasks,
                summary: &summary,
                source: &source,
            };
            let files = eee::write_records(&view, &out).map_err(Failure::infra)?;
            for f in &files {
                eprintln!("wrote {}", f.display());
            }
        }
    }
    Ok(0)
}

/// A finished (or interrupted) run's config and journal.
fn read_run(dir: &Path) -> Result<(RunConfig, Vec<AttemptRecord>), Failure> {
    let config = read_config(dir).map_err(failure)?;
    let records = journal::read(&dir.join("results.jsonl")).map_err(failure)?;
    Ok((config, records))
}

/// Writes the run's Inspect logs into `out` and names each file.
pub(super) fn write_inspect(
    config: &RunConfig,
    records: &[AttemptRecord],
    summary: &Summary,
    out: &Path,
    format: LogFormat,
) -> Result<(), Failure> {
    let tasks = suite_tasks(config);
    let view = InspectView {
        config,
        records,
        tasks: &tasks,
        summary,
    };
    let files = inspect::write_logs(&view, out, format).map_err(Failure::infra)?;
    for f in &files {
        eprintln!("wrote {}", f.display());
    }
    Ok(())
}
