//! `retrace model prepare|status|bench`: the local models' environment
//! and how fast its servers are.

use clap::Subcommand;
use retrace::model::local::bench::{
    self, Aggregate, Bench, BenchError, CodeGeneration, IdleSpeed, RepairRound,
};
use retrace::model::local::{self, Choice, LocalServer, ModelStore, ServerOptions, Status};

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
    /// Measure the local model's server: idle speeds, aggregate prompt and
    /// generation tokens/s at several requests at once, and a repair round
    /// with its prefix cached and not. With `--against`, other servers of
    /// the same model are measured too, interleaved (each measurement on
    /// every server in turn, the others idle).
    Bench {
        /// A model of `retrace model status` or a GGUF path (default: the
        /// default model).
        name: Option<String>,
        /// Another OpenAI-compatible server to measure beside retrace's
        /// llama-server, as `NAME=URL` (e.g.
        /// `llama-cpp-python=http://127.0.0.1:8000/v1`); its key, if it
        /// wants one, from `OPENAI_API_KEY`. Repeatable.
        #[arg(long, value_parser = parse_against)]
        against: Vec<Against>,
        /// Also measure the model served with this draft model (a name of
        /// `retrace model status` or a GGUF path of the same tokenizer),
        /// interleaved with it served alone: speeds, the draft's
        /// acceptance, and whether greedy replies stay the same.
        #[arg(long, value_name = "NAME|PATH", value_parser = clap::builder::NonEmptyStringValueParser::new())]
        draft: Option<String>,
        /// Requests at once, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
        concurrent: Vec<usize>,
        /// Also write the figures as JSON here.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
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
                    "{}: {} ({:.1} MiB, sha256 {}), served by llama-server {} (from {})",
                    m.spec,
                    m.path.display(),
                    m.size_bytes as f64 / (1 << 20) as f64,
                    m.sha256,
                    prepared.env.marker.llama_server_version,
                    prepared.env.marker.sources()
                );
            }
            Ok(0)
        }
        ModelCommand::Bench {
            name,
            against,
            draft,
            concurrent,
            json,
        } => bench(&store, name, against, draft, &concurrent, json).await,
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
            "  server:         llama-server {} ({})",
            d.llama_server_version,
            d.llama_server.display()
        );
        println!("  built from:     {}", d.llama_cpp_sources);
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

/// Another server measured beside ours (`--against NAME=URL`).
#[derive(Clone)]
pub struct Against {
    name: String,
    url: String,
}

fn parse_against(text: &str) -> Result<Against, String> {
    match text.split_once('=') {
        Some((name, url)) if !name.trim().is_empty() && url.starts_with("http") => Ok(Against {
            name: name.trim().to_string(),
            url: url.trim_end_matches('/').to_string(),
        }),
        _ => Err(format!(
            "expected NAME=URL (e.g. llama-cpp-python=http://127.0.0.1:8000/v1), got `{text}`"
        )),
    }
}

/// What one server measured.
#[derive(serde::Serialize)]
struct Measured {
    server: String,
    /// Ours only: another server's threads are its operator's.
    threads: Option<usize>,
    slots: Option<usize>,
    /// The draft model it was served with (ours only).
    draft: Option<String>,
    idle: IdleSpeed,
    aggregate: Vec<Aggregate>,
    repair_round: RepairRound,
    code: CodeGeneration,
    /// Per code prompt, where its greedy reply first differs from the first
    /// server's (byte offset), `null` where identical.
    greedy_differs_at: Vec<Option<usize>>,
    /// The control (first server only, with a draft and at least 4
    /// slots): where its own greedy replies differ when each is decoded
    /// beside three other requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    batched_differs_at: Option<Vec<Option<usize>>>,
}

/// Tokens back per code prompt: enough for a short program, and for a
/// difference between two servers' greedy replies to show.
const CODE_TOKENS: u32 = 160;

async fn bench(
    store: &ModelStore,
    name: Option<String>,
    against: Vec<Against>,
    draft: Option<String>,
    concurrent: &[usize],
    json: Option<std::path::PathBuf>,
) -> Result<i32, Failure> {
    let choice = local::resolve(name.as_deref()).map_err(Failure::usage)?;
    let draft = match draft.as_deref() {
        Some(d) => local::Catalog::builtin()
            .draft_for(&choice, Some(d))
            .map_err(Failure::usage)?,
        None => None,
    };
    let s = store.clone();
    let n_ctx = choice.n_ctx();
    let drafted =
        tokio::task::spawn_blocking(move || s.prepare_with_draft(&choice, draft.as_ref(), true))
            .await
            .map_err(Failure::infra)?
            .map_err(Failure::infra)?;
    let prepared = local::Prepared {
        draft: None,
        ..drafted.clone()
    };
    let slots = concurrent.iter().copied().max().unwrap_or(1);
    let options = ServerOptions {
        slots,
        n_ctx,
        ..ServerOptions::default()
    };
    let threads = options.threads;
    eprintln!(
        "starting {} ({threads} threads, {slots} slots)",
        local::SERVER_NAME
    );
    let ours = LocalServer::start(&prepared, &store.logs_dir(), options.clone())
        .await
        .map_err(Failure::infra)?;
    let mut servers = vec![(local::SERVER_NAME.to_string(), Bench::new(&ours))];
    // Started beside the first and idle while it is measured: both hold
    // their weights in memory at once, never compute at once.
    let draft_name = drafted.draft.as_ref().map(|d| d.spec.clone());
    let with_draft = match &draft_name {
        Some(d) => {
            eprintln!("starting {} with the draft {d}", local::SERVER_NAME);
            let server = LocalServer::start(&drafted, &store.logs_dir(), options)
                .await
                .map_err(Failure::infra)?;
            servers.push((format!("{}+draft", local::SERVER_NAME), Bench::new(&server)));
            Some(server)
        }
        None => None,
    };
    let key = std::env::var("OPENAI_API_KEY").unwrap_or_else(|_| "none".into());
    for other in against {
        servers.push((other.name, Bench::at(&other.url, &key)));
    }
    let failed = |name: &str| {
        let name = name.to_string();
        move |e: BenchError| Failure::infra(anyhow::Error::new(e).context(name))
    };
    let mut idle = Vec::new();
    for (i, (name, b)) in servers.iter().enumerate() {
        idle.push(b.idle_speed(i).await.map_err(failed(name))?);
    }
    let mut aggregate: Vec<Vec<Aggregate>> = vec![Vec::new(); servers.len()];
    for (round, &c) in concurrent.iter().enumerate() {
        for (i, (name, b)) in servers.iter().enumerate() {
            eprintln!("{name}: {c} at once");
            let tag = 10 + round * servers.len() + i;
            aggregate[i].push(b.aggregate(c, tag).await.map_err(failed(name))?);
        }
    }
    let mut repair = Vec::new();
    for (i, (name, b)) in servers.iter().enumerate() {
        repair.push(b.repair_round(1000 + 10 * i).await.map_err(failed(name))?);
    }
    let mut code = Vec::new();
    for (name, b) in &servers {
        eprintln!("{name}: greedy code generation");
        code.push(b.code_generation(CODE_TOKENS).await.map_err(failed(name))?);
    }
    let first: Vec<String> = code.first().map(|c| c.replies.clone()).unwrap_or_default();
    // Whether the first server's greedy replies depend on their batch: if
    // they do, so may a draft's, whose verification is a batch.
    let batched = match (&with_draft, servers.first()) {
        (Some(_), Some((name, b))) if slots >= 4 => {
            eprintln!("{name}: greedy code generation beside 3 other requests");
            let replies = b
                .code_replies_batched(CODE_TOKENS, 3)
                .await
                .map_err(failed(name))?;
            Some(bench::first_differences(&first, &replies))
        }
        _ => None,
    };
    let ours_count = 1 + usize::from(with_draft.is_some());
    let measured: Vec<Measured> = servers
        .into_iter()
        .zip(idle)
        .zip(aggregate)
        .zip(repair)
        .zip(code)
        .enumerate()
        .map(
            |(i, (((((server, _), idle), aggregate), repair_round), code))| Measured {
                server,
                threads: (i < ours_count).then_some(threads),
                slots: (i < ours_count).then_some(slots),
                // The second server is the drafted one when there is one.
                draft: if i == 1 { draft_name.clone() } else { None },
                idle,
                aggregate,
                repair_round,
                greedy_differs_at: bench::first_differences(&first, &code.replies),
                batched_differs_at: (i == 0).then(|| batched.clone()).flatten(),
                code,
            },
        )
        .collect();
    drop(with_draft);
    print_bench(&measured);
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&measured).map_err(Failure::infra)?;
        std::fs::write(&path, text).map_err(Failure::infra)?;
    }
    Ok(0)
}

/// One table per figure, a column per server, and each server's ratio to
/// the first.
fn print_bench(m: &[Measured]) {
    let names: Vec<&str> = m.iter().map(|x| x.server.as_str()).collect();
    println!("figure | {}", names.join(" | "));
    let row = |label: String, values: Vec<f64>, unit: &str| {
        let base = values.first().copied().unwrap_or(0.0);
        let cells: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if i == 0 || base == 0.0 {
                    format!("{v:.1} {unit}")
                } else {
                    format!("{v:.1} {unit} ({:.2}x)", v / base)
                }
            })
            .collect();
        println!("{label} | {}", cells.join(" | "));
    };
    row(
        "idle prompt".into(),
        m.iter().map(|x| x.idle.prompt_tps).collect(),
        "tok/s",
    );
    row(
        "idle generation".into(),
        m.iter().map(|x| x.idle.generation_tps).collect(),
        "tok/s",
    );
    let levels = m.first().map_or(0, |x| x.aggregate.len());
    for i in 0..levels {
        let c = m[0].aggregate[i].concurrent;
        row(
            format!("prompt, {c} at once"),
            m.iter().map(|x| x.aggregate[i].prompt_tps).collect(),
            "tok/s",
        );
        row(
            format!("generation, {c} at once"),
            m.iter().map(|x| x.aggregate[i].generation_tps).collect(),
            "tok/s",
        );
    }
    row(
        "repair round, prefix cached".into(),
        m.iter().map(|x| x.repair_round.cached_ms).collect(),
        "ms",
    );
    row(
        "repair round, nothing cached".into(),
        m.iter().map(|x| x.repair_round.uncached_ms).collect(),
        "ms",
    );
    row(
        "code, greedy, 1 at once".into(),
        m.iter().map(|x| x.code.generation_tps).collect(),
        "tok/s",
    );
    let acceptance: Vec<String> = m
        .iter()
        .map(|x| match x.code.acceptance() {
            Some(a) => format!(
                "{:.1} % ({} of {} drafted)",
                a * 100.0,
                x.code.accepted,
                x.code.drafted
            ),
            None => "no draft".into(),
        })
        .collect();
    println!("draft acceptance | {}", acceptance.join(" | "));
    let differences = |at: &[Option<usize>]| -> Vec<String> {
        (at.iter().enumerate())
            .filter_map(|(i, at)| at.map(|b| format!("prompt {} from byte {b}", i + 1)))
            .collect()
    };
    if let Some(batched) = m.first().and_then(|x| x.batched_differs_at.as_ref()) {
        let differ = differences(batched);
        println!(
            "greedy replies of {} decoded beside 3 other requests: {}",
            names[0],
            if differ.is_empty() {
                "the same".to_string()
            } else {
                format!(
                    "differ ({}): its greedy output depends on its batch, and a draft's verification is a batch",
                    differ.join(", ")
                )
            }
        );
    }
    for x in m.iter().skip(1) {
        let differ = differences(&x.greedy_differs_at);
        let prompts = x.greedy_differs_at.len();
        if differ.is_empty() {
            println!(
                "greedy replies of {} are those of {} ({prompts} of {prompts} prompts)",
                x.server, names[0]
            );
        } else {
            println!(
                "greedy replies of {} differ from those of {}: {}",
                x.server,
                names[0],
                differ.join(", ")
            );
        }
    }
}
