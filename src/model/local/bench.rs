//! How fast a local model server is: its idle speeds (one request alone),
//! measured when a local model starts (they make the run's *model floor*)
//! and by `retrace model bench`, which also measures aggregate speeds at
//! several requests at once and a repair round with and without its
//! conversation's prefix cached.
//!
//! Requests go straight to `/v1/chat/completions` as JSON, not through the
//! run's client: the benchmark sets what a run never does (`cache_prompt:
//! false`, one-token replies), and reads the server's own `timings`.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::{LocalServer, SERVED_MODEL};

/// Tokens per second of one request alone on an idle server.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct IdleSpeed {
    pub prompt_tps: f64,
    pub generation_tps: f64,
}

/// `concurrent` requests sent at once, each a distinct prompt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Aggregate {
    pub concurrent: usize,
    /// Prompt tokens of all requests over the wall time of prompt-only
    /// requests (one token generated).
    pub prompt_tps: f64,
    /// Generated tokens of all requests over the wall time of
    /// generation-heavy requests (short prompts).
    pub generation_tps: f64,
}

/// A repair round's request with its conversation's prefix in the
/// server's cache, and the same request evaluated from scratch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepairRound {
    pub cached_ms: f64,
    pub cached_tokens: u64,
    pub uncached_ms: f64,
}

/// A benchmark request the server at `url` did not answer, answered with
/// an error status or with a body that is not JSON.
#[derive(Debug, thiserror::Error)]
#[error("the benchmark's request to {url}")]
pub struct BenchError {
    url: String,
    #[source]
    source: reqwest::Error,
}

/// One completion as the benchmark reads it.
struct Completion {
    ms: f64,
    prompt_tokens: u64,
    completion_tokens: u64,
    /// `(prompt_n, prompt_ms, predicted_n, predicted_ms, cache_n)` when the
    /// server reports its timings.
    timings: Option<(u64, f64, u64, f64, u64)>,
}

/// A client of one server.
pub struct Bench {
    http: reqwest::Client,
    url: String,
    key: String,
}

/// Words of distinct prompts: request `i` counts from its own number.
fn filler(i: usize, words: usize) -> String {
    (0..words)
        .map(|w| format!("{}", i * 1000 + w))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Bench {
    pub fn new(server: &LocalServer) -> Bench {
        Bench::at(server.base_url(), server.api_key().unwrap_or("none"))
    }

    /// A client of any OpenAI-compatible server at `base_url` (`…/v1`),
    /// which must serve the same model whatever `model` a request names.
    pub fn at(base_url: &str, key: &str) -> Bench {
        Bench {
            http: reqwest::Client::new(),
            url: format!("{base_url}/chat/completions"),
            key: key.to_string(),
        }
    }

    async fn complete(
        &self,
        messages: serde_json::Value,
        max_tokens: u32,
        cache_prompt: bool,
    ) -> Result<Completion, BenchError> {
        let body = json!({
            "model": SERVED_MODEL,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "seed": 0,
            "cache_prompt": cache_prompt,
        });
        let started = Instant::now();
        let sent = async {
            let reply = self.http.post(&self.url).bearer_auth(&self.key);
            let reply = reply.timeout(Duration::from_secs(600)).json(&body);
            reply.send().await?.error_for_status()?.json().await
        };
        let reply: serde_json::Value = sent.await.map_err(|source| BenchError {
            url: self.url.clone(),
            source,
        })?;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
        let f = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
        let t = &reply["timings"];
        Ok(Completion {
            ms,
            prompt_tokens: n(&reply["usage"]["prompt_tokens"]),
            completion_tokens: n(&reply["usage"]["completion_tokens"]),
            timings: t.is_object().then(|| {
                (
                    n(&t["prompt_n"]),
                    f(&t["prompt_ms"]),
                    n(&t["predicted_n"]),
                    f(&t["predicted_ms"]),
                    n(&t["cache_n"]),
                )
            }),
        })
    }

    /// After a short unmeasured request, one prompt-heavy request (60
    /// numbers, about 250 tokens, one token back) and one generation-heavy
    /// request (24 tokens back), each alone: about 10 s for the default
    /// model on 2 cores. Speeds from the
    /// server's timings, or from wall time where it has none.
    pub async fn idle_speed(&self, tag: usize) -> Result<IdleSpeed, BenchError> {
        // Unmeasured: the first request after a start pays once for what
        // later ones reuse (thread pool, compute buffers, cold pages).
        let warm = json!([{"role": "user", "content": format!("Say {tag}.")}]);
        self.complete(warm, 1, false).await?;
        let prompt = json!([{"role": "user", "content": filler(tag, 60)}]);
        let p = self.complete(prompt, 1, false).await?;
        let gen = json!([{"role": "user", "content": format!("Count from {tag} upwards, one number per line.")}]);
        let g = self.complete(gen, 24, false).await?;
        let prompt_tps = match p.timings {
            Some((n, ms, ..)) if ms > 0.0 => n as f64 / ms * 1e3,
            _ => p.prompt_tokens as f64 / p.ms * 1e3,
        };
        let generation_tps = match g.timings {
            Some((_, _, n, ms, _)) if ms > 0.0 => n as f64 / ms * 1e3,
            _ => g.completion_tokens as f64 / g.ms * 1e3,
        };
        Ok(IdleSpeed {
            prompt_tps,
            generation_tps,
        })
    }

    /// `concurrent` distinct requests at once, twice: prompt-heavy, then
    /// generation-heavy; aggregate tokens per second of wall time.
    pub async fn aggregate(&self, concurrent: usize, tag: usize) -> Result<Aggregate, BenchError> {
        let all = |max_tokens: u32, words: usize| {
            let requests = (0..concurrent).map(move |i| {
                let text = if words > 0 {
                    filler(tag * 100 + i, words)
                } else {
                    format!("Count from {} upwards, one number per line.", tag * 100 + i)
                };
                self.complete(
                    json!([{"role": "user", "content": text}]),
                    max_tokens,
                    false,
                )
            });
            futures_util::future::join_all(requests)
        };
        let timed = |started: Instant| started.elapsed().as_secs_f64();
        let started = Instant::now();
        let prompts: Vec<Completion> = all(1, 100).await.into_iter().collect::<Result<_, _>>()?;
        let prompt_s = timed(started);
        let started = Instant::now();
        let gens: Vec<Completion> = all(64, 0).await.into_iter().collect::<Result<_, _>>()?;
        let gen_s = timed(started);
        Ok(Aggregate {
            concurrent,
            prompt_tps: prompts.iter().map(|c| c.prompt_tokens).sum::<u64>() as f64 / prompt_s,
            generation_tps: gens.iter().map(|c| c.completion_tokens).sum::<u64>() as f64 / gen_s,
        })
    }

    /// A conversation, then its repair round (its prefix cached); and the
    /// repair round of another conversation of the same length sent with
    /// no first round before it (nothing of it cached, on any server).
    pub async fn repair_round(&self, tag: usize) -> Result<RepairRound, BenchError> {
        let conversation = |tag: usize| {
            let task = format!(
                "Here are measurements: {}. Write Python that stores their mean in `answer`.",
                filler(tag, 120)
            );
            vec![
                json!({"role": "system", "content": "You write Python in one fenced block."}),
                json!({"role": "user", "content": task}),
            ]
        };
        let repair = |mut messages: Vec<serde_json::Value>| {
            messages.push(json!({"role": "assistant", "content": "```python\nanswer = sum(valuez) / len(valuez)\n```"}));
            messages.push(json!({"role": "user", "content": "NameError: name 'valuez' is not defined (line 1). Fix it."}));
            serde_json::Value::Array(messages)
        };
        self.complete(serde_json::Value::Array(conversation(tag)), 1, true)
            .await?;
        let cached = self.complete(repair(conversation(tag)), 1, true).await?;
        let uncached = self
            .complete(repair(conversation(tag + 1)), 1, true)
            .await?;
        Ok(RepairRound {
            cached_ms: cached.ms,
            cached_tokens: cached.timings.map_or(0, |t| t.4),
            uncached_ms: uncached.ms,
        })
    }
}
