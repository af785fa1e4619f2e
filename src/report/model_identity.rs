//! Who a run's model is, as the formats of other tools name models:
//! Inspect's `provider/model` and Every Eval Ever's `developer/model` id,
//! with how it was deployed. One rule for every export.

use crate::model::spec::ModelSpec;

/// A model's names and deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelIdentity {
    /// The API or server it was reached through (`openai`, `llama-cpp`),
    /// or `retrace` for its synthetic stand-ins.
    pub provider: String,
    pub model: String,
    /// Every Eval Ever's `deployment_type`.
    pub deployment: &'static str,
    /// Every Eval Ever's `model_availability`.
    pub availability: &'static str,
    /// The inference engine that served it, when retrace ran it.
    pub engine: Option<&'static str>,
    /// A deterministic stand-in (oracle, replay), not a model.
    pub synthetic: bool,
}

impl ModelIdentity {
    pub fn of(spec: &ModelSpec) -> ModelIdentity {
        let (provider, model, deployment, availability, engine, synthetic) = match spec {
            ModelSpec::OpenAi(m) => (
                "openai",
                m.clone(),
                "externally_managed",
                "unknown",
                None,
                false,
            ),
            ModelSpec::Local(m) => (
                "llama-cpp",
                m.clone().unwrap_or_else(|| "local".into()),
                "self_deployed",
                "open_weights",
                Some("llama.cpp"),
                false,
            ),
            ModelSpec::Oracle(_) => (
                "retrace",
                spec.to_string().replace(':', "-"),
                "unknown",
                "unknown",
                None,
                true,
            ),
            ModelSpec::Replay(_) => ("retrace", "replay".into(), "unknown", "unknown", None, true),
        };
        ModelIdentity {
            provider: provider.into(),
            model,
            deployment,
            availability,
            engine,
            synthetic,
        }
    }

    /// Inspect's model name: `provider/model`.
    pub fn inspect_name(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }

    /// A `developer/model` id: a model named the Hugging Face way
    /// (`Qwen/Qwen2.5-7B-Instruct` served by any endpoint) keeps its
    /// name; any other is put under its provider.
    pub fn hub_id(&self) -> String {
        match self.model.split_once('/') {
            Some((dev, name)) if !dev.is_empty() && !name.is_empty() => self.model.clone(),
            _ => self.inspect_name(),
        }
    }

    /// The id's two parts, for a path `<developer>/<model>`.
    pub fn developer_and_name(&self) -> (String, String) {
        let id = self.hub_id();
        match id.split_once('/') {
            Some((d, n)) => (d.to_string(), n.to_string()),
            None => (self.provider.clone(), id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_model_kind_is_named_by_its_provider() {
        let of = |s: &str| ModelIdentity::of(&s.parse().unwrap());
        assert_eq!(
            of("openai:gpt-4o-mini").inspect_name(),
            "openai/gpt-4o-mini"
        );
        assert_eq!(of("openai:gpt-4o-mini").hub_id(), "openai/gpt-4o-mini");
        let hub = of("openai:Qwen/Qwen2.5-7B-Instruct");
        assert_eq!(hub.hub_id(), "Qwen/Qwen2.5-7B-Instruct");
        assert_eq!(
            hub.developer_and_name(),
            ("Qwen".into(), "Qwen2.5-7B-Instruct".into())
        );
        assert_eq!(of("local").inspect_name(), "llama-cpp/local");
        assert_eq!(of("local").deployment, "self_deployed");
        let oracle = of("oracle:faults");
        assert_eq!(oracle.inspect_name(), "retrace/oracle-faults");
        assert!(oracle.synthetic);
    }
}
