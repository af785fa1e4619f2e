//! `retrace image build|list|kernelspec`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use retrace::pyenv::{ImageName, ImageStore, Kernelspec};
use strum::IntoEnumIterator;

use super::Failure;

#[derive(Subcommand)]
pub enum ImageCommand {
    /// Build images from the lock files (idempotent).
    Build {
        /// `slim`, `fat` or `all`.
        #[arg(default_value = "all")]
        which: String,
    },
    /// Show each image: name, lock hash, Python version, size, path, built.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Write a Jupyter kernelspec that runs kernels of an image (built
    /// first if needed) as retrace does, for a Jupyter server or kernel
    /// gateway on this machine: DIR/kernels/NAME/kernel.json.
    Kernelspec {
        #[arg(value_enum, default_value_t = ImageName::Fat)]
        image: ImageName,
        /// The kernel name clients ask for (default `retrace-<image>`).
        #[arg(long)]
        name: Option<String>,
        /// A JUPYTER_PATH entry: the kernelspec goes under its `kernels/`.
        #[arg(long)]
        dir: PathBuf,
        /// BLAS/OpenMP threads per kernel.
        #[arg(long, default_value_t = 1)]
        threads: u32,
        /// A kernelspec for Jupyter Enterprise Gateway's
        /// DistributedProcessProxy: each kernel is started on its host by
        /// `retrace launch` (this binary, at this path on every host) and
        /// confined there by retrace. Flags after `--` are `retrace
        /// launch`'s limits (e.g. `-- --memory 1G --pids 64`).
        #[arg(long)]
        enterprise_gateway: bool,
        /// Limit flags for `retrace launch` (after `--`).
        #[arg(last = true, requires = "enterprise_gateway")]
        launch_args: Vec<String>,
    },
}

pub async fn run(cmd: ImageCommand) -> Result<i32, Failure> {
    let store = ImageStore::from_env();
    match cmd {
        ImageCommand::Build { which } => {
            let names: Vec<ImageName> = match which.as_str() {
                "all" => ImageName::iter().collect(),
                other => vec![other
                    .parse()
                    .map_err(|e: String| Failure::usage(anyhow::anyhow!(e)))?],
            };
            for name in names {
                let store = ImageStore::new(store.home().to_path_buf());
                let image = tokio::task::spawn_blocking(move || store.build(name, true))
                    .await
                    .map_err(Failure::infra)?
                    .map_err(Failure::infra)?;
                println!("{name}: {}", image.dir.display());
            }
            Ok(0)
        }
        ImageCommand::Kernelspec {
            image,
            name,
            dir,
            threads,
            enterprise_gateway,
            launch_args,
        } => {
            let name = name.unwrap_or_else(|| format!("retrace-{image}"));
            Kernelspec::check_name(&name).map_err(Failure::usage)?;
            // The kernelspec's paths must hold from wherever the gateway runs.
            let dir = std::path::absolute(&dir)
                .with_context(|| format!("resolving {}", dir.display()))
                .map_err(Failure::usage)?;
            let home = std::path::absolute(store.home()).map_err(Failure::infra)?;
            let built = store
                .ensure_blocking(image, true)
                .await
                .map_err(Failure::infra)?;
            let spec = if enterprise_gateway {
                super::launch::check_limit_flags(&launch_args).map_err(Failure::usage)?;
                let exe = std::env::current_exe().map_err(Failure::infra)?;
                built.enterprise_kernelspec(threads, &exe, &home, &launch_args)
            } else {
                built.kernelspec(threads)
            };
            let path = spec
                .write(&dir, &name)
                .with_context(|| format!("writing kernelspec `{name}` under {}", dir.display()))
                .map_err(Failure::infra)?;
            println!("wrote {}", path.display());
            println!("JUPYTER_PATH={}", dir.display());
            Ok(0)
        }
        ImageCommand::List { json } => {
            let list = store.list();
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&list).map_err(Failure::infra)?
                );
                return Ok(0);
            }
            println!(
                "{:<6} {:<16} {:<8} {:>9} {:<6} path",
                "name", "lock", "python", "size", "built"
            );
            for info in list {
                let size = info
                    .size_bytes
                    .map(|b| format!("{:.0} MiB", b as f64 / (1 << 20) as f64))
                    .unwrap_or_else(|| "-".into());
                println!(
                    "{:<6} {:<16} {:<8} {:>9} {:<6} {}",
                    info.name.to_string(),
                    info.lock_hash,
                    info.python_version.as_deref().unwrap_or("-"),
                    size,
                    if info.built { "yes" } else { "no" },
                    info.path.display()
                );
            }
            Ok(0)
        }
    }
}
