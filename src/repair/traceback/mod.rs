//! Traceback parsing and the compact error feedback a model sees.
//!
//! [`parse`] reads IPython's traceback into a [`Traceback`], [`render`]
//! turns it into the few lines a model is shown, [`kill_message`] says why
//! the harness ended an execution, and the budget helpers ([`keep_tail`],
//! [`head_tail`], [`cut_middle`]) keep every part of the feedback within
//! its characters. Harness paths are scrubbed everywhere ([`scrub_paths`]).

mod kill;
mod parse;
#[cfg(test)]
mod props;
mod render;
mod scrub;
mod text;

use serde::{Deserialize, Serialize};

pub use kill::{kill_message, STATE_LOST};
pub use parse::parse;
pub use render::render;
pub use scrub::scrub_paths;
pub(crate) use text::fit_keep_tail;
pub use text::{cut_middle, head_tail, keep_tail};

/// A parsed Python exception.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traceback {
    pub exc_type: String,
    /// The exception message (for syntax errors without IPython's
    /// `(file.py, line N)` suffix). Empty when the exception had none.
    pub message: String,
    /// Frames of the final exception, outermost first.
    pub frames: Vec<Frame>,
    /// Where a SyntaxError (or IndentationError, TabError) points.
    pub syntax: Option<SyntaxPos>,
    /// Earlier exceptions of the chain, oldest first.
    pub chain: Vec<Chained>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// `cell` for the submitted code, `In[N]` for a cell run earlier in the
    /// same kernel, otherwise the scrubbed file (e.g.
    /// `<site-packages>/pandas/core/frame.py`, `<stdlib>/json/decoder.py`,
    /// `<string>`).
    pub location: String,
    /// The frame is in the submitted code.
    pub in_cell: bool,
    /// For cell frames the line in the submitted code; for other frames the
    /// line in their own file.
    pub line: Option<usize>,
    /// Function name without its arguments; `None` at the top level of a cell.
    pub function: Option<String>,
    /// The failing source line, trimmed (for cell frames taken from the
    /// submitted code).
    pub source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyntaxPos {
    /// Line in the submitted code when `location` is `cell`.
    pub line: usize,
    /// 1-based column of the caret within `text`.
    pub offset: Option<usize>,
    /// The offending line as Python showed it (leading whitespace removed).
    pub text: String,
    /// The caret line aligned under `text` (e.g. `"      ^"`).
    pub caret: Option<String>,
    /// `cell`, or where else the source was (`<string>` for `eval`).
    pub location: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// "The above exception was the direct cause of the following exception"
    /// (`raise … from …`).
    Cause,
    /// "During handling of the above exception, another exception occurred".
    Context,
}

/// An earlier exception of a chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chained {
    pub exc_type: String,
    pub message: String,
    /// How this exception relates to the next one in the chain.
    pub relation: Relation,
}

impl Traceback {
    /// The line of the submitted code where it failed: the syntax error's
    /// line, else the last frame in the submitted code.
    pub fn cell_line(&self) -> Option<usize> {
        if let Some(s) = self.syntax.as_ref().filter(|s| s.location == "cell") {
            return Some(s.line);
        }
        self.last_cell_frame().and_then(|f| f.line)
    }

    pub fn last_cell_frame(&self) -> Option<&Frame> {
        self.frames.iter().rev().find(|f| f.in_cell)
    }

    pub fn is_syntax_error(&self) -> bool {
        self.syntax.is_some()
    }
}
