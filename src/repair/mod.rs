//! From an execution back to the model: code extraction from replies,
//! traceback parsing, the prompts that carry both, and the check of
//! repairs that hide the error.

pub mod extract;
pub mod feedback;
pub mod masking;
pub mod message;
pub mod prompt;
pub mod traceback;

pub use feedback::{FeedbackKind, FeedbackMode};
pub use masking::{MaskCheck, MaskError, MaskFlag, RepairPair, Unchecked, UncheckedReason};
