//! From an execution back to the model: code extraction from replies,
//! traceback parsing, and the prompts that carry both.

pub mod extract;
pub mod feedback;
pub mod message;
pub mod prompt;
pub mod traceback;

pub use feedback::{FeedbackKind, FeedbackMode};
