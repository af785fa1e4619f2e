//! Small helpers shared by several stages.

pub mod proc;
pub mod units;
