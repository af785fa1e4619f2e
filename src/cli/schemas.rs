//! `docs/schemas/*.schema.json`: JSON Schemas (draft 2020-12) of the
//! files a run and `retrace compare` write, generated from the types that
//! serialize them, so they cannot drift: a unit test compares the files
//! with what this generates, and `tests/it/fast/schemas.rs` validates real
//! outputs against the files.
//!
//! The schemas describe what retrace writes (serde's serialize side): a
//! field skipped when empty is optional, every other field required. An
//! object accepts no property its type does not declare
//! (`unevaluatedProperties: false`), so a field serialized by hand beside
//! the types fails the validation test instead of going undocumented.

use retrace::record::{AttemptRecord, RunConfig};
use retrace::report::compare::Judged;
use retrace::report::Summary;
use std::collections::BTreeSet;

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{Map, Value};

/// Every schema: its file name under `docs/schemas/` and its text.
pub fn all() -> Vec<(&'static str, String)> {
    vec![
        ("run.schema.json", render::<RunConfig>()),
        ("record.schema.json", render::<AttemptRecord>()),
        ("summary.schema.json", render::<Summary>()),
        ("compare.schema.json", render::<Vec<Judged>>()),
    ]
}

fn render<T: JsonSchema>() -> String {
    let generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    let merged = merged_definitions(&schema);
    close(&mut schema, &merged, None);
    format!(
        "{}\n",
        serde_json::to_string_pretty(&schema).expect("a schema is JSON")
    )
}

/// Definitions referenced beside properties of the referring object (a
/// flattened struct, an internally tagged variant): the referring object
/// is closed instead, since a closed definition would refuse its
/// neighbours' properties.
fn merged_definitions(schema: &Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    walk(schema, &mut |object| {
        if !object.contains_key("properties") {
            return;
        }
        let all_of = object.get("allOf").and_then(Value::as_array);
        let refs = std::iter::once(object)
            .chain(all_of.into_iter().flatten().filter_map(Value::as_object));
        for r in refs.filter_map(|o| o.get("$ref")?.as_str()) {
            names.insert(r.trim_start_matches("#/$defs/").to_string());
        }
    });
    names
}

fn walk(value: &Value, f: &mut impl FnMut(&Map<String, Value>)) {
    match value {
        Value::Object(o) => {
            f(o);
            o.values().for_each(|v| walk(v, f));
        }
        Value::Array(a) => a.iter().for_each(|v| walk(v, f)),
        _ => {}
    }
}

/// Closes every object schema that lists its properties
/// (`unevaluatedProperties: false`) but the merged definitions themselves.
fn close(value: &mut Value, merged: &BTreeSet<String>, definition: Option<&str>) {
    match value {
        Value::Object(o) => {
            let open =
                !o.contains_key("additionalProperties") && !o.contains_key("unevaluatedProperties");
            if o.contains_key("properties")
                && open
                && !definition.is_some_and(|d| merged.contains(d))
            {
                o.insert("unevaluatedProperties".into(), Value::Bool(false));
            }
            for (key, v) in o.iter_mut() {
                if key == "$defs" {
                    for (name, d) in v.as_object_mut().into_iter().flatten() {
                        close(d, merged, Some(name));
                    }
                } else {
                    close(v, merged, None);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| close(v, merged, None)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The CI drift check: docs/schemas/ is what the types say.
    #[test]
    fn schemas_are_current() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas");
        let bless = std::env::var_os("RETRACE_BLESS").is_some_and(|v| v == "1");
        let mut stale = Vec::new();
        for (name, want) in super::all() {
            let path = dir.join(name);
            if bless {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &want).unwrap();
            } else if std::fs::read_to_string(&path).unwrap_or_default() != want {
                stale.push(name);
            }
        }
        assert!(
            stale.is_empty(),
            "docs/schemas/{{{}}} are not what the types give; regenerate them with \
             `RETRACE_BLESS=1 cargo test --bin retrace schemas_are_current` and commit them",
            stale.join(",")
        );
    }
}
