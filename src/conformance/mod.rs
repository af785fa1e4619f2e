//! Conformance of the sandbox: the hostile-code corpus (`datasets/hostile`)
//! and `retrace sandbox check`, which runs every case in a real confined
//! kernel and compares the verdict with the case's expectation; and the
//! benign corpus (`datasets/benign`), legitimate notebooks that must run
//! confined as they do unconfined (`check::benign`). It sits
//! above `kernel` and `sandbox` (it drives both) and below the CLI.

mod case_file;
#[cfg(test)]
mod case_props;
pub mod check;
pub mod corpus;
mod expectation;
mod rss;

pub use expectation::Expectation;
