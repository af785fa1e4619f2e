//! The command-line front end: parses flags and calls into the library.
//! Exit codes: 0 success, 1 the code under test failed, 2 usage error,
//! 3 the harness itself could not do its job (no image, no kernel, no cgroup).

mod compare;
mod doctor;
mod exec;
mod executor;
mod export;
mod image;
mod kernel_env;
mod launch;
mod limits;
mod logging;
mod model;
#[cfg(test)]
mod reference;
mod report;
mod run;
mod sandbox;
#[cfg(test)]
mod schemas;
mod tasks;

use clap::{Parser, Subcommand};

/// `retrace --version`: the package version and the commit it was built
/// from (see build.rs), e.g. `0.1.0 (1a2b3c4d5e6f)`.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("RETRACE_COMMIT"), ")");

#[derive(Parser)]
#[command(
    name = "retrace",
    version = VERSION,
    about = "Self-correction evaluation harness: models write Python, confined IPython kernels run it, tracebacks drive repair rounds"
)]
struct Cli {
    /// Log progress to stderr: -v for info, -vv for debug (RETRACE_LOG, in
    /// tracing's EnvFilter syntax, takes precedence).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run an evaluation (the main job).
    Run(Box<run::RunArgs>),
    /// Run a Python file in one fresh kernel; cells are separated by `# %%` lines.
    Exec(exec::ExecArgs),
    /// Check the sandbox against the hostile-code corpus.
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCommand),
    /// List and validate task suites.
    #[command(subcommand)]
    Tasks(tasks::TasksCommand),
    /// Build and list the Python images kernels run in.
    #[command(subcommand)]
    Image(image::ImageCommand),
    /// Prepare and inspect the local model (`--model local`).
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Write a run's reports again from its journal (`--rescore`: re-check
    /// every answer with the current checker first).
    Report(report::ReportArgs),
    /// Compare two runs (or two arms) on their shared tasks; exit 1 when NEW
    /// is worse than BASE beyond the thresholds.
    Compare(compare::CompareArgs),
    /// Write a run in the formats other tools read (Inspect eval logs, Every
    /// Eval Ever records).
    #[command(subcommand)]
    Export(export::ExportCommand),
    /// Start one confined kernel for Jupyter Enterprise Gateway and serve
    /// it until it ends (run on each host by the kernelspec of `retrace
    /// image kernelspec --enterprise-gateway`, not by hand).
    Launch(Box<launch::LaunchArgs>),
    /// Check this host (root, cgroups, namespaces, seccomp, Python, venv,
    /// compiler, disk, package index, images, local model) and say how to
    /// fix each problem; exit 1 when a confined run cannot work.
    Doctor(doctor::DoctorArgs),
}

/// Errors at the CLI edge carry the exit code they map to.
pub struct Failure {
    pub code: i32,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn infra(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 3,
            error: error.into(),
        }
    }

    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            code: 2,
            error: error.into(),
        }
    }
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    logging::init(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return 3;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(*args).await,
            Command::Tasks(cmd) => tasks::run(cmd).await,
            Command::Sandbox(cmd) => sandbox::run(cmd).await,
            Command::Exec(args) => exec::run(args).await,
            Command::Image(cmd) => image::run(cmd).await,
            Command::Model(cmd) => model::run(cmd).await,
            Command::Report(args) => report::run(args).await,
            Command::Compare(args) => compare::run(args).await,
            Command::Export(cmd) => export::run(cmd).await,
            Command::Doctor(args) => doctor::run(args).await,
            Command::Launch(args) => launch::run(*args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(failure) => {
            // Errors quote ids, file names and replies from outside.
            let error = describe(&failure.error);
            let error = retrace::util::redact::text(&error);
            eprintln!("error: {}", retrace::util::terminal::text(&error));
            failure.code
        }
    }
}

/// The error and its causes on one line, each named once (library errors
/// never repeat their `source()` in their own message).
fn describe(error: &anyhow::Error) -> String {
    error
        .chain()
        .map(|cause| cause.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}
