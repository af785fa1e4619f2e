//! What every chart is: a name, a title and a drawing on any plotters
//! backend; and the records each arm of a run gives a chart.

use plotters::prelude::*;

use super::theme::{Area, Drawn};
use crate::record::AttemptRecord;

/// A chart ready to draw on any plotters backend.
pub(super) trait Chart {
    /// File stem.
    fn name(&self) -> &'static str;
    /// Caption and alt text.
    fn title(&self) -> String;
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Drawn<DB>;
}

/// The records of `arm` (all of them when the run has one arm).
fn of_arm<'a>(
    records: &'a [AttemptRecord],
    arm: Option<&'a str>,
) -> impl Iterator<Item = &'a AttemptRecord> + 'a {
    records
        .iter()
        .filter(move |r| arm.is_none_or(|a| r.arm_name() == a))
}

/// Each arm with its records: one unnamed group for a one-arm run.
pub(super) fn arm_groups<'a>(
    arms: &'a [String],
    records: &'a [AttemptRecord],
) -> Vec<(Option<&'a str>, Vec<&'a AttemptRecord>)> {
    if arms.is_empty() {
        vec![(None, records.iter().collect())]
    } else {
        arms.iter()
            .map(|a| (Some(a.as_str()), of_arm(records, Some(a)).collect()))
            .collect()
    }
}
