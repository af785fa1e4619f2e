//! The run as a library: its spec prepared ([`Run`]), the scheduler, one
//! task's rounds (an episode), the journal and resume, progress, and
//! reference validation. Records and the spec are defined in
//! `crate::record`.

mod answer;
mod arm;
mod episode;
mod error;
mod false_alarm;
pub mod journal;
pub mod math_checker;
pub mod packages;
mod prepare;
pub mod progress;
pub mod rescore;
mod round;
mod round0_source;
mod run;
mod run_dir;
pub mod runner;
mod schedule;
mod stop;
pub mod validate;

pub use arm::{Arm, ArmKernels};
pub use error::{HarnessError, UsageError};
pub use prepare::RunContext;
pub use rescore::{rescore_run, RescoreResult};
pub use run::{cancel_on_ctrl_c, write_reports, Run, RunResult};
pub use run_dir::{read_config, run_tasks};
pub use runner::Runner;
