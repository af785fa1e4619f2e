//! retrace: a self-correction evaluation harness.
//!
//! The modules follow the data flow: tasks are turned into prompts, a model
//! writes code, a confined kernel runs it, tracebacks drive repair rounds and
//! the harness records and reports every round.

pub mod conformance;
pub mod doctor;
pub mod harness;
pub mod kernel;
pub mod model;
pub mod pyenv;
pub mod record;
pub mod repair;
pub mod report;
pub mod sandbox;
pub mod task;
pub mod util;
