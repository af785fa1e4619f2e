//! `sandbox check --benign`: legitimate public notebooks
//! (`datasets/benign/`) run confined and unconfined; every cell that
//! succeeds unconfined must succeed confined with the same output, after
//! [`normalise`] has replaced what differs between any two runs. A
//! notebook with a cell that differs is a failing case, named with the
//! cell and an excerpt of both sides; cells that fail unconfined too are
//! reported, not failed. Results use the hostile check's report, table,
//! JSON and JUnit.

mod cell;
mod normalise;
mod notebook;
mod run;

use serde::Serialize;

pub use cell::{compare, CellReport, CellRun, CellStatus, Surface};
pub use normalise::{normalise, KernelPaths};
pub use notebook::{Dropped, Notebook, Source};
pub use run::run;

/// How many cells compared how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CellCounts {
    pub cells: usize,
    pub same: usize,
    pub varies: usize,
    pub fails_unconfined: usize,
    pub differs: usize,
}

impl CellCounts {
    pub fn of(cells: &[CellReport]) -> CellCounts {
        let n = |s| cells.iter().filter(|c| c.status == s).count();
        CellCounts {
            cells: cells.len(),
            same: n(CellStatus::Same),
            varies: n(CellStatus::Varies),
            fails_unconfined: n(CellStatus::FailsUnconfined),
            differs: n(CellStatus::Differs),
        }
    }

    pub fn add(&mut self, other: &CellCounts) {
        self.cells += other.cells;
        self.same += other.same;
        self.varies += other.varies;
        self.fails_unconfined += other.fails_unconfined;
        self.differs += other.differs;
    }
}

/// A notebook's cells as compared, carried by its case result.
#[derive(Debug, Clone, Serialize)]
pub struct NotebookCells {
    pub source: Source,
    pub counts: CellCounts,
    /// Whether a second unconfined run was made to tell variance from
    /// confinement (some cell's text differed).
    pub second_run: bool,
    pub cells: Vec<CellReport>,
}
