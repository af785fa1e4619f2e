//! The bound on one cell's code, checked where code enters a kernel
//! session (`Kernel::execute`, so a run, `retrace exec` and `retrace
//! sandbox check` refuse alike) before anything is sent. Code past it is
//! not run: the outcome's verdict is `code_too_large`, a refusal like
//! `policy_denied`, not a kill. Without the bound, a cell of more than
//! 4 MiB came back as `output_limit` with nothing printed: the kernel's
//! echo of the code (IOPub `execute_input`) is past the message cap. The
//! bound keeps that echo under the cap; the echo is never counted as the
//! cell's output in any case (see `wire_cap::Oversize::is_output`).

use serde::{Deserialize, Serialize};

use super::outcome::{ExecStatus, Outcome};
use crate::sandbox::Verdict;

/// The largest cell, in bytes of UTF-8: 1 MiB. Far beyond any code a model
/// writes (a long generated cell is tens of KiB), and its echo fits the
/// smallest message cap (4 MiB) unless most of it is control characters,
/// each a 6-byte JSON escape.
pub const MAX_CODE_BYTES: u64 = 1 << 20;

/// Code that was refused for its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CodeTooLarge {
    /// Bytes of the code (UTF-8).
    pub bytes: u64,
    /// The bound it passed.
    pub limit: u64,
}

impl CodeTooLarge {
    /// `Some` when `code` is larger than [`MAX_CODE_BYTES`].
    pub fn of(code: &str) -> Option<CodeTooLarge> {
        let bytes = code.len() as u64;
        (bytes > MAX_CODE_BYTES).then_some(CodeTooLarge {
            bytes,
            limit: MAX_CODE_BYTES,
        })
    }

    /// What the model is told.
    pub fn message(&self) -> String {
        format!(
            "Your code is {} bytes, {} bytes over the limit of {} bytes for one cell, \
             and was not run. Send shorter code: compute data instead of writing it out, \
             and read large inputs from the files in the working directory.",
            self.bytes,
            self.bytes.saturating_sub(self.limit),
            self.limit
        )
    }

    /// The outcome of the refused cell: nothing ran, the kernel and its
    /// state are untouched.
    pub fn outcome(self) -> Outcome {
        let mut outcome = Outcome::blank(ExecStatus::Error, Verdict::CodeTooLarge);
        outcome.fired = vec![Verdict::CodeTooLarge];
        outcome.code_too_large = Some(self);
        outcome
    }
}

/// The outcome of `code` when it is refused for its size; `None` when it
/// may run. The one rule every path that sends code to a kernel applies.
pub fn refusal(code: &str) -> Option<Outcome> {
    CodeTooLarge::of(code).map(CodeTooLarge::outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_at_the_bound_runs_and_one_byte_over_is_refused() {
        let at = "#".repeat(MAX_CODE_BYTES as usize);
        assert_eq!(CodeTooLarge::of(&at), None);
        assert!(refusal(&at).is_none());
        let over = format!("{at}\n");
        let refused = refusal(&over).expect("refused");
        assert_eq!(refused.verdict, Verdict::CodeTooLarge);
        assert_eq!(refused.fired, [Verdict::CodeTooLarge]);
        assert_eq!(refused.status, ExecStatus::Error);
        assert_eq!(
            refused.code_too_large,
            Some(CodeTooLarge {
                bytes: MAX_CODE_BYTES + 1,
                limit: MAX_CODE_BYTES
            })
        );
        assert!(refused.stdout.is_empty() && refused.answer.is_none());
    }

    #[test]
    fn the_bound_counts_bytes_not_characters() {
        // 2^19 + 1 two-byte characters: fewer characters than the bound,
        // more bytes.
        let code = "é".repeat((MAX_CODE_BYTES / 2 + 1) as usize);
        assert_eq!(
            CodeTooLarge::of(&code).map(|c| c.bytes),
            Some(MAX_CODE_BYTES + 2)
        );
    }

    #[test]
    fn the_message_names_the_size_the_excess_and_the_limit() {
        let c = CodeTooLarge {
            bytes: (4 << 20) + 1,
            limit: 1 << 20,
        };
        let m = c.message();
        assert!(m.contains("4194305 bytes"), "{m}");
        assert!(
            m.contains("3145729 bytes over the limit of 1048576 bytes"),
            "{m}"
        );
        assert!(m.contains("not run"), "{m}");
    }
}
