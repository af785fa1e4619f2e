//! Small helpers shared by several stages.

pub mod atomic_write;
pub mod bounded;
pub mod builtin;
pub mod disk;
pub mod fault;
pub mod file_name;
pub mod fitted_lines;
pub mod heap;
pub mod home;
pub mod input_file;
pub mod io_error;
pub mod names;
pub mod nofollow;
pub mod proc;
#[cfg(test)]
pub(crate) mod props;
pub mod redact;
pub mod rng;
pub mod secs;
pub mod stats;
pub mod terminal;
pub mod units;
pub use io_error::{IoContext, IoError};
