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
    close(&mut schema, false, &merged);
    format!(
        "{}\n",
        serde_json::to_string_pretty(&schema).expect("a schema is JSON")
    )
}

/// Keywords whose subschemas apply to the same instance as their schema
/// (a flattened struct or enum, a tagged variant): their properties count
/// as the enclosing object's.
const IN_PLACE: [&str; 7] = ["allOf", "anyOf", "oneOf", "not", "if", "then", "else"];
/// Keywords whose subschemas apply to a member or an item.
const NESTED: [&str; 6] = [
    "items",
    "prefixItems",
    "additionalProperties",
    "contains",
    "propertyNames",
    "unevaluatedItems",
];

/// Calls `f(schema, placed)` on every schema in `value`: `placed` when an
/// enclosing schema applies to the same instance and lists properties
/// (that one is closed, and sees the properties its parts evaluated).
/// Definitions are visited with `placed` from `definition`.
fn visit(
    value: &mut Value,
    placed: bool,
    definition: &dyn Fn(&str) -> bool,
    f: &mut dyn FnMut(&mut Map<String, Value>, bool),
) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    f(object, placed);
    let here = placed || object.contains_key("properties");
    for (key, v) in object.iter_mut() {
        let (children, placed): (Vec<&mut Value>, bool) = match key.as_str() {
            k if IN_PLACE.contains(&k) => (one_or_many(v), here),
            k if NESTED.contains(&k) => (one_or_many(v), false),
            "properties" | "patternProperties" => (members(v), false),
            "$defs" => {
                for (name, d) in v.as_object_mut().into_iter().flatten() {
                    visit(d, definition(name), definition, f);
                }
                continue;
            }
            _ => continue,
        };
        for child in children {
            visit(child, placed, definition, f);
        }
    }
}

fn one_or_many(v: &mut Value) -> Vec<&mut Value> {
    match v {
        Value::Array(a) => a.iter_mut().collect(),
        v => vec![v],
    }
}

fn members(v: &mut Value) -> Vec<&mut Value> {
    v.as_object_mut()
        .into_iter()
        .flat_map(|m| m.values_mut())
        .collect()
}

/// Definitions referenced where an object's properties are listed in place
/// (beside `$ref`, or by an enclosing schema of the same instance), to
/// a fixed point: such a definition is left open, the referring object is
/// closed.
fn merged_definitions(schema: &Value) -> BTreeSet<String> {
    let mut merged = BTreeSet::new();
    loop {
        let mut found = merged.clone();
        let known = merged.clone();
        visit(
            &mut schema.clone(),
            false,
            &|d| known.contains(d),
            &mut |o, placed| {
                let placed = placed || o.contains_key("properties");
                if let Some(r) = o.get("$ref").and_then(Value::as_str).filter(|_| placed) {
                    found.insert(r.trim_start_matches("#/$defs/").to_string());
                }
            },
        );
        if found == merged {
            return merged;
        }
        merged = found;
    }
}

/// Closes (`unevaluatedProperties: false`) every object schema that lists
/// its properties and is not part of an enclosing one of the same instance.
fn close(schema: &mut Value, placed: bool, merged: &BTreeSet<String>) {
    visit(schema, placed, &|d| merged.contains(d), &mut |o, placed| {
        let open =
            !o.contains_key("additionalProperties") && !o.contains_key("unevaluatedProperties");
        if o.contains_key("properties") && open && !placed {
            o.insert("unevaluatedProperties".into(), Value::Bool(false));
        }
    });
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
