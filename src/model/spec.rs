//! The `--model` value, parsed once into [`ModelSpec`]: what it names, the
//! defaults that follow from it, and the client it builds.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use super::local::{self, LocalModel};
use super::openai::{OpenAiClient, OpenAiSettings};
use super::oracle::{Oracle, OracleKind};
use super::replay::Replay;
use super::{Generation, ModelClient, ModelError};
use crate::task::load::TagQuota;
use crate::task::Task;

/// Where an `openai:` model lives (from `--base-url`, `--api-key` and the
/// vision flag; `None` falls back to `OPENAI_BASE_URL` / `OPENAI_API_KEY`),
/// and how a `local` one is served.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub vision: bool,
    pub serving: local::Serving,
}

pub const VALID_SPECS: &str =
    "openai:<model>, oracle, oracle:faults, oracle:flaky, oracle:wrong, replay:<path.jsonl>, local, local:<name>, local:<file.gguf>";

/// A model as `--model` names it. Written to `run.json` as that same
/// string, so a resumed run builds the same client.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(try_from = "String", into = "String")]
pub enum ModelSpec {
    /// `local[:<name>|<file.gguf>]`: the managed llama.cpp server.
    Local(Option<String>),
    /// `openai:<model>` on any OpenAI-compatible endpoint.
    OpenAi(String),
    /// `oracle`, `oracle:faults`, `oracle:wrong`: deterministic stand-ins.
    Oracle(OracleKind),
    /// `replay:<file>`: replies recorded earlier, by absolute path so the
    /// run resumes from any directory.
    Replay(PathBuf),
}

/// What a model kind changes in a run when the user does not say.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelDefaults {
    /// Tasks sampled when no selection is given.
    pub sample: Option<usize>,
    /// How many of those carry a tag.
    pub sample_tagged: Option<TagQuota>,
    /// Temperature of repair rounds.
    pub repair_temperature: Option<f32>,
    /// Timeout of one model request.
    pub request_timeout: Duration,
    /// Tasks in flight at once.
    pub concurrency: usize,
}

/// A `--model` value that names no model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelSpecError {
    #[error("`openai` needs a model name: openai:<model>")]
    NoModelName,
    #[error("`replay` needs a file: replay:<path.jsonl>")]
    NoReplayFile,
    #[error("unknown model `{0}`: use one of {VALID_SPECS}")]
    Unknown(String),
}

/// The request timeout of remote models.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Tasks in flight at once for remote and synthetic models.
pub const DEFAULT_CONCURRENCY: usize = 2;

impl FromStr for ModelSpec {
    type Err = ModelSpecError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let spec = spec.trim();
        let (kind, arg) = match spec.split_once(':') {
            Some((kind, arg)) => (kind, Some(arg)),
            None => (spec, None),
        };
        match (kind, arg) {
            ("openai", Some(model)) if !model.trim().is_empty() => {
                Ok(ModelSpec::OpenAi(model.trim().to_string()))
            }
            ("openai", _) => Err(ModelSpecError::NoModelName),
            ("oracle", None) => Ok(ModelSpec::Oracle(OracleKind::Reference)),
            ("oracle", Some("faults")) => Ok(ModelSpec::Oracle(OracleKind::Faults)),
            ("oracle", Some("wrong")) => Ok(ModelSpec::Oracle(OracleKind::Wrong)),
            ("oracle", Some("flaky")) => Ok(ModelSpec::Oracle(OracleKind::Flaky)),
            ("replay", Some(path)) if !path.trim().is_empty() => {
                let path = PathBuf::from(path.trim());
                Ok(ModelSpec::Replay(
                    std::path::absolute(&path).unwrap_or(path),
                ))
            }
            ("replay", _) => Err(ModelSpecError::NoReplayFile),
            ("local", arg) => Ok(ModelSpec::Local(
                arg.map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(String::from),
            )),
            _ => Err(ModelSpecError::Unknown(spec.to_string())),
        }
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSpec::Local(None) => write!(f, "local"),
            ModelSpec::Local(Some(arg)) => write!(f, "local:{arg}"),
            ModelSpec::OpenAi(model) => write!(f, "openai:{model}"),
            ModelSpec::Oracle(OracleKind::Reference) => write!(f, "oracle"),
            ModelSpec::Oracle(OracleKind::Faults) => write!(f, "oracle:faults"),
            ModelSpec::Oracle(OracleKind::Wrong) => write!(f, "oracle:wrong"),
            ModelSpec::Oracle(OracleKind::Flaky) => write!(f, "oracle:flaky"),
            ModelSpec::Replay(path) => write!(f, "replay:{}", path.display()),
        }
    }
}

impl TryFrom<String> for ModelSpec {
    type Error = ModelSpecError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<ModelSpec> for String {
    fn from(spec: ModelSpec) -> String {
        spec.to_string()
    }
}

impl ModelSpec {
    pub fn is_local(&self) -> bool {
        matches!(self, ModelSpec::Local(_))
    }

    /// The embedded model is small and slow on a CPU: its default run is a
    /// sample that finishes in minutes, its requests may take minutes, its
    /// repairs sample (greedy decoding makes it resend failing code), and
    /// as many tasks are in flight as its server (served as `serving`
    /// says) works on at once, at least 2 so that one task's execution
    /// overlaps another's request. Any explicit flag wins.
    pub fn defaults(&self, serving: &local::Serving) -> ModelDefaults {
        if self.is_local() {
            ModelDefaults {
                sample: Some(local::DEFAULT_SAMPLE),
                sample_tagged: Some(TagQuota {
                    tag: local::DEFAULT_SAMPLE_TAG.to_string(),
                    count: local::DEFAULT_SAMPLE_TAGGED,
                }),
                repair_temperature: Some(local::DEFAULT_REPAIR_TEMPERATURE),
                request_timeout: local::DEFAULT_REQUEST_TIMEOUT,
                concurrency: serving.parallel().max(local::DEFAULT_CONCURRENCY),
            }
        } else {
            ModelDefaults {
                sample: None,
                sample_tagged: None,
                repair_temperature: None,
                request_timeout: REQUEST_TIMEOUT,
                concurrency: DEFAULT_CONCURRENCY,
            }
        }
    }

    /// The client. The synthetic models (oracles, replay) are built from
    /// `tasks`, the tasks of the run: they recognise each task from its
    /// conversation, since requests carry no task id or reference. Async
    /// because `local` prepares the model on first use (with progress on
    /// stderr) and starts its server, which the returned client owns.
    pub async fn client(
        &self,
        generation: &Generation,
        endpoint: &Endpoint,
        tasks: &[Task],
    ) -> Result<Arc<dyn ModelClient>, ModelError> {
        Ok(match self {
            ModelSpec::OpenAi(model) => Arc::new(OpenAiClient::new(
                OpenAiSettings {
                    model: model.clone(),
                    base_url: endpoint.base_url.clone(),
                    api_key: endpoint.api_key.clone(),
                    vision: endpoint.vision,
                },
                generation.clone(),
            )?),
            ModelSpec::Oracle(kind) => Arc::new(Oracle::new(*kind, tasks)?),
            ModelSpec::Replay(path) => Arc::new(Replay::load(path, tasks)?),
            ModelSpec::Local(arg) => {
                // Unknown names and unusable files fail here, before
                // anything is prepared or started.
                let choice = local::resolve(arg.as_deref())?;
                Arc::new(
                    LocalModel::start(choice, generation.clone(), &endpoint.serving, true).await?,
                )
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(spec: &str) -> Result<Arc<dyn ModelClient>, ModelError> {
        let endpoint = Endpoint {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            api_key: Some("test".into()),
            vision: true,
            ..Endpoint::default()
        };
        let spec: ModelSpec = spec.parse().expect("a valid spec");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(spec.client(&Generation::default(), &endpoint, &[]))
    }

    #[test]
    fn parses_the_valid_forms_and_writes_them_back() {
        let m = client("openai:gpt-4o-mini").unwrap();
        assert_eq!(m.name(), "openai:gpt-4o-mini");
        assert!(!m.is_synthetic());
        assert!(m.vision());
        // Model names may contain colons (e.g. ollama tags).
        assert_eq!(
            client("openai:qwen2.5:7b").unwrap().name(),
            "openai:qwen2.5:7b"
        );
        assert_eq!(client("oracle").unwrap().name(), "oracle");
        assert_eq!(client(" oracle:faults ").unwrap().name(), "oracle:faults");
        assert_eq!(client("oracle:wrong").unwrap().name(), "oracle:wrong");
        assert!(client("oracle").unwrap().is_synthetic());
        for text in [
            "local",
            "local:smollm2-135m-instruct",
            "openai:qwen2.5:7b",
            "oracle:wrong",
        ] {
            let spec: ModelSpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), text);
            let json = serde_json::to_string(&spec).unwrap();
            assert_eq!(serde_json::from_str::<ModelSpec>(&json).unwrap(), spec);
        }

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.jsonl");
        std::fs::write(&file, "{\"task_id\":\"t\",\"round\":0,\"reply\":\"x\"}\n").unwrap();
        let m = client(&format!("replay:{}", file.display())).unwrap();
        assert_eq!(m.name(), "replay:r.jsonl");
    }

    #[test]
    fn a_relative_replay_file_is_recorded_by_its_absolute_path() {
        let spec: ModelSpec = "replay:some/replies.jsonl".parse().unwrap();
        let ModelSpec::Replay(path) = &spec else {
            panic!("{spec:?}")
        };
        assert!(path.is_absolute(), "{}", path.display());
        assert!(path.ends_with("some/replies.jsonl"));
    }

    #[test]
    fn rejects_the_rest() {
        let err = |s: &str| s.parse::<ModelSpec>().unwrap_err().to_string();
        assert!(err("openai").contains("openai:<model>"));
        assert!(err("openai:").contains("openai:<model>"));
        assert!(err("replay:").contains("replay:<path"));
        let m = err("gpt-4");
        assert!(m.contains("gpt-4") && m.contains(VALID_SPECS), "{m}");
        assert!(err("oracle:typo").contains(VALID_SPECS));
        assert!(serde_json::from_str::<ModelSpec>("\"gpt-4\"").is_err());
        // A valid `local` prepares and serves the real model: that is
        // tests/local_model.rs. Unknown names and missing files fail
        // before anything starts.
        let local = |s: &str| match client(s) {
            Err(ModelError::Config(m)) => m,
            Err(other) => panic!("{s}: {other:?}"),
            Ok(m) => panic!("{s}: built {}", m.name()),
        };
        assert!(local("local:smollm2").contains("smollm2-135m-instruct"));
        match client("replay:/nonexistent/x.jsonl") {
            Err(e) => assert!(e.to_string().contains("/nonexistent/x.jsonl"), "{e}"),
            Ok(_) => panic!("a missing replay file built a client"),
        }
    }

    #[test]
    fn local_models_have_their_own_defaults() {
        let local: ModelSpec = "local".parse().unwrap();
        assert_eq!(
            local.defaults(&local::Serving::default()).sample,
            Some(local::DEFAULT_SAMPLE)
        );
        assert_eq!(
            local.defaults(&local::Serving::default()).request_timeout,
            local::DEFAULT_REQUEST_TIMEOUT
        );
        let remote: ModelSpec = "openai:m".parse().unwrap();
        assert_eq!(remote.defaults(&local::Serving::default()).sample, None);
        assert_eq!(
            remote
                .defaults(&local::Serving::default())
                .repair_temperature,
            None
        );
        assert_eq!(
            remote.defaults(&local::Serving::default()).request_timeout,
            REQUEST_TIMEOUT
        );
    }
}
