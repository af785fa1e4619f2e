//! A hostile endpoint: over a whole run of real kernels, a scripted server
//! plays a seeded mix of the faults real OpenAI-compatible servers produce
//! (429s with and without `Retry-After`, a huge `Retry-After`, 500 and 503,
//! connections reset mid-body, truncated and invalid JSON, no choices, a
//! 1 MB reply, stalls before and within the body, a slow first byte) among
//! good replies. Every task must end with an answer or as an infrastructure
//! error after the documented retries, each wait must be the documented one,
//! the exit code must follow `--max-infra-errors`, and `--resume` against a
//! server that now answers well must redo exactly the tasks lost to the
//! endpoint.
//!
//! The fault of a request is a function of the seed, the task, the round
//! and how often that request was sent before, so concurrent tasks see the
//! same mix whatever order their requests arrive in.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::retrace;
use common::scripted_http::{completion, respond, Act, Seen, Server};
use retrace::pyenv::ImageName;
use retrace::record::{AttemptRecord, RecordKind};

const SEED: u64 = 30;
const TASKS: usize = 150;
const MAX_RETRIES: usize = 2;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// The `Retry-After` of an ordinary 429, in seconds.
const RETRY_AFTER: u64 = 1;
/// A `Retry-After` the client must clamp.
const HUGE_RETRY_AFTER: u64 = 3600;
/// The documented clamp of a `Retry-After` (docs/models.md).
const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);
/// The documented longest backoff delay without a `Retry-After`.
const BACKOFF_CAP: Duration = Duration::from_secs(8);
/// The one request answered with [`HUGE_RETRY_AFTER`]: (task, round, sent
/// before). Only one, since each costs the clamp (60 s) of waiting.
const HUGE_AT: (usize, u32, usize) = (1, 0, 0);
/// How long a stalled reply says nothing: far beyond any wait of the run,
/// so that a stall the client does not cut shows as a hang.
const STALL: Duration = Duration::from_secs(3600);
/// Added to every upper bound on a wait: far above what a loaded machine
/// adds; the bounds only say that a wait was cut, not how fast.
const SLACK: Duration = Duration::from_secs(30);
/// The whole run, far above its usual two minutes: reached only by a hang.
const WATCHDOG: Duration = Duration::from_secs(600);

/// What the server does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    /// A reply whose code answers the task.
    Good,
    /// A reply whose code fails (NameError): a repair round follows.
    Buggy,
    /// A good reply after a third of the request timeout.
    SlowFirstByte,
    /// A good reply padded to over 1 MB.
    Megabyte,
    RateLimited,
    RateLimitedRetryAfter,
    RateLimitedHugeRetryAfter,
    ServerError,
    Unavailable,
    ResetMidBody,
    StallBeforeHead,
    StallMidBody,
    TruncatedJson,
    InvalidJson,
    NoChoices,
}

use Fault::*;

/// Out of 100 (`Buggy` only in round 0: repairs are good or faulty).
const WEIGHTS: [(Fault, u64); 14] = [
    (Good, 42),
    (Buggy, 8),
    (SlowFirstByte, 5),
    (Megabyte, 2),
    (RateLimited, 7),
    (RateLimitedRetryAfter, 7),
    (ServerError, 5),
    (Unavailable, 5),
    (ResetMidBody, 5),
    (StallBeforeHead, 2),
    (StallMidBody, 3),
    (TruncatedJson, 3),
    (InvalidJson, 3),
    (NoChoices, 3),
];

/// How the client must take a fault.
#[derive(Debug, PartialEq)]
enum Expect {
    /// A reply: the round runs its code.
    Reply { correct: bool },
    /// Not retried: the round is an infrastructure error.
    Invalid,
    /// Retried, after this `Retry-After` (clamped) or else a backoff delay.
    Retried { retry_after: Option<Duration> },
}

impl Fault {
    fn expect(self) -> Expect {
        match self {
            Good | SlowFirstByte | Megabyte => Expect::Reply { correct: true },
            Buggy => Expect::Reply { correct: false },
            TruncatedJson | InvalidJson | NoChoices => Expect::Invalid,
            RateLimitedRetryAfter => Expect::Retried {
                retry_after: Some(Duration::from_secs(RETRY_AFTER)),
            },
            RateLimitedHugeRetryAfter => Expect::Retried {
                retry_after: Some(Duration::from_secs(HUGE_RETRY_AFTER).min(RETRY_AFTER_CAP)),
            },
            _ => Expect::Retried { retry_after: None },
        }
    }

    /// The request got no reply before the request timeout.
    fn stalls(self) -> bool {
        matches!(self, StallBeforeHead | StallMidBody)
    }
}

/// splitmix64: a fixed, seedable mix of the inputs.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The fault of the request for `task`'s round `round` sent `before`
/// times already.
fn plan(task: usize, round: u32, before: usize) -> Fault {
    if (task, round, before) == HUGE_AT {
        return RateLimitedHugeRetryAfter;
    }
    let draw = mix(SEED ^ mix(((task as u64) << 16) | (u64::from(round) << 8) | before as u64));
    let mut point = draw % 100;
    for (fault, weight) in WEIGHTS {
        if point < weight {
            return if fault == Buggy && round > 0 {
                Good
            } else {
                fault
            };
        }
        point -= weight;
    }
    unreachable!("the weights sum to 100")
}

/// The tasks the documented rules lose to the endpoint under [`plan`],
/// with the round each is lost in: a reply ends a round (a wrong one leads
/// to a repair round), a reply that is not valid ends the task, a retried
/// fault is retried until `max_retries + 1` requests were sent.
fn predicted_losses() -> BTreeMap<usize, u32> {
    let mut lost = BTreeMap::new();
    for task in 0..TASKS {
        let (mut round, mut before) = (0, 0);
        loop {
            match plan(task, round, before).expect() {
                Expect::Reply { correct: true } => break,
                Expect::Reply { correct: false } => (round, before) = (round + 1, 0),
                Expect::Invalid => {
                    lost.insert(task, round);
                    break;
                }
                Expect::Retried { .. } if before == MAX_RETRIES => {
                    lost.insert(task, round);
                    break;
                }
                Expect::Retried { .. } => before += 1,
            }
        }
    }
    lost
}

/// Task `i`: `a × b`, its id and question.
struct Task {
    id: String,
    a: u64,
    b: u64,
}

fn tasks() -> Vec<Task> {
    (0..TASKS)
        .map(|i| {
            let r = mix(SEED.wrapping_add(i as u64));
            Task {
                id: format!("h{i:03}"),
                a: 2 + r % 97,
                b: 2 + (r >> 32) % 89,
            }
        })
        .collect()
}

fn question(i: usize, task: &Task) -> String {
    format!("Item {i}: what is {} times {}?", task.a, task.b)
}

fn write_suite(dir: &Path, tasks: &[Task]) -> String {
    let path = dir.join("hostile.jsonl");
    let lines: Vec<String> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({
                "id": t.id, "question": question(i, t),
                "expected": {"type": "number", "value": t.a * t.b},
                "reference": format!("answer = {} * {}", t.a, t.b),
            })
            .to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.display().to_string()
}

/// The task and round a request is about: the task's number from its
/// question, the round from the length of the conversation (system and
/// task, then a reply and a feedback message per round).
fn about(request: &Seen) -> (usize, u32) {
    let body: serde_json::Value = serde_json::from_str(&request.body).expect("a JSON request");
    let messages = body["messages"].as_array().expect("messages");
    let task = messages[1]["content"]
        .as_str()
        .and_then(|q| q.split("Item ").nth(1))
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no task number in {}", messages[1]));
    (task, (messages.len() as u32 - 2) / 2)
}

fn good_text(task: &Task) -> String {
    format!(
        "Multiply the two numbers.\n\n```python\nanswer = {} * {}\n```\n",
        task.a, task.b
    )
}

/// What the server sends for `fault` about `task`.
fn act(fault: Fault, task: &Task) -> Act {
    let good = completion(&good_text(task));
    let rate_limited = r#"{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}"#;
    let with_retry_after = |secs: u64| Act::Respond {
        status: 429,
        headers: vec![("Retry-After", secs.to_string())],
        body: rate_limited.into(),
    };
    match fault {
        Good => respond(200, &good),
        Buggy => respond(
            200,
            &completion(&format!(
                "```python\nanswer = {} * second_factor\n```",
                task.a
            )),
        ),
        SlowFirstByte => Act::Delay(REQUEST_TIMEOUT / 3, Box::new(respond(200, &good))),
        Megabyte => {
            let line = "Let me think about this multiplication once more, carefully.\n";
            let padding = line.repeat((1 << 20) / line.len() + 1);
            respond(200, &completion(&(good_text(task) + &padding)))
        }
        RateLimited => respond(429, rate_limited),
        RateLimitedRetryAfter => with_retry_after(RETRY_AFTER),
        RateLimitedHugeRetryAfter => with_retry_after(HUGE_RETRY_AFTER),
        ServerError => respond(500, "Internal Server Error"),
        Unavailable => respond(503, "<html><body>503 Service Unavailable</body></html>"),
        ResetMidBody => Act::ResetMidBody { body: good },
        StallBeforeHead => Act::Stall(STALL),
        StallMidBody => Act::StallMidBody {
            body: good,
            stall: STALL,
        },
        TruncatedJson => respond(200, &good[..good.len() / 2]),
        InvalidJson => respond(200, r#"{"choices": [{"message": {"content": "hi"}},]"#),
        NoChoices => respond(
            200,
            r#"{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m", "choices": []}"#,
        ),
    }
}

/// One request as the hostile server took it.
#[derive(Debug, Clone)]
struct Served {
    fault: Fault,
    at: Instant,
}

type Log = Arc<Mutex<BTreeMap<(usize, u32), Vec<Served>>>>;

async fn hostile(tasks: Arc<Vec<Task>>) -> (Server, Log) {
    let log: Log = Arc::default();
    let log2 = log.clone();
    let server = Server::start_fn(move |request| {
        let (task, round) = about(request);
        let mut log = log2.lock().unwrap();
        let sent = log.entry((task, round)).or_default();
        let fault = plan(task, round, sent.len());
        sent.push(Served {
            fault,
            at: request.at,
        });
        act(fault, &tasks[task])
    })
    .await;
    (server, log)
}

fn records(dir: &Path) -> Vec<AttemptRecord> {
    retrace::harness::journal::read(&dir.join("results.jsonl")).unwrap()
}

/// Each task's records, by round.
fn by_task(records: &[AttemptRecord]) -> BTreeMap<String, Vec<AttemptRecord>> {
    let mut out: BTreeMap<String, Vec<AttemptRecord>> = BTreeMap::new();
    for r in records {
        out.entry(r.task_id.clone()).or_default().push(r.clone());
    }
    for recs in out.values_mut() {
        recs.sort_by_key(|r| r.round);
    }
    out
}

/// `retrace run` against `base_url`: `--out DIR`, or `--resume DIR`.
fn run_args(suite: &str, base_url: &str, dir: (&str, &Path), max_infra: usize) -> Vec<String> {
    let timeout = format!("{}s", REQUEST_TIMEOUT.as_secs());
    let retries = MAX_RETRIES.to_string();
    let max_infra = max_infra.to_string();
    [
        "run",
        dir.0,
        &dir.1.display().to_string(),
        "--suite",
        suite,
        "--model",
        "openai:hostile",
        "--base-url",
        base_url,
        "--api-key",
        "test",
        "--request-timeout",
        &timeout,
        "--max-retries",
        &retries,
        "--concurrency",
        "6",
        "--max-infra-errors",
        &max_infra,
    ]
    .map(String::from)
    .to_vec()
}

/// Runs `args` off the async runtime (the servers live on it), killing
/// the run if it hangs.
async fn run_cli(args: Vec<String>) -> common::Ran {
    let ran = tokio::task::spawn_blocking(move || {
        retrace(args).image(ImageName::Fat).run_within(WATCHDOG)
    })
    .await
    .unwrap();
    ran.unwrap_or_else(|ran| panic!("the run hung (killed after {WATCHDOG:?}): {ran}"))
}

/// Checks one task's round against the requests the server took for it:
/// retried only after a retried fault, at most `max_retries + 1` times,
/// after the documented wait; and the round's record says how it ended.
fn check_round(id: &str, round: u32, sent: &[Served], rec: &AttemptRecord, more: bool) {
    let what = format!(
        "{id} round {round}: {:?}",
        sent.iter().map(|s| s.fault).collect::<Vec<_>>()
    );
    assert!(sent.len() <= MAX_RETRIES + 1, "{what}: too many attempts");
    for pair in sent.windows(2) {
        let (fault, gap) = (pair[0].fault, pair[1].at - pair[0].at);
        let Expect::Retried { retry_after } = fault.expect() else {
            panic!("{what}: {fault:?} was retried");
        };
        match retry_after {
            Some(wait) => {
                assert!(
                    gap >= wait,
                    "{what}: Retry-After {wait:?} not honoured ({gap:?})"
                );
                assert!(gap <= wait + SLACK, "{what}: waited {gap:?} for {wait:?}");
            }
            None => {
                let stall = if fault.stalls() {
                    REQUEST_TIMEOUT
                } else {
                    Duration::ZERO
                };
                let most = stall + BACKOFF_CAP + SLACK;
                assert!(gap <= most, "{what}: {gap:?} before the retry");
            }
        }
    }
    let last = sent
        .last()
        .unwrap_or_else(|| panic!("{what}: no request"))
        .fault;
    let n = sent.len();
    let infra = rec.infra_error.as_deref().unwrap_or("");
    match last.expect() {
        Expect::Reply { correct } => {
            assert_eq!(rec.kind, RecordKind::Attempt, "{what}: {infra}");
            assert_eq!(rec.correct, correct, "{what}");
            // A wrong answer is repaired in the next round; a right one ends the task.
            assert_eq!(more, !correct, "{what}");
        }
        Expect::Invalid => {
            assert_eq!(rec.kind, RecordKind::InfraError, "{what}");
            assert!(
                infra.contains("not valid") && infra.contains(&format!("(attempt {n})")),
                "{what}: {infra}"
            );
            assert!(!more, "{what}: went on after an infrastructure error");
        }
        Expect::Retried { .. } => {
            assert_eq!(n, MAX_RETRIES + 1, "{what}: gave up early");
            assert_eq!(rec.kind, RecordKind::InfraError, "{what}");
            assert!(
                infra.contains(&format!("after {n} attempts")),
                "{what}: {infra}"
            );
            assert!(!more, "{what}: went on after an infrastructure error");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_endpoint_ends_every_task_and_resume_redoes_the_lost_ones() {
    if common::lacks_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tasks = Arc::new(tasks());
    let suite = write_suite(dir.path(), &tasks);
    let out = dir.path().join("run");
    let predicted = predicted_losses();
    assert!(
        predicted.values().any(|round| *round > 0),
        "seed {SEED} loses no task in a repair round"
    );
    let predicted: BTreeSet<String> = predicted.keys().map(|t| tasks[*t].id.clone()).collect();

    // One infrastructure error more than allowed.
    let (server, log) = hostile(tasks.clone()).await;
    let allowed = predicted.len() - 1;
    let started = Instant::now();
    let ran = run_cli(run_args(
        &suite,
        &server.base_url(),
        ("--out", &out),
        allowed,
    ))
    .await;
    eprintln!("hostile run: {:.1} s", started.elapsed().as_secs_f64());
    let log = log.lock().unwrap().clone();
    assert_eq!(server.requests().len(), log.values().flatten().count());
    let before = by_task(&records(&out));
    let lost = check_hostile_run(&tasks, &log, &before);
    assert_eq!(lost, predicted);

    // More infrastructure errors than --max-infra-errors: exit 3, with
    // the reports written.
    assert_eq!(ran.code, 3, "{ran}");
    let says = format!(
        "{} task(s) ended on an infrastructure error (allowed: {allowed},",
        lost.len()
    );
    assert!(ran.stderr.contains(&says), "{ran}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let rate = &summary["infra_error_rate"];
    assert_eq!(rate["successes"], lost.len(), "{rate}");
    assert_eq!(rate["n"], TASKS, "{rate}");

    // Resumed against a server that answers well: exactly the lost tasks
    // are redone, from round 0; none is lost now, so none is too many.
    let good = {
        let tasks = tasks.clone();
        Server::start_fn(move |request| act(Good, &tasks[about(request).0])).await
    };
    let resumed = run_cli(run_args(&suite, &good.base_url(), ("--resume", &out), 0)).await;
    assert_eq!(resumed.code, 0, "{resumed}");
    let redone: Vec<(usize, u32)> = good.requests().iter().map(about).collect();
    let redone_ids: BTreeSet<String> = redone.iter().map(|(t, _)| tasks[*t].id.clone()).collect();
    assert_eq!(
        redone_ids, lost,
        "the resume redid other tasks than the lost ones"
    );
    assert_eq!(redone.len(), lost.len(), "{redone:?}");
    assert!(redone.iter().all(|(_, r)| *r == 0), "{redone:?}");

    let after = by_task(&records(&out));
    assert_eq!(after.len(), TASKS);
    for (id, recs) in &after {
        if lost.contains(id) {
            assert_eq!(recs.len(), 1, "{id}: {recs:?}");
            assert!(recs[0].round == 0 && recs[0].correct, "{id}: {recs:?}");
        } else {
            let json = |r: &[AttemptRecord]| serde_json::to_value(r).unwrap();
            assert_eq!(json(recs), json(&before[id]), "{id} changed on resume");
        }
    }
}

/// Checks the hostile run's records against what its server did; gives
/// back the tasks lost to the endpoint.
fn check_hostile_run(
    tasks: &[Task],
    log: &BTreeMap<(usize, u32), Vec<Served>>,
    records: &BTreeMap<String, Vec<AttemptRecord>>,
) -> BTreeSet<String> {
    // The mix was played in full over enough requests.
    let served: Vec<Fault> = log.values().flatten().map(|s| s.fault).collect();
    assert!(served.len() >= 200, "only {} requests", served.len());
    let mut counts: BTreeMap<Fault, usize> = BTreeMap::new();
    for fault in &served {
        *counts.entry(*fault).or_default() += 1;
    }
    let every = WEIGHTS.len() + 1;
    assert_eq!(
        counts.len(),
        every,
        "seed {SEED} does not play every fault: {counts:?}"
    );

    // Every round the server saw has its record and the reverse; each
    // ended as the faults it got say.
    let rounds: BTreeSet<(&str, u32)> = records
        .values()
        .flatten()
        .map(|r| (r.task_id.as_str(), r.round))
        .collect();
    let asked: BTreeSet<(&str, u32)> = log
        .keys()
        .map(|(t, r)| (tasks[*t].id.as_str(), *r))
        .collect();
    assert_eq!(rounds, asked);
    for ((t, round), sent) in log {
        let recs = &records[&tasks[*t].id];
        let rec = recs.iter().find(|r| r.round == *round).unwrap();
        let more = recs.iter().any(|r| r.round > *round);
        check_round(&tasks[*t].id, *round, sent, rec, more);
        if sent.last().unwrap().fault == Megabyte {
            assert!(
                rec.reply.as_ref().unwrap().len() > 1 << 20,
                "the 1 MB reply was cut"
            );
        }
    }

    // Every task ended with a right answer or on an infrastructure error.
    let mut lost = BTreeSet::new();
    for task in tasks {
        let last = records[&task.id].last().unwrap();
        match last.kind {
            RecordKind::InfraError => {
                lost.insert(task.id.clone());
            }
            RecordKind::Attempt => assert!(last.correct, "{}: {last:?}", task.id),
        }
    }
    let ended = |want: fn(&Expect) -> bool| {
        log.values()
            .filter(|s| want(&s.last().unwrap().fault.expect()))
            .count()
    };
    let exhausted = ended(|e| matches!(e, Expect::Retried { .. }));
    let invalid = ended(|e| *e == Expect::Invalid);
    let recovered = log
        .values()
        .filter(|s| {
            s.len() > 1 && s.last().unwrap().fault.expect() == Expect::Reply { correct: true }
        })
        .count();
    eprintln!(
        "{} requests {counts:?}; {} tasks lost ({exhausted} after their retries, {invalid} \
         invalid), {recovered} rounds answered after retries",
        served.len(),
        lost.len()
    );
    assert!(
        exhausted > 0 && invalid > 0 && recovered > 0,
        "seed {SEED}: {exhausted} exhausted, {invalid} invalid, {recovered} recovered"
    );
    assert_eq!(lost.len(), exhausted + invalid);
    lost
}
