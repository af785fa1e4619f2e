//! Whether the two sides ran the same protocol: the fingerprint fields
//! that differ, and which of them were declared. Two arms of one run
//! differ by construction in what their arms vary; otherwise only the
//! fields the user names with `--vary` are declared.

use super::pairing::Side;
use crate::record::{covers, Difference, Fingerprint};

/// The fields the user intends to differ (`--vary`): dotted names or
/// their prefixes (`model` covers `model.name` and `model.file_hash`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vary(Vec<String>);

/// A `--vary` entry that names no fingerprint field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--vary `{entry}` names no fingerprint field (fields: {})", fields.join(", "))]
pub struct UnknownField {
    pub entry: String,
    pub fields: Vec<String>,
}

impl Vary {
    /// Each entry must be a field's name or a prefix of some (a typo would
    /// otherwise declare nothing and pass unnoticed).
    pub fn parse(entries: &[String]) -> Result<Vary, UnknownField> {
        let fields = Fingerprint::names();
        let mut declared = Vec::new();
        for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            if !fields.iter().any(|f| covers(entry, f)) {
                return Err(UnknownField {
                    entry: entry.to_string(),
                    fields,
                });
            }
            declared.push(entry.to_string());
        }
        Ok(Vary(declared))
    }

    pub fn declares(&self, name: &str) -> bool {
        self.0.iter().any(|v| covers(v, name))
    }
}

/// The fingerprint fields that differ between the sides, and those of them
/// nobody declared (all of them unless the sides are arms of one run).
pub(super) fn differences(base: &Side, new: &Side) -> (Vec<Difference>, Vec<Difference>) {
    // pair_arms only pairs arms the runs have, so both are found.
    let print = |s: &Side| s.config.fingerprint(&s.strategy).unwrap_or_default();
    let all = print(base).differences(&print(new));
    let one_run = base.config.provenance.run_id == new.config.provenance.run_id;
    let undeclared = if one_run { Vec::new() } else { all.clone() };
    (all, undeclared)
}
