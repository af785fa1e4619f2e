//! Diagnostic logging (`tracing`) on stderr: the kill ladder, kernel starts
//! and restarts, image builds and pip steps, model retries. stdout stays for
//! results, which some commands print for machines (`--json`).

use anyhow::Context;

use tracing_subscriber::EnvFilter;

/// The variable that chooses what is logged, in `EnvFilter` syntax
/// (`RETRACE_LOG=debug`, `RETRACE_LOG=retrace=debug,reqwest=info`).
pub const LOG_ENV: &str = "RETRACE_LOG";

/// What is logged: `RETRACE_LOG` when set, else `-v` (info) or `-vv`
/// (debug) for retrace itself, else warnings and errors only.
fn filter(verbose: u8, env: Option<&str>) -> anyhow::Result<EnvFilter> {
    if let Some(directives) = env.map(str::trim).filter(|d| !d.is_empty()) {
        return EnvFilter::try_new(directives).with_context(|| format!("{LOG_ENV}=`{directives}`"));
    }
    // zeromq warns of every reconnect while a kernel is still binding its
    // sockets: expected during each start, noise to a user; async-openai
    // warns of every 5xx, which retrace retries and reports itself (a
    // starting llama-server answers 503 while it loads).
    Ok(EnvFilter::new(match verbose {
        0 => "warn,zeromq=error,async_openai=error",
        1 => "warn,zeromq=error,async_openai=error,retrace=info",
        _ => "warn,zeromq=error,async_openai=error,retrace=debug",
    }))
}

/// Installs the stderr subscriber; an invalid `RETRACE_LOG` is reported and
/// the `-v` level used instead.
pub fn init(verbose: u8) {
    let env = std::env::var(LOG_ENV).ok();
    let filter = filter(verbose, env.as_deref()).unwrap_or_else(|e| {
        eprintln!("warning: ignoring {e:#}");
        filter(verbose, None).expect("built-in filters parse")
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Log lines quote errors and ids from outside (datasets, replies,
        // kernels): their controls are shown, never acted on, and no
        // colour (an ESC sequence) is written.
        .with_writer(|| retrace::util::terminal::Writer::new(std::io::stderr()))
        .with_ansi(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_wins_and_verbosity_sets_retrace_level() {
        assert_eq!(
            filter(0, None).unwrap().to_string(),
            "async_openai=error,zeromq=error,warn"
        );
        assert_eq!(
            filter(1, None).unwrap().to_string(),
            "async_openai=error,retrace=info,zeromq=error,warn"
        );
        assert_eq!(
            filter(2, Some("  ")).unwrap().to_string(),
            "async_openai=error,retrace=debug,zeromq=error,warn"
        );
        assert_eq!(
            filter(2, Some("retrace=trace")).unwrap().to_string(),
            "retrace=trace"
        );
        assert!(filter(0, Some("retrace=loud")).is_err());
    }
}
