//! `--env KEY=VALUE`, shared by the commands that start kernels (`run`,
//! `exec`, `launch`).

use clap::Args;
use retrace::kernel::{EnvError, KernelEnv};

use super::Failure;

#[derive(Args, Clone, Debug, Default)]
pub struct EnvArgs {
    /// Give every kernel the variable KEY (repeatable). Kernels get only
    /// these besides retrace's own settings, never retrace's environment.
    /// Names the loader, the interpreter, Jupyter, the gateway or retrace
    /// read (LD_*, PYTHON*, PATH, HOME, JPY_*, KERNEL_*, …) are refused. A
    /// value whose name says it is secret (KEY, TOKEN, SECRET, PASSWORD,
    /// …) is redacted in everything written; with --resume, give the
    /// run's variables again.
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = env_pair)]
    pub env: Vec<(String, String)>,
}

impl EnvArgs {
    /// The variables, checked together (a name given twice, the size).
    pub fn env(&self) -> Result<KernelEnv, Failure> {
        self.with(Vec::new())
    }

    /// These variables and `more` (from elsewhere), checked together.
    pub fn with(&self, more: Vec<(String, String)>) -> Result<KernelEnv, Failure> {
        let env = KernelEnv::from_pairs(self.env.iter().cloned().chain(more))
            .map_err(|e| Failure::usage(anyhow::anyhow!("--env: {e}")))?;
        env.register_secrets();
        Ok(env)
    }
}

fn env_pair(text: &str) -> Result<(String, String), EnvError> {
    KernelEnv::parse_pair(text)
}
