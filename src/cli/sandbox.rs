//! `retrace sandbox check`: runs the hostile corpus through the confined
//! executor and fails (exit 1) when any limit misfires or regresses; with
//! `--benign`, runs legitimate notebooks confined and unconfined and fails
//! on any cell that confinement changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Subcommand};
use retrace::conformance::check::benign::{self, Notebook};
use retrace::conformance::check::{self, CheckConfig, CheckError};
use retrace::conformance::corpus;
use retrace::kernel::gateway::Gateway;
use retrace::kernel::{default_kernel_root, KernelSpec};
use retrace::pyenv::{ImageName, ImageStore};
use retrace::sandbox::Confined;
use retrace::util::atomic_write::write_atomically;
use retrace::util::builtin;
use retrace::util::fault::Point;
use retrace::util::home::retrace_home;
use retrace::util::terminal;
use retrace::util::IoError;

use super::executor::ExecutorArgs;
use super::limits::LimitArgs;
use super::Failure;

/// The corpus used when no `--corpus` is given and it exists, relative to
/// the current directory (a source checkout: its edits take effect); else
/// the corpus built into the binary.
const LOCAL_CORPUS: &str = "datasets/hostile";
/// The same for `--benign`.
const LOCAL_BENIGN: &str = "datasets/benign";

#[derive(Subcommand)]
pub enum SandboxCommand {
    /// Run the hostile-code corpus and check every verdict, cleanup and the
    /// harness's health; or, with --benign, check that legitimate notebooks
    /// run confined as they do unconfined.
    Check(CheckArgs),
}

#[derive(Args)]
pub struct CheckArgs {
    /// Directory of case files (*.toml); repeatable. Default:
    /// ./datasets/hostile (./datasets/benign with --benign) if it exists,
    /// else the built-in corpus.
    #[arg(long = "corpus", value_name = "DIR")]
    pub corpus: Vec<PathBuf>,
    /// Run the benign corpus instead: public notebooks, each run confined
    /// and unconfined; every cell that succeeds unconfined must succeed
    /// confined with the same output (exit 1 on any difference).
    #[arg(long)]
    pub benign: bool,
    /// Only cases whose id or category (with --benign: notebooks whose id
    /// or source repository) contains PATTERN.
    #[arg(long, value_name = "PATTERN")]
    pub filter: Option<String>,
    /// Write JUnit XML here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the full results (outcomes included) as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Cases run at the same time.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub jobs: u64,
    /// Image the kernels run in: `fat` or `slim`.
    #[arg(long, default_value = "fat")]
    pub image: ImageName,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub executor: ExecutorArgs,
}

pub async fn run(cmd: SandboxCommand) -> Result<i32, Failure> {
    match cmd {
        SandboxCommand::Check(args) => check(args).await,
    }
}

async fn check(args: CheckArgs) -> Result<i32, Failure> {
    if args.limits.unsafe_no_sandbox {
        return Err(Failure::usage(anyhow::anyhow!(
            "`sandbox check` tests confinement; it cannot run with --unsafe-no-sandbox"
        )));
    }
    let (local, builtin) = if args.benign {
        (LOCAL_BENIGN, builtin::BENIGN_CORPUS)
    } else {
        (LOCAL_CORPUS, builtin::CORPUS)
    };
    let (dirs, source) = corpus_dirs(&args.corpus, local, builtin).map_err(Failure::infra)?;
    if args.benign {
        return check_benign(&args, &dirs, &source).await;
    }
    let cases = corpus::load_dirs(&dirs).map_err(Failure::usage)?;
    let cases = corpus::filter(cases, args.filter.as_deref());
    if cases.is_empty() {
        return Err(no_match(&args));
    }

    // Fail closed (exit 3) before spending time on the image; a gateway is
    // checked as it is opened.
    let init_exe = std::env::current_exe().map_err(Failure::infra)?;
    let gateway = match args.executor.gateway(args.jobs as usize)? {
        None => {
            drop(Confined::open(init_exe.clone()).map_err(Failure::infra)?);
            None
        }
        Some(config) => Some(Gateway::connect(config).await.map_err(Failure::infra)?),
    };
    let config = config(&args, init_exe, gateway).await?;

    let width = cases.iter().map(|c| c.id.len()).max().unwrap_or(4).max(4);
    let applicable = match &config.gateway {
        None => cases.len(),
        Some(g) => cases
            .iter()
            .filter(|c| check::remote_reason(c, g.info()).is_none())
            .count(),
    };
    let place = match &config.gateway {
        None => format!("image {}", args.image),
        Some(g) => format!(
            "on {} ({} case(s) do not apply on a gateway)",
            g.info().url,
            cases.len() - applicable
        ),
    };
    eprintln!(
        "running {applicable} case(s) from {source} with {} job(s), {place}",
        config.jobs
    );
    let report = match check::run(&cases, &config, progress(width)).await {
        Ok(r) => r,
        Err(CheckError::Unavailable(e)) => return Err(Failure::infra(e)),
    };

    if !report.not_applicable.is_empty() {
        println!(
            "{} case(s) do not apply on a gateway (its kernelspec owns that confinement):",
            report.not_applicable.len()
        );
        for n in &report.not_applicable {
            println!(
                "  {:<width$}  {}",
                terminal::line(&n.id),
                terminal::line(&n.reason)
            );
        }
    }
    finish(&args, &report)
}

/// `sandbox check --benign`: the notebooks of `dirs`, confined and
/// unconfined, on this machine.
async fn check_benign(args: &CheckArgs, dirs: &[PathBuf], source: &str) -> Result<i32, Failure> {
    if args.executor.gateway(args.jobs as usize)?.is_some() {
        return Err(Failure::usage(anyhow::anyhow!(
            "`sandbox check --benign` compares confined with unconfined kernels on this machine; it does not run on a gateway"
        )));
    }
    let notebooks: Vec<Notebook> = corpus::load_entries(dirs).map_err(Failure::usage)?;
    let notebooks: Vec<Notebook> = match args.filter.as_deref() {
        None => notebooks,
        Some(p) => notebooks.into_iter().filter(|n| n.matches(p)).collect(),
    };
    if notebooks.is_empty() {
        return Err(no_match(args));
    }
    let init_exe = std::env::current_exe().map_err(Failure::infra)?;
    drop(Confined::open(init_exe.clone()).map_err(Failure::infra)?);
    let config = config(args, init_exe, None).await?;
    let width = notebooks
        .iter()
        .map(|n| n.id.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let cells: usize = notebooks.iter().map(|n| n.cells.len()).sum();
    eprintln!(
        "running {} notebook(s) ({cells} cells) from {source} confined and unconfined with {} job(s), image {}",
        notebooks.len(),
        config.jobs,
        args.image
    );
    let report = match benign::run(&notebooks, &config, progress(width)).await {
        Ok(r) => r,
        Err(CheckError::Unavailable(e)) => return Err(Failure::infra(e)),
    };
    finish(args, &report)
}

fn no_match(args: &CheckArgs) -> Failure {
    Failure::usage(anyhow::anyhow!(
        "no case matches --filter {:?}",
        args.filter.as_deref().unwrap_or("")
    ))
}

/// The check's configuration from the command line, the image built first.
async fn config(
    args: &CheckArgs,
    init_exe: PathBuf,
    gateway: Option<Arc<Gateway>>,
) -> Result<CheckConfig, Failure> {
    let image = ImageStore::from_env()
        .ensure_blocking(args.image, true)
        .await
        .map_err(Failure::infra)?;
    Ok(CheckConfig {
        limits: args.limits.limits(),
        init_exe,
        spec: Arc::new(KernelSpec::new(image, default_kernel_root())),
        jobs: args.jobs as usize,
        kernel_start: args.limits.kernel_start(),
        gateway,
    })
}

/// Prints each result's row as it comes in.
fn progress(width: usize) -> Arc<dyn Fn(&check::CaseResult) + Send + Sync> {
    Arc::new(move |r| {
        eprintln!("{}", terminal::text(&check::row(r, width)));
    })
}

/// The table, the closing line and the files asked for; exit 1 on any
/// failure.
fn finish(args: &CheckArgs, report: &check::CheckReport) -> Result<i32, Failure> {
    print!("{}", terminal::text(&check::table(&report.results)));
    println!("{}", check::summary_line(report));

    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(report).map_err(Failure::infra)?;
        write(path, &text)?;
    }
    if let Some(path) = &args.junit {
        write(path, &check::junit(report))?;
    }
    Ok(if report.summary.failed == 0 { 0 } else { 1 })
}

/// The corpus directories to load and how to name them: the `--corpus`
/// ones, else `./<local>` if it exists, else the built-in corpus `builtin`
/// (written out under `$RETRACE_HOME` on first use).
fn corpus_dirs(
    given: &[PathBuf],
    local: &str,
    builtin: &str,
) -> Result<(Vec<PathBuf>, String), IoError> {
    if !given.is_empty() {
        let names: Vec<_> = given.iter().map(|d| d.display().to_string()).collect();
        return Ok((given.to_vec(), names.join(", ")));
    }
    if Path::new(local).is_dir() {
        return Ok((vec![PathBuf::from(local)], format!("./{local}")));
    }
    let dir = builtin::datasets(&retrace_home())?.join(builtin);
    let name = format!("the built-in corpus ({})", dir.display());
    Ok((vec![dir], name))
}

fn write(path: &Path, text: &str) -> Result<(), Failure> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| Failure::infra(anyhow::anyhow!("creating {}: {e}", parent.display())))?;
    }
    // Whole or not at all: a CI job that dies here leaves no half report.
    write_atomically(path, text.as_bytes(), Point::DuringSummary)
        .map_err(|e| Failure::infra(anyhow::anyhow!("writing {}: {e}", path.display())))
}
