//! From an execution back to the model: code extraction from replies,
//! traceback parsing, what a cell's figures and tables show, the prompts
//! that carry them, and the check of repairs that hide the error.

pub mod execution;
pub mod extract;
pub mod false_alarm;
pub mod feedback;
pub mod masking;
pub mod message;
pub mod output_note;
pub mod prompt;
pub mod traceback;

pub use execution::ExecutionMode;
pub use feedback::{FeedbackKind, FeedbackMode};
pub use masking::{MaskCheck, MaskError, MaskFlag, RepairPair, Unchecked, UncheckedReason};
