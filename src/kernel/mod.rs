//! Real ipykernel processes spoken to over the Jupyter wire protocol.
//!
//! [`Kernel`] is one session (execute, interrupt, restart, shutdown), one
//! state machine over a backend: a local kernel's own process and jail
//! ([`LocalBackend`]) or a gateway's kernel ([`gateway`]). [`Executor`]
//! starts either as an [`AnyKernel`]; [`Outcome`] is what one execution
//! produced.

mod artifact;
mod backend;
mod capture;
mod cell_watch;
mod claim;
mod client;
mod code_size;
pub mod env;
mod error;
mod execution;
mod executor;
#[cfg(test)]
mod fake_jail;
pub mod gateway;
pub mod host_evidence;
mod inbox;
pub mod launcher;
mod layout;
mod local;
mod lock_watch;
mod main_thread;
mod options;
mod outcome;
mod probe;
mod process;
#[cfg(test)]
mod props;
mod recent;
mod requests;
mod session;
mod spec;
mod start;
mod state;
mod text;
mod wire_cap;
mod wire_tap;
mod zmq_message;
mod zmtp;
pub mod zygote;

pub use artifact::is_image as is_image_artifact;
pub use backend::LocalBackend;
pub use capture::OutputCap;
pub use code_size::{refusal as code_refusal, CodeTooLarge, MAX_CODE_BYTES};
pub use env::{EnvError, KernelEnv};
pub use error::KernelError;
pub use executor::{Executor, ExecutorInfo};
pub use options::{ExecOptions, KernelBanner, KernelOptions, KernelStart};
pub use outcome::{
    Answer, AnswerRule, Artifact, Bundle, Enforcement, ErrorInfo, ExecStatus, Outcome, Timings,
    Truncation, Unsupported,
};
pub use session::{AnyKernel, Kernel};
pub use spec::{default_kernel_root, KernelSpec};
pub use state::{names_in_line, CloseMatch, StateQuery, StateView, VariableView};
pub use zygote::StartPath;
