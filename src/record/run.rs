//! `run.json`: the run's spec and its provenance, written when the run
//! starts (and again when it ends, should the model's server have
//! restarted) and read back by `--resume`, `report` and `compare`.
//! Schema 3; `run.json` files of schema 2 (one flat object) still load.
//! Every arm's protocol fingerprint is in `provenance.fingerprints`:
//! recorded when a run is first written, computed from the config when
//! an older `run.json` lacks it.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::fingerprint::Fingerprint;
use super::legacy::{RunConfigV2, UnknownStrategies};
use super::provenance::Provenance;
use super::spec::RunSpec;

/// Version of the record and summary formats.
pub const SCHEMA_VERSION: u32 = 2;

/// Version of `run.json`: 3 is the spec plus provenance.
pub const RUN_SCHEMA_VERSION: u32 = 3;

/// Serialized with every arm's fingerprint (those not recorded yet are
/// computed), so a new run's `run.json` records its protocol.
#[derive(Debug, Clone, PartialEq, schemars::JsonSchema)]
pub struct RunConfig {
    pub schema_version: u32,
    pub spec: RunSpec,
    pub provenance: Provenance,
}

/// A `run.json` that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum RunConfigError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("schema {found} is newer than this retrace reads ({RUN_SCHEMA_VERSION}); use a newer retrace")]
    Newer { found: u64 },
    #[error(transparent)]
    Strategies(#[from] UnknownStrategies),
}

impl RunConfig {
    /// The run's arms by name, the baseline first.
    pub fn arm_names(&self) -> Vec<String> {
        self.spec.arms().into_iter().map(|a| a.name).collect()
    }

    /// The model of arm `arm` as reports name it: the run's model as it
    /// turned out (`provenance.model`) when the arm uses the run's model
    /// spec, else the arm's spec.
    pub fn model_of(&self, arm: &str) -> String {
        let spec = self.spec.arms().into_iter().find(|a| a.name == arm);
        match spec {
            Some(a) if a.spec.model.spec != self.spec.model.spec => a.spec.model.spec.to_string(),
            _ => self.provenance.model.clone(),
        }
    }

    /// The protocol fingerprint of arm `arm`: as recorded, else computed
    /// from the config. `None` when the run has no such arm.
    pub fn fingerprint(&self, arm: &str) -> Option<Fingerprint> {
        if let Some(f) = self.provenance.fingerprints.get(arm) {
            return Some(f.clone());
        }
        let spec = self.spec.arms().into_iter().find(|a| a.name == arm)?;
        Some(Fingerprint::of(&spec, &self.provenance))
    }

    /// The provenance with a fingerprint for every arm (the recorded ones kept).
    fn fingerprinted(&self) -> Cow<'_, Provenance> {
        let names = self.arm_names();
        let recorded = &self.provenance.fingerprints;
        if names.iter().all(|n| recorded.contains_key(n)) {
            return Cow::Borrowed(&self.provenance);
        }
        let mut provenance = self.provenance.clone();
        for name in names {
            if let Some(f) = self.fingerprint(&name) {
                provenance.fingerprints.entry(name).or_insert(f);
            }
        }
        Cow::Owned(provenance)
    }

    /// Reads `run.json` of schema 3, or of schema 2 (converted).
    pub fn from_json(text: &str) -> Result<RunConfig, RunConfigError> {
        RunConfig::from_value(serde_json::from_str(text)?)
    }

    fn from_value(value: serde_json::Value) -> Result<RunConfig, RunConfigError> {
        let schema = value
            .get("schema_version")
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        if schema > RUN_SCHEMA_VERSION as u64 {
            return Err(RunConfigError::Newer { found: schema });
        }
        if schema < RUN_SCHEMA_VERSION as u64 {
            let (spec, provenance) = serde_json::from_value::<RunConfigV2>(value)?.upgrade()?;
            return Ok(RunConfig {
                schema_version: RUN_SCHEMA_VERSION,
                spec,
                provenance,
            }
            .with_fingerprints());
        }
        #[derive(Deserialize)]
        struct V3 {
            spec: RunSpec,
            provenance: Provenance,
        }
        let v3: V3 = serde_json::from_value(value)?;
        Ok(RunConfig {
            schema_version: RUN_SCHEMA_VERSION,
            spec: v3.spec,
            provenance: v3.provenance,
        }
        .with_fingerprints())
    }

    fn with_fingerprints(mut self) -> RunConfig {
        if let Cow::Owned(p) = self.fingerprinted() {
            self.provenance = p;
        }
        self
    }
}

impl Serialize for RunConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            schema_version: u32,
            spec: &'a RunSpec,
            provenance: Cow<'a, Provenance>,
        }
        Written {
            schema_version: self.schema_version,
            spec: &self.spec,
            provenance: self.fingerprinted(),
        }
        .serialize(s)
    }
}

/// Any schema `from_json` reads, so `serde_json::from_str::<RunConfig>`
/// works on old runs too.
impl<'de> Deserialize<'de> for RunConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        RunConfig::from_value(value).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;
    use crate::pyenv::Strategy;
    use crate::record::{ExecutorSpec, StopOn};
    use crate::sandbox::SandboxLimits;

    /// A run.json of schema 2, as retrace wrote it before the spec.
    pub(crate) fn schema_2() -> serde_json::Value {
        json!({
            "schema_version": 2,
            "run_id": "t", "retrace_version": "0", "created": "now", "out_dir": "x",
            "suite": "s", "selection": {"limit_tasks": 3, "sample": null, "seed": 7},
            "task_ids": ["a"], "rounds": 2, "stop_on": "never", "concurrency": 4,
            "model": "replay:r.jsonl", "model_spec": "replay:/abs/r.jsonl",
            "synthetic_model": true,
            "generation": {"temperature": 0.0, "max_tokens": 1, "request_timeout": 1.0, "max_retries": 0},
            "strategy": "fat,dynamic", "image_lock_hash": "h", "limits": SandboxLimits::default(),
            "sandbox": {"confined": false, "mode": "test", "notes": []}, "feedback_budget": 100,
            "skip_invalid": true,
            "skipped": [{"id": null, "file": "data/test.jsonl", "line": 3, "reason": "bad"}]
        })
    }

    #[test]
    fn a_schema_2_run_json_loads_as_spec_and_provenance() {
        let config: RunConfig = serde_json::from_value(schema_2()).unwrap();
        let spec = &config.spec;
        assert_eq!(config.schema_version, RUN_SCHEMA_VERSION);
        assert_eq!(spec.tasks.selection.limit_tasks, Some(3));
        assert!(spec.tasks.skip_invalid);
        assert_eq!(
            (spec.policy.rounds, spec.policy.stop_on),
            (2, StopOn::Never)
        );
        assert_eq!(spec.model.spec.to_string(), "replay:/abs/r.jsonl");
        assert_eq!(spec.packages.strategies, [Strategy::Fat, Strategy::Dynamic]);
        assert!(
            spec.execution.unconfined,
            "an unconfined run resumes unconfined"
        );
        assert_eq!(spec.execution.concurrency, 4);
        assert_eq!(spec.execution.executor, ExecutorSpec::Local);
        assert_eq!(config.provenance.model, "replay:r.jsonl");
        assert_eq!(config.provenance.skipped.len(), 1);
        assert_eq!(config.arm_names(), ["fat", "dynamic"]);
    }

    #[test]
    fn schema_3_round_trips_and_a_newer_schema_is_refused() {
        let config: RunConfig = serde_json::from_value(schema_2()).unwrap();
        let text = serde_json::to_string(&config).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["schema_version"], 3);
        assert!(value["spec"]["policy"].is_object() && value["provenance"]["run_id"] == "t");
        assert_eq!(RunConfig::from_json(&text).unwrap(), config);

        let mut newer = value;
        newer["schema_version"] = 4.into();
        let err = RunConfig::from_json(&newer.to_string()).unwrap_err();
        assert!(err.to_string().contains("newer retrace"), "{err}");
    }

    #[test]
    fn fingerprints_are_computed_when_absent_and_kept_when_recorded() {
        let config: RunConfig = serde_json::from_value(schema_2()).unwrap();
        let prints = &config.provenance.fingerprints;
        assert_eq!(prints.keys().collect::<Vec<_>>(), ["dynamic", "fat"]);
        assert_eq!(prints["fat"].image.strategy, "fat");
        assert_eq!(prints["fat"].policy.feedback_budget, 100);
        assert_eq!(config.fingerprint("fat").as_ref(), Some(&prints["fat"]));
        assert!(config.fingerprint("slim").is_none());

        // A recorded fingerprint wins over the config (a later retrace may
        // compute another): it is what the run was made with.
        let mut value = serde_json::to_value(&config).unwrap();
        assert_eq!(
            value["provenance"]["fingerprints"]["fat"]["checker"]["version"],
            crate::task::check::CHECKER_VERSION
        );
        value["provenance"]["fingerprints"]["fat"]["checker"]["version"] = 0.into();
        let read = RunConfig::from_json(&value.to_string()).unwrap();
        assert_eq!(read.fingerprint("fat").unwrap().checker.version, 0);

        // A config built without fingerprints is written with them.
        let mut bare = config.clone();
        bare.provenance.fingerprints.clear();
        let written = serde_json::to_value(&bare).unwrap();
        assert!(written["provenance"]["fingerprints"]["dynamic"].is_object());
    }

    #[test]
    fn each_arm_is_the_spec_with_its_strategy() {
        let config: RunConfig = serde_json::from_value(schema_2()).unwrap();
        let arms = config.spec.arms();
        assert_eq!(arms.len(), 2);
        for (arm, strategy) in arms.iter().zip([Strategy::Fat, Strategy::Dynamic]) {
            assert_eq!(arm.name, strategy.to_string());
            assert_eq!(arm.spec.strategy(), strategy);
            let mut same = arm.spec.clone();
            same.packages.strategies = config.spec.packages.strategies.clone();
            assert_eq!(same, config.spec, "only the strategy differs");
        }
    }
}
