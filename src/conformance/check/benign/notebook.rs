//! One notebook of the benign corpus (`datasets/benign/*.toml`): a public
//! notebook or script, its code cells as published (some dropped, each
//! with its reason), and where it came from.
//!
//! ```toml
//! id = "pdsh_02_01_data_types"
//! description = "numpy arrays and Python types"
//! [source]
//! repository = "jakevdp/PythonDataScienceHandbook"
//! path = "notebooks/02.01-Understanding-Data-Types.ipynb"
//! commit = "d66231454ef753818dc9213c9b5942e067266966"
//! licence = "MIT (code)"
//! dropped = [{ cell = 3, why = "needs the network" }]
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::conformance::corpus::{CaseError, Entry};

/// A notebook: its cells run in order in one kernel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notebook {
    pub id: String,
    pub description: String,
    pub source: Source,
    pub cells: Vec<String>,
    /// Cells whose text legitimately differs from run to run in a way a
    /// second run may not show (a dict in hash order), by index in
    /// `cells`: only the kinds of their outputs are compared.
    pub varies: Vec<Dropped>,
    /// The file it was read from.
    pub file: PathBuf,
}

/// Where a notebook's cells come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// `owner/name` of a public repository.
    pub repository: String,
    pub path: String,
    /// The commit the cells were read at (40 hex digits).
    pub commit: String,
    pub licence: String,
    /// Code cells of the source left out, by their index among its code
    /// cells.
    #[serde(default)]
    pub dropped: Vec<Dropped>,
}

/// A cell, by index, and why it is listed: a code cell of the source left
/// out of the corpus, or a cell of the corpus whose text varies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dropped {
    pub cell: usize,
    pub why: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNotebook {
    id: String,
    description: String,
    source: Source,
    cells: Vec<String>,
    #[serde(default)]
    varies: Vec<Dropped>,
}

impl Notebook {
    /// Substring match on the id or the source repository.
    pub fn matches(&self, pattern: &str) -> bool {
        self.id.contains(pattern) || self.source.repository.contains(pattern)
    }
}

impl Entry for Notebook {
    fn parse(text: &str, source: &Path) -> Result<Notebook, CaseError> {
        let bad = |key: Option<&'static str>, message: String| CaseError {
            file: source.to_path_buf(),
            key,
            message,
        };
        let raw: RawNotebook = toml::from_str(text).map_err(|e| bad(None, e.to_string()))?;
        if raw.cells.is_empty() {
            return Err(bad(Some("cells"), "cells: a notebook needs a cell".into()));
        }
        let commit = &raw.source.commit;
        if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(
                Some("source.commit"),
                format!("source.commit: {commit:?} is not a 40-digit commit"),
            ));
        }
        if let Some(v) = raw.varies.iter().find(|v| v.cell >= raw.cells.len()) {
            return Err(bad(
                Some("varies"),
                format!("varies: cell {} is past the last cell", v.cell),
            ));
        }
        Ok(Notebook {
            varies: raw.varies,
            id: raw.id,
            description: raw.description,
            source: raw.source,
            cells: raw.cells,
            file: source.to_path_buf(),
        })
    }

    fn id(&self) -> &str {
        &self.id
    }

    fn source(&self) -> &Path {
        &self.file
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
id = "nb"
description = "d"
cells = ["import numpy as np", "np.arange(3)"]
[source]
repository = "o/r"
path = "a.ipynb"
commit = "d66231454ef753818dc9213c9b5942e067266966"
licence = "MIT"
dropped = [{ cell = 2, why = "needs the network" }]
"#;

    #[test]
    fn parses_a_notebook_and_rejects_a_bad_commit() {
        let nb = Notebook::parse(GOOD, Path::new("nb.toml")).unwrap();
        assert_eq!(nb.cells.len(), 2);
        assert_eq!(nb.source.dropped[0].cell, 2);
        let bad = GOOD.replace("d66231454ef753818dc9213c9b5942e067266966", "main");
        let err = Notebook::parse(&bad, Path::new("nb.toml")).unwrap_err();
        assert_eq!(err.key, Some("source.commit"));
        let empty = GOOD.replace(
            r#"cells = ["import numpy as np", "np.arange(3)"]"#,
            "cells = []",
        );
        assert!(Notebook::parse(&empty, Path::new("nb.toml")).is_err());
    }
}
