//! The protocol fingerprint of one arm: every setting that shapes its
//! results, in typed sections, each value under a stable dotted name
//! (`limits.memory`, `prompts.hash`, `model.file_hash`, …), so that
//! two runs can say exactly how their protocols differ. `run.json` records
//! one per arm when the run is created.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::provenance::Provenance;
use super::spec::ArmSpec;
use crate::model::spec::ModelSpec;
use crate::sandbox::SandboxLimits;
use crate::task::check::CHECKER_VERSION;

/// What shapes an arm's results. Its dotted names are the serde names of
/// its sections and their fields ([`Fingerprint::fields`]). Every section
/// reads with defaults, so a fingerprint recorded before a field existed
/// still loads (the field then shows as differing from a newer run's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Fingerprint {
    pub limits: LimitsPrint,
    pub sandbox: SandboxPrint,
    pub image: ImagePrint,
    pub prompts: PromptsPrint,
    pub checker: CheckerPrint,
    pub model: ModelPrint,
    pub seeds: SeedsPrint,
    pub generation: GenerationPrint,
    pub policy: PolicyPrint,
    /// The kernels' variables (`--env`), each under `env.NAME`; a secret
    /// one as a hash of its value (`KernelEnv::print`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

/// Every sandbox limit ([`SandboxLimits`]), under short names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct LimitsPrint {
    /// Bytes of memory of all the kernel's processes.
    pub memory: u64,
    pub pids: u64,
    pub cpus: f64,
    /// Wall time per execution.
    #[serde(with = "crate::util::secs")]
    #[schemars(with = "f64")]
    pub timeout: Duration,
    #[serde(with = "crate::util::secs")]
    #[schemars(with = "f64")]
    pub cpu_time: Duration,
    /// Output bytes and messages per execution.
    pub output_bytes: u64,
    pub output_messages: u64,
    /// Bytes of each private tmpfs.
    pub disk: u64,
}

impl From<SandboxLimits> for LimitsPrint {
    fn from(l: SandboxLimits) -> LimitsPrint {
        // Destructured, so a new limit does not compile until it is here.
        let SandboxLimits {
            memory_bytes,
            pids,
            cpus,
            timeout,
            cpu_time,
            output_cap_bytes,
            output_cap_messages,
            disk_bytes,
        } = l;
        LimitsPrint {
            memory: memory_bytes,
            pids,
            cpus,
            timeout,
            cpu_time,
            output_bytes: output_cap_bytes,
            output_messages: output_cap_messages,
            disk: disk_bytes,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct SandboxPrint {
    /// `false` for `--unsafe-no-sandbox`: nothing is killed for its limits.
    pub confined: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ImagePrint {
    /// The package strategy (`fat`, `dynamic`, `slim`).
    pub strategy: String,
    /// The hash of the image's lock file: the exact packages.
    pub lock_hash: String,
    /// What triggers installs (matters for `dynamic` only).
    pub install_on: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct PromptsPrint {
    /// sha256 over every template's name and text as used.
    pub hash: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct CheckerPrint {
    /// [`CHECKER_VERSION`] of the retrace that made the run.
    pub version: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ModelPrint {
    /// The model as its client names itself (`local:<name>`, `openai:<model>`, …).
    pub name: String,
    /// sha256 of the weights file, when the model is a local file.
    pub file_hash: Option<String>,
    /// The model id sent to an OpenAI-compatible endpoint.
    pub endpoint_id: Option<String>,
    /// Failing rounds' plots are sent as images.
    pub vision: bool,
    /// sha256 of the draft model's weights, when a local model was served
    /// with one (speculative decoding keeps greedy replies but can change
    /// sampled ones).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft_hash: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct SeedsPrint {
    /// The seed of the task selection (sampling a suite).
    pub selection: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct GenerationPrint {
    pub temperature: f64,
    /// `None`: repair rounds sample at `temperature`.
    pub repair_temperature: Option<f64>,
    pub max_tokens: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct PolicyPrint {
    /// Rounds are 0..=rounds.
    pub rounds: u32,
    /// The stop rule (`clean`, `never`, `correct`).
    pub stop_on: String,
    /// The feedback mode (`parsed`, `parsed+state`, `raw`, …).
    pub feedback: String,
    /// Characters of feedback per repair message.
    pub feedback_budget: usize,
    /// What follows a round that did not stop the task (`repair`,
    /// `resample`).
    pub after_failure: String,
    /// `--max-task-tokens`.
    pub max_task_tokens: Option<u64>,
    /// `--round0-from`: the recorded run and arm (`RUN_ID:ARM`) round 0
    /// came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round0_from: Option<String>,
    /// The execution mode (`replay`, `fresh`); absent for `live`, so the
    /// fingerprints of runs before modes read the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
}

/// A field whose value differs between two fingerprints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Difference {
    /// The dotted name, e.g. `limits.memory`.
    pub name: String,
    pub left: String,
    pub right: String,
}

impl Fingerprint {
    /// The fingerprint of `arm` of the run `provenance` describes.
    pub fn of(arm: &ArmSpec, provenance: &Provenance) -> Fingerprint {
        let spec = &arm.spec;
        let strategy = spec.strategy().to_string();
        let lock_hash = provenance
            .images
            .get(&strategy)
            .map_or(&provenance.image_lock_hash, |i| &i.lock_hash);
        let generation = &spec.model.generation;
        Fingerprint {
            limits: spec.execution.limits.into(),
            sandbox: SandboxPrint {
                confined: !spec.execution.unconfined,
            },
            image: ImagePrint {
                strategy,
                lock_hash: lock_hash.clone(),
                install_on: name_of(&spec.packages.install_on),
            },
            prompts: PromptsPrint {
                hash: provenance.prompts_hash.clone(),
            },
            checker: CheckerPrint {
                version: CHECKER_VERSION,
            },
            model: ModelPrint {
                name: provenance.model.clone(),
                file_hash: provenance
                    .model_info
                    .get("gguf_sha256")
                    .and_then(|v| v.as_str())
                    .map(str::to_owned),
                endpoint_id: match &spec.model.spec {
                    ModelSpec::OpenAi(model) => Some(model.clone()),
                    _ => None,
                },
                vision: spec.model.vision,
                draft_hash: provenance.model_info["draft"]
                    .get("gguf_sha256")
                    .and_then(|v| v.as_str())
                    .map(str::to_owned),
            },
            seeds: SeedsPrint {
                selection: spec.tasks.selection.seed,
            },
            generation: GenerationPrint {
                temperature: decimal(generation.temperature),
                repair_temperature: generation.repair_temperature.map(decimal),
                max_tokens: generation.max_tokens,
            },
            policy: PolicyPrint {
                rounds: spec.policy.rounds,
                stop_on: spec.policy.stop_on.name().to_string(),
                feedback: name_of(&spec.policy.feedback),
                feedback_budget: spec.policy.feedback_budget,
                after_failure: spec.policy.after_failure.name().to_string(),
                max_task_tokens: spec.policy.max_task_tokens,
                round0_from: provenance.round0_source.as_ref().map(|s| s.label()),
                execution: (!spec.policy.execution.is_live())
                    .then(|| spec.policy.execution.name().to_string()),
            },
            env: spec.env.print(),
        }
    }

    /// Every field as (dotted name, value as text), sorted by name.
    pub fn fields(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        flatten(
            "",
            &serde_json::to_value(self).unwrap_or_default(),
            &mut out,
        );
        out.sort();
        out
    }

    /// Every dotted name a fingerprint has.
    pub fn names() -> Vec<String> {
        Fingerprint::default()
            .fields()
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }

    /// The fields whose values differ, as (name, this one's, `other`'s);
    /// a field only one side has (an `env` variable) is `none` on the other.
    pub fn differences(&self, other: &Fingerprint) -> Vec<Difference> {
        let left: BTreeMap<String, String> = self.fields().into_iter().collect();
        let right: BTreeMap<String, String> = other.fields().into_iter().collect();
        let names: std::collections::BTreeSet<&String> = left.keys().chain(right.keys()).collect();
        let none = || "none".to_string();
        names
            .into_iter()
            .filter_map(|name| {
                let l = left.get(name).cloned().unwrap_or_else(none);
                let r = right.get(name).cloned().unwrap_or_else(none);
                (l != r).then(|| Difference {
                    name: name.clone(),
                    left: l,
                    right: r,
                })
            })
            .collect()
    }
}

/// Whether the dotted `name` is `pattern` or lies under it (`model`
/// covers `model.name`; `mod` covers nothing).
pub fn covers(pattern: &str, name: &str) -> bool {
    name == pattern
        || name
            .strip_prefix(pattern)
            .is_some_and(|rest| rest.starts_with('.'))
}

fn flatten(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                let name = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&name, v, out);
            }
        }
        serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
        serde_json::Value::Null => out.push((prefix.to_string(), "none".into())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// A unit enum's serde name (`parsed+state`, `both`).
fn name_of<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// An f32 setting as the decimal the user typed (0.7, not 0.699999988).
fn decimal(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::KernelEnv;
    use crate::record::RunConfig;

    /// A one-arm run of schema 2 (the shortest run.json to write).
    fn base() -> RunConfig {
        serde_json::from_value(serde_json::json!({
            "schema_version": 2,
            "run_id": "t", "retrace_version": "0", "created": "now", "out_dir": "x",
            "suite": "s", "selection": {"limit_tasks": null, "sample": null, "seed": 0},
            "task_ids": ["a"], "rounds": 1, "stop_on": "clean", "concurrency": 1,
            "model": "m", "synthetic_model": false,
            "generation": {"temperature": 0.0, "max_tokens": 1, "request_timeout": 1.0, "max_retries": 0},
            "strategy": "fat", "image_lock_hash": "h", "limits": SandboxLimits::default(),
            "sandbox": {"confined": true, "mode": "test", "notes": []}, "feedback_budget": 100
        }))
        .unwrap()
    }

    #[test]
    fn names_are_stable_and_dotted() {
        let names = Fingerprint::names();
        for want in [
            "limits.memory",
            "limits.timeout",
            "limits.output_bytes",
            "sandbox.confined",
            "image.lock_hash",
            "prompts.hash",
            "checker.version",
            "model.name",
            "model.file_hash",
            "model.endpoint_id",
            "seeds.selection",
            "generation.temperature",
            "generation.max_tokens",
            "policy.stop_on",
            "policy.feedback",
            "policy.feedback_budget",
            "policy.after_failure",
            "policy.max_task_tokens",
            "policy.rounds",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
        }
        assert!(covers("model", "model.name") && covers("model.name", "model.name"));
        assert!(!covers("mod", "model.name") && !covers("model.name", "model"));
    }

    #[test]
    fn a_changed_setting_is_one_named_difference() {
        let cfg = base();
        let arm = &cfg.spec.arms()[0];
        let left = Fingerprint::of(arm, &cfg.provenance);
        assert_eq!(left.checker.version, CHECKER_VERSION);
        assert_eq!(left.image.lock_hash, "h");
        assert!(left.differences(&left).is_empty());

        let mut other = arm.clone();
        other.spec.execution.limits.memory_bytes = 1 << 30;
        other.spec.model.generation.temperature = 0.7;
        let right = Fingerprint::of(&other, &cfg.provenance);
        let diffs = left.differences(&right);
        let names: Vec<&str> = diffs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["generation.temperature", "limits.memory"]);
        assert_eq!(
            (diffs[0].left.as_str(), diffs[0].right.as_str()),
            ("0.0", "0.7")
        );
        assert_eq!(diffs[1].right, (1u64 << 30).to_string());
    }

    #[test]
    fn an_execution_mode_is_a_field_only_when_not_live() {
        let cfg = base();
        let arm = &cfg.spec.arms()[0];
        let live = Fingerprint::of(arm, &cfg.provenance);
        let json = serde_json::to_value(&live).unwrap();
        assert!(json["policy"].get("execution").is_none(), "{json}");
        let mut other = arm.clone();
        other.spec.policy.execution = crate::repair::ExecutionMode::Fresh;
        let fresh = Fingerprint::of(&other, &cfg.provenance);
        let diffs = live.differences(&fresh);
        let names: Vec<&str> = diffs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["policy.execution"]);
        assert_eq!(diffs[0].right, "fresh");
    }

    #[test]
    fn kernel_variables_are_fields_and_a_secret_one_is_never_in_clear() {
        let cfg = base();
        let arm = &cfg.spec.arms()[0];
        let left = Fingerprint::of(arm, &cfg.provenance);
        let mut other = arm.clone();
        other.spec.env = KernelEnv::from_pairs([
            ("TZ".into(), "UTC".into()),
            ("HF_TOKEN".into(), "hf_abcdef123456".into()),
        ])
        .unwrap();
        let right = Fingerprint::of(&other, &cfg.provenance);
        let diffs = left.differences(&right);
        let names: Vec<&str> = diffs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["env.HF_TOKEN", "env.TZ"]);
        assert_eq!(
            (diffs[1].left.as_str(), diffs[1].right.as_str()),
            ("none", "UTC")
        );
        let written = serde_json::to_string(&right).unwrap();
        assert!(!written.contains("hf_abcdef123456"), "{written}");
        assert!(serde_json::to_value(&left).unwrap().get("env").is_none());
    }

    #[test]
    fn a_recorded_fingerprint_missing_a_field_still_loads() {
        let cfg = base();
        let f = Fingerprint::of(&cfg.spec.arms()[0], &cfg.provenance);
        let mut value = serde_json::to_value(&f).unwrap();
        value["model"].as_object_mut().unwrap().remove("vision");
        value.as_object_mut().unwrap().remove("seeds");
        let read: Fingerprint = serde_json::from_value(value).unwrap();
        assert_eq!(read.model.name, f.model.name);
        assert_eq!(read.limits, f.limits);
        assert_eq!(read.limits.timeout.as_secs(), 10);
    }

    #[test]
    fn the_model_file_hash_and_endpoint_id_come_from_the_run() {
        let mut cfg = base();
        cfg.provenance.model_info = serde_json::json!({"gguf_sha256": "abc"});
        cfg.spec.model.spec = ModelSpec::OpenAi("gpt-x".into());
        let f = Fingerprint::of(&cfg.spec.arms()[0], &cfg.provenance);
        assert_eq!(f.model.file_hash.as_deref(), Some("abc"));
        assert_eq!(f.model.draft_hash, None);
        cfg.provenance.model_info["draft"] = serde_json::json!({"gguf_sha256": "def"});
        let drafted = Fingerprint::of(&cfg.spec.arms()[0], &cfg.provenance);
        assert_eq!(drafted.model.draft_hash.as_deref(), Some("def"));
        assert!(drafted
            .fields()
            .contains(&("model.draft_hash".into(), "def".into())));
        assert_eq!(f.model.endpoint_id.as_deref(), Some("gpt-x"));
        let fields = f.fields();
        assert!(fields.contains(&("model.endpoint_id".into(), "gpt-x".into())));
        let none = Fingerprint::of(&base().spec.arms()[0], &base().provenance);
        assert!(none
            .fields()
            .contains(&("model.file_hash".into(), "none".into())));
    }
}
