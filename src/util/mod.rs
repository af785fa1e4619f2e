//! Small helpers shared by several stages.

pub mod io_error;
pub mod nofollow;
pub mod proc;
pub mod stats;
pub mod units;
pub use io_error::IoError;
