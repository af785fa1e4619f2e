//! `retrace exec FILE|-`: run a file's cells in one fresh kernel.

use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use retrace::harness::packages::fixed_cell;
use retrace::kernel::{
    default_kernel_root, ExecOptions, Executor, Kernel, KernelOptions, KernelSpec, KernelStart,
    Outcome,
};
use retrace::pyenv::dynamic::{CellScanner, PackageStore};
use retrace::pyenv::{FixedImage, ImageName, ImageStore, Strategy};
use retrace::util::input_file::DEFAULT_MAX_TASK_FILE_BYTES;
use retrace::util::terminal;

use super::executor::ExecutorArgs;
use super::kernel_env::EnvArgs;
use super::limits::LimitArgs;
use super::Failure;

#[derive(Args)]
pub struct ExecArgs {
    /// Python file to run, or `-` for standard input.
    pub file: String,
    /// Image the kernel runs in: `fat` or `slim`.
    #[arg(long, default_value = "fat")]
    pub image: ImageName,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub executor: ExecutorArgs,
    #[command(flatten)]
    pub env: EnvArgs,
    /// Directory where plots and other images are written.
    #[arg(long, default_value = "retrace-artifacts")]
    pub artifacts: PathBuf,
    /// Print a JSON array with one outcome per cell.
    #[arg(long)]
    pub json: bool,
}

/// Splits source into cells at lines starting with `# %%`.
pub fn split_cells(source: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    for line in source.split_inclusive('\n') {
        if line.starts_with("# %%") {
            cells.push(String::new());
        } else {
            cells.last_mut().expect("never empty").push_str(line);
        }
    }
    cells.retain(|c| !c.trim().is_empty());
    cells
}

pub async fn run(args: ExecArgs) -> Result<i32, Failure> {
    let source = if args.file == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Failure::usage(anyhow::anyhow!("reading standard input: {e}")))?;
        text
    } else {
        std::fs::read_to_string(&args.file)
            .map_err(|e| Failure::usage(anyhow::anyhow!("reading {}: {e}", args.file)))?
    };
    let cells = split_cells(&source);

    // One kernel: it would wait for the zygote's own start, so cold unless
    // asked.
    let options = KernelOptions {
        start: args.limits.kernel_start.unwrap_or(KernelStart::Cold),
        env: args.env.env()?,
        ..args.limits.kernel_options()
    };
    let executor = args.executor.open(&args.limits, 1).await?;
    // A local kernel's image is fixed: its install lines get a notice.
    let mut fixed = None;
    let mut kernel = match &executor {
        Executor::Local(sandbox) => {
            let image = ImageStore::from_env()
                .ensure_blocking(args.image, true)
                .await
                .map_err(Failure::infra)?;
            let strategy = match args.image {
                ImageName::Fat => Strategy::Fat,
                _ => Strategy::Slim,
            };
            let scanner = CellScanner::new(
                image.clone(),
                sandbox.clone(),
                PackageStore::from_env().work_dir(),
            );
            fixed = Some(FixedImage::new(scanner, strategy));
            let spec = Arc::new(KernelSpec {
                threads: args.limits.limits().threads(),
                ..KernelSpec::new(image, default_kernel_root())
            });
            if !args.json {
                eprintln!(
                    "{}",
                    super::limits::describe(&sandbox.info(), &args.limits.limits())
                );
            }
            executor
                .start(spec, options)
                .await
                .map_err(Failure::infra)?
        }
        Executor::Gateway(gateway) => {
            if !args.json {
                eprintln!(
                    "{}",
                    super::executor::describe(&executor).unwrap_or_default()
                );
            }
            // No image: a gateway's kernels run the gateway's own.
            gateway
                .start(&[], DEFAULT_MAX_TASK_FILE_BYTES, options)
                .await
                .map(Kernel::into_any)
                .map_err(Failure::infra)?
        }
    };

    let mut outcomes = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        let exec = ExecOptions {
            timeout: args.limits.timeout,
            artifact_dir: Some(args.artifacts.clone()),
            artifact_prefix: format!("cell{}", i + 1),
        };
        let outcome = match &fixed {
            Some(fixed) => fixed_cell(fixed, &mut kernel, cell, &exec).await,
            None => kernel.execute(cell, &exec).await,
        };
        if !args.json {
            print_outcome(i + 1, &outcome, &args.artifacts);
        }
        outcomes.push(outcome);
    }
    kernel.discard().await;

    if args.json {
        // Base64 copies of images are for vision models, not for terminals;
        // a path must open from where the command ran, not only from the
        // artifact directory.
        let shown: Vec<Outcome> = outcomes
            .iter()
            .cloned()
            .map(|mut outcome| {
                for artifact in &mut outcome.artifacts {
                    artifact.base64 = None;
                    artifact.path = args
                        .artifacts
                        .join(&artifact.path)
                        .to_string_lossy()
                        .into_owned();
                }
                outcome
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&shown).map_err(Failure::infra)?
        );
    }
    Ok(if outcomes.iter().all(Outcome::succeeded) {
        0
    } else {
        1
    })
}

fn print_outcome(n: usize, o: &Outcome, artifact_dir: &std::path::Path) {
    let count = o
        .execution_count
        .map(|c| format!(" [{c}]"))
        .unwrap_or_default();
    println!(
        "── cell {n}{count} ── {} ({:.1} ms)",
        o.verdict, o.timings_ms.total
    );
    // Kernel output is the code's: shown with its control characters made
    // visible, so it cannot drive the user's terminal (the record keeps it).
    if !o.stdout.is_empty() {
        let stdout = terminal::text(&o.stdout);
        print!("{stdout}");
        if !stdout.ends_with('\n') {
            println!();
        }
    }
    if !o.stderr.is_empty() {
        for line in o.stderr.lines() {
            println!("stderr: {}", terminal::text(line));
        }
    }
    for result in &o.results {
        if let Some(text) = result.text() {
            println!("=> {}", terminal::text(text));
        }
    }
    if let Some(e) = &o.error {
        if e.traceback.is_empty() {
            println!(
                "{}: {}",
                terminal::text(&e.ename),
                terminal::text(&e.evalue)
            );
        } else {
            println!("{}", terminal::text(&e.traceback.join("\n")));
        }
    }
    for a in &o.artifacts {
        println!(
            "artifact: {} ({})",
            terminal::text(&artifact_dir.join(&a.path).display().to_string()),
            terminal::text(&a.mime)
        );
    }
    if !o.flags.is_empty() {
        println!("flags: {}", o.flags.join(", "));
    }
    if !o.fired.is_empty() {
        let fired: Vec<&str> = o.fired.iter().map(|v| v.as_str()).collect();
        println!("limits fired: {}", fired.join(", "));
    }
    if let Some(s) = o.suggested {
        println!("the error claims {s}, which no OS evidence confirms");
    }
    if let Some(refused) = &o.code_too_large {
        println!(
            "not run: the cell is {} bytes, over the limit of {} bytes",
            refused.bytes, refused.limit
        );
    }
    if o.text_replacements > 0 {
        println!(
            "{} sequences of text that is not valid Unicode shown as U+FFFD",
            o.text_replacements
        );
    }
    if o.truncated {
        println!(
            "output truncated: {} bytes and {} messages dropped",
            o.truncation.dropped_bytes, o.truncation.dropped_messages
        );
    }
    if let Some(a) = &o.answer {
        match &a.unsupported {
            Some(u) => println!("answer: {} ({:?})", terminal::text(&u.message()), a.rule),
            None => println!("answer: {} ({:?})", terminal::text(&a.value), a.rule),
        }
    }
    if o.state_lost {
        println!("the kernel was restarted; its variables are gone");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_split_on_markers() {
        let src = "a = 1\n# %% second\nb = 2\n\n# %%\n\n# %%\nprint(a + b)";
        assert_eq!(
            split_cells(src),
            vec!["a = 1\n", "b = 2\n\n", "print(a + b)"]
        );
        assert_eq!(split_cells("x = 1"), vec!["x = 1"]);
        assert!(split_cells("# %%\n").is_empty());
    }
}
