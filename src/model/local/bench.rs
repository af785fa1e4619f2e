//! How fast a local model server is: its idle speeds (one request alone),
//! measured when a local model starts (they make the run's *model floor*)
//! and by `retrace model bench`, which also measures aggregate speeds at
//! several requests at once and a repair round with and without its
//! conversation's prefix cached; with a draft model, greedy code
//! generation and the draft's acceptance.
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
    /// Tokens a draft model proposed and, of those, accepted.
    drafted: (u64, u64),
    text: String,
}

/// Requests for code, the text a run's replies are made of: what
/// speculative decoding is measured on, and the fixed set its greedy
/// replies are compared on.
pub const CODE_PROMPTS: [&str; 4] = [
    "Write Python that computes the sum of all primes below 10000 and stores it in a variable named answer. Reply with one fenced code block.",
    "Write Python that reads sales.csv with pandas, groups the rows by region, and stores the region with the largest total of the amount column in answer. Reply with one fenced code block.",
    "Write a Python function that returns the n-th Fibonacci number iteratively, then store fib(90) in answer. Reply with one fenced code block.",
    "Fix this Python and explain nothing: `answer = sum([x**2 for x in range(1, 101)) / len(range(1, 101))`. Reply with one fenced code block.",
];

/// Greedy code generation from [`CODE_PROMPTS`], one request at a time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CodeGeneration {
    /// Generated tokens over generation time, all prompts together.
    pub generation_tps: f64,
    /// Tokens a draft model proposed (0 without one) and the share of them
    /// accepted.
    pub drafted: u64,
    pub accepted: u64,
    /// The replies, in prompt order.
    pub replies: Vec<String>,
}

impl CodeGeneration {
    /// Accepted over drafted, `None` without a draft.
    pub fn acceptance(&self) -> Option<f64> {
        (self.drafted > 0).then(|| self.accepted as f64 / self.drafted as f64)
    }
}

/// Where two sets of greedy replies to the same prompts part: per prompt,
/// `None` when identical, else the byte offset of the first difference.
pub fn first_differences(a: &[String], b: &[String]) -> Vec<Option<usize>> {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            (x != y).then(|| {
                x.bytes()
                    .zip(y.bytes())
                    .position(|(p, q)| p != q)
                    .unwrap_or(x.len().min(y.len()))
            })
        })
        .collect()
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
            drafted: (n(&t["draft_n"]), n(&t["draft_n_accepted"])),
            text: reply["choices"][0]["message"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
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

    /// Each of [`CODE_PROMPTS`] alone at temperature 0, up to `max_tokens`
    /// tokens back: generation speed and the draft's acceptance.
    pub async fn code_generation(&self, max_tokens: u32) -> Result<CodeGeneration, BenchError> {
        let (mut tokens, mut ms, mut drafted, mut accepted) = (0, 0.0, 0, 0);
        let mut replies = Vec::new();
        for prompt in CODE_PROMPTS {
            let c = self
                .complete(
                    json!([{"role": "user", "content": prompt}]),
                    max_tokens,
                    false,
                )
                .await?;
            match c.timings {
                Some((_, _, n, t, _)) if t > 0.0 => {
                    tokens += n;
                    ms += t;
                }
                _ => {
                    tokens += c.completion_tokens;
                    ms += c.ms;
                }
            }
            drafted += c.drafted.0;
            accepted += c.drafted.1;
            replies.push(c.text);
        }
        Ok(CodeGeneration {
            generation_tps: if ms > 0.0 {
                tokens as f64 / ms * 1e3
            } else {
                0.0
            },
            drafted,
            accepted,
            replies,
        })
    }

    /// The greedy replies to [`CODE_PROMPTS`] when each is decoded in a
    /// batch with `others` other requests (distinct short code requests
    /// sent at the same moment): the control that says whether a server's
    /// greedy replies depend on what they are batched with, as a draft's
    /// verification batches the drafted tokens.
    pub async fn code_replies_batched(
        &self,
        max_tokens: u32,
        others: usize,
    ) -> Result<Vec<String>, BenchError> {
        let mut replies = Vec::new();
        for (p, prompt) in CODE_PROMPTS.iter().enumerate() {
            let main = self.complete(
                json!([{"role": "user", "content": prompt}]),
                max_tokens,
                false,
            );
            let beside = (0..others).map(|i| {
                let text = format!(
                    "Write Python that prints the numbers from 1 to {}.",
                    10 + 10 * p + i
                );
                self.complete(
                    json!([{"role": "user", "content": text}]),
                    max_tokens,
                    false,
                )
            });
            let (main, beside) = futures_util::join!(main, futures_util::future::join_all(beside));
            for b in beside {
                b?;
            }
            replies.push(main?.text);
        }
        Ok(replies)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_replies_part_at_their_first_different_byte() {
        let a = ["abc".to_string(), "same".into(), "short".into()];
        let b = ["abd".to_string(), "same".into(), "shorter".into()];
        assert_eq!(first_differences(&a, &b), [Some(2), None, Some(5)]);
        let drafted = CodeGeneration {
            generation_tps: 1.0,
            drafted: 0,
            accepted: 0,
            replies: vec![],
        };
        assert_eq!(drafted.acceptance(), None);
        let half = CodeGeneration {
            drafted: 10,
            accepted: 5,
            ..drafted
        };
        assert_eq!(half.acceptance(), Some(0.5));
    }
}
