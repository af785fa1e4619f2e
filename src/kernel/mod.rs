//! Real ipykernel processes spoken to over the Jupyter wire protocol.
//!
//! [`Kernel`] is one session (execute, interrupt, restart, shutdown);
//! [`Executor`] starts kernels locally or on a Jupyter gateway
//! ([`gateway`]), each an [`AnyKernel`];
//! [`KernelPool`] keeps kernels of one image warm; [`Outcome`] is what one
//! execution produced.

mod artifact;
mod capture;
mod client;
mod execution;
mod executor;
pub mod gateway;
mod launch;
mod outcome;
mod pool;
mod requests;
mod session;
mod state;
mod wire_cap;
pub mod zygote;

pub use capture::OutputCap;
pub use executor::{AnyKernel, Executor, ExecutorInfo};
pub use launch::{default_kernel_root, KernelSpec};
pub use outcome::{
    Answer, AnswerRule, Artifact, Bundle, Enforcement, ErrorInfo, ExecStatus, Outcome, Timings,
    Truncation, Unsupported,
};
pub use pool::KernelPool;
pub use session::{ExecOptions, Kernel, KernelBanner, KernelOptions};
pub use state::{names_in_line, CloseMatch, StateQuery, StateView, VariableView};
pub use zygote::{KernelStart, StartPath};

use crate::sandbox::SandboxError;

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("kernel did not start: {message}\n--- kernel output (last lines) ---\n{stderr}")]
    Startup { message: String, stderr: String },
    #[error("kernel launch: {0}")]
    Launch(String),
    #[error("jupyter protocol: {0}")]
    Protocol(String),
    /// The gateway refused, timed out or went away (after the retries).
    #[error("gateway: {0}")]
    Gateway(String),
    #[error("state inspection took longer than {0:?}; the kernel was interrupted")]
    StateTimeout(std::time::Duration),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Image(#[from] crate::pyenv::PyenvError),
    #[error(transparent)]
    Io(#[from] crate::util::IoError),
}

impl KernelError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        KernelError::Io(crate::util::IoError::new(context, source))
    }
}
