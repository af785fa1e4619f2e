//! Parsing `--model` strings into clients.

use std::sync::Arc;

use super::local::{self, LocalModel};
use super::openai::{OpenAiClient, OpenAiSettings};
use super::oracle::{Oracle, OracleKind};
use super::replay::Replay;
use super::{Generation, ModelClient, ModelError};
use crate::task::Task;

/// Where an `openai:` model lives (from `--base-url`, `--api-key` and the
/// vision flag); `None` falls back to `OPENAI_BASE_URL` / `OPENAI_API_KEY`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub vision: bool,
}

pub const VALID_SPECS: &str =
    "openai:<model>, oracle, oracle:faults, oracle:wrong, replay:<path.jsonl>, local, local:<name>, local:<file.gguf>";

/// `openai:<model>` | `oracle` | `oracle:faults` | `oracle:wrong` |
/// `replay:<path>` | `local[:smollm2-135m-instruct]`. The synthetic models
/// (oracles, replay) are built from `tasks`, the tasks of the run: they
/// recognise each task from its conversation, since requests carry no task
/// id or reference. Async because `local` prepares the model on first use
/// (with progress on stderr) and starts its server, which the returned
/// client owns.
pub async fn from_spec(
    spec: &str,
    generation: &Generation,
    endpoint: &Endpoint,
    tasks: &[Task],
) -> Result<Arc<dyn ModelClient>, ModelError> {
    let spec = spec.trim();
    let (kind, arg) = match spec.split_once(':') {
        Some((kind, arg)) => (kind, Some(arg)),
        None => (spec, None),
    };
    match (kind, arg) {
        ("openai", Some(model)) if !model.trim().is_empty() => {
            let client = OpenAiClient::new(
                OpenAiSettings {
                    model: model.trim().to_string(),
                    base_url: endpoint.base_url.clone(),
                    api_key: endpoint.api_key.clone(),
                    vision: endpoint.vision,
                },
                generation.clone(),
            )?;
            Ok(Arc::new(client))
        }
        ("openai", _) => Err(ModelError::Config(
            "`openai` needs a model name: openai:<model>".into(),
        )),
        ("oracle", None) => Ok(Arc::new(Oracle::new(OracleKind::Reference, tasks)?)),
        ("oracle", Some("faults")) => Ok(Arc::new(Oracle::new(OracleKind::Faults, tasks)?)),
        ("oracle", Some("wrong")) => Ok(Arc::new(Oracle::new(OracleKind::Wrong, tasks)?)),
        ("replay", Some(path)) if !path.trim().is_empty() => {
            Ok(Arc::new(Replay::load(path, tasks)?))
        }
        ("replay", _) => Err(ModelError::Config(
            "`replay` needs a file: replay:<path.jsonl>".into(),
        )),
        ("local", arg) => {
            // Unknown names and unusable files fail here, before anything
            // is prepared or started.
            let choice = local::resolve(arg)?;
            Ok(Arc::new(
                LocalModel::start(choice, generation.clone(), true).await?,
            ))
        }
        _ => Err(ModelError::Config(format!(
            "unknown model `{spec}`: use one of {VALID_SPECS}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: &str) -> Result<Arc<dyn ModelClient>, ModelError> {
        let endpoint = Endpoint {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            api_key: Some("test".into()),
            vision: true,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(from_spec(spec, &Generation::default(), &endpoint, &[]))
    }

    fn config_error(spec: &str) -> String {
        match parse(spec) {
            Err(ModelError::Config(m)) => m,
            Err(other) => panic!("{spec}: {other:?}"),
            Ok(m) => panic!("{spec}: parsed as {}", m.name()),
        }
    }

    #[test]
    fn parses_the_valid_forms() {
        let m = parse("openai:gpt-4o-mini").unwrap();
        assert_eq!(m.name(), "openai:gpt-4o-mini");
        assert!(!m.is_synthetic());
        assert!(m.vision());
        // Model names may contain colons (e.g. ollama tags).
        assert_eq!(
            parse("openai:qwen2.5:7b").unwrap().name(),
            "openai:qwen2.5:7b"
        );
        assert_eq!(parse("oracle").unwrap().name(), "oracle");
        assert_eq!(parse(" oracle:faults ").unwrap().name(), "oracle:faults");
        assert_eq!(parse("oracle:wrong").unwrap().name(), "oracle:wrong");
        assert!(parse("oracle").unwrap().is_synthetic());

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.jsonl");
        std::fs::write(&file, "{\"task_id\":\"t\",\"round\":0,\"reply\":\"x\"}\n").unwrap();
        let m = parse(&format!("replay:{}", file.display())).unwrap();
        assert_eq!(m.name(), "replay:r.jsonl");
    }

    #[test]
    fn rejects_the_rest() {
        // A valid `local` prepares and serves the real model: that is
        // tests/local_model.rs. Unknown names fail before anything starts.
        let m = config_error("local:smollm2");
        assert!(m.contains("smollm2-135m-instruct"), "{m}");
        assert!(config_error("openai").contains("openai:<model>"));
        assert!(config_error("openai:").contains("openai:<model>"));
        assert!(config_error("replay:").contains("replay:<path"));
        assert!(config_error("replay:/nonexistent/x.jsonl").contains("/nonexistent/x.jsonl"));
        let m = config_error("gpt-4");
        assert!(m.contains("gpt-4") && m.contains(VALID_SPECS), "{m}");
        assert!(config_error("oracle:typo").contains(VALID_SPECS));
    }
}
