//! `retrace model prepare|status`: the local model's environment.

use clap::Subcommand;
use retrace::model::local::{ModelStore, Status};

use super::Failure;

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Install the llama.cpp server and the SmolLM2-135M-Instruct weights
    /// (what `--model local` needs) ahead of time. Idempotent; the first
    /// time compiles llama.cpp (10-20 min on 2 cores).
    Prepare,
    /// Show what is prepared and where.
    Status {
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(cmd: ModelCommand) -> Result<i32, Failure> {
    let store = ModelStore::from_env();
    match cmd {
        ModelCommand::Prepare => {
            let env = tokio::task::spawn_blocking(move || store.prepare(true))
                .await
                .map_err(Failure::infra)?
                .map_err(Failure::infra)?;
            println!(
                "{}: {} (llama-cpp-python {})",
                retrace::model::local::SPEC,
                env.dir.display(),
                env.server_version()
            );
            Ok(0)
        }
        ModelCommand::Status { json } => {
            let status = tokio::task::spawn_blocking(move || store.status())
                .await
                .map_err(Failure::infra)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&status).map_err(Failure::infra)?
                );
            } else {
                print_status(&status);
            }
            Ok(0)
        }
    }
}

fn print_status(s: &Status) {
    println!("model:          {}", s.model);
    println!("directory:      {}", s.dir.display());
    match &s.reason {
        None => println!("prepared:       yes"),
        Some(reason) => println!("prepared:       no ({reason}); run `retrace model prepare`"),
    }
    if let Some(d) = &s.details {
        let stale = if s.prepared { "" } else { " (stale)" };
        println!("venv:           {}{stale}", d.venv.display());
        println!(
            "base python:    {} ({})",
            d.base_python.display(),
            d.python_version
        );
        println!("server:         {} {}", d.server_package, d.server_version);
        println!("weights:        {}", d.weights);
        println!("gguf:           {}", d.gguf_path.display());
        println!(
            "gguf size:      {} bytes ({:.1} MiB)",
            d.gguf_size_bytes,
            d.gguf_size_bytes as f64 / (1 << 20) as f64
        );
        println!("gguf sha256:    {}", d.gguf_sha256);
        println!("prepared at:    {}", d.prepared_at.to_rfc3339());
    }
    println!("prepare log:    {}", s.prepare_log.display());
}
