//! Every Eval Ever itself, for tests of the EEE records retrace exports:
//! `validate_eee` checks a directory's records against the schemas the
//! every-eval-ever package ships (with jsonschema) and with the package's
//! own validator. The package runs from a venv installed from
//! `tests/tools/eee.lock` on first use (`common::venv`); the script is
//! `tests/tools/validate_eee.py`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use super::inspect::{run_clean, venv_command};
use super::venv::{Install, PinnedVenv};

/// The every-eval-ever release pinned in `tests/tools/eee.lock`.
pub const EEE_VERSION: &str = "0.3.0";
const LOCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tools/eee.lock");
const VALIDATOR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tools/validate_eee.py");

/// The every-eval-ever venv, installed on first use.
pub fn eee_venv() -> PathBuf {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        PinnedVenv {
            name: "eee",
            package: "every-eval-ever",
            version: EEE_VERSION,
            install: Install::Lock {
                path: LOCK,
                // It declares Python 3.12; what the tests use of it runs on
                // 3.11 (the lock's header says how it was resolved).
                pip_args: &["--ignore-requires-python"],
            },
            probe: "import jsonschema, importlib.metadata as m\n\
                    from every_eval_ever.schema import schema_json\n\
                    from every_eval_ever.validator import validation_core\n\
                    assert schema_json('instance_level_eval.schema.json')['version']\n\
                    print(m.version('every-eval-ever'))",
            after: |_| Vec::new(),
        }
        .ensure()
    })
    .clone()
}

/// Every error in the EEE records under `dir`, one line each:
/// `<file>[:<line>]: <json path>: <message> [<checker>]`. Every `*.json` is
/// an aggregate record checked against `eval.schema.json`, every line of
/// every `*.jsonl` an instance record checked against
/// `instance_level_eval.schema.json` (both as every-eval-ever ships them,
/// with jsonschema's validator for their draft); each file also goes
/// through every-eval-ever's own validator (strict JSON, its pydantic
/// models), and an instance record must name an aggregate record of `dir`
/// (`[cross-file]`). Empty when all is valid; a directory without records
/// is an error. Panics when the validator itself fails.
pub fn validate_eee(dir: &Path) -> Vec<String> {
    let mut cmd = venv_command(&eee_venv(), "python", dir);
    cmd.arg(VALIDATOR).arg(dir);
    let out = run_clean(cmd, &format!("the EEE validator on {}", dir.display()));
    let errors: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the EEE validator's output is not a JSON list ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    errors
        .iter()
        .map(|e| {
            let at = match e["line"].as_u64() {
                Some(line) => format!("{}:{line}", text(&e["file"])),
                None => text(&e["file"]),
            };
            format!(
                "{at}: {}: {} [{}]",
                text(&e["path"]),
                text(&e["message"]),
                text(&e["checker"])
            )
        })
        .collect()
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string)
}
