//! Diagnostic logging (`tracing`) on stderr: the kill ladder, kernel starts
//! and restarts, image builds and pip steps, model retries. stdout stays for
//! results, which some commands print for machines (`--json`).

use std::io::Write;

use anyhow::Context;
use retrace::util::redact;

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
    // starting llama-server answers 503 while it loads), and logs a whole
    // reply it cannot parse as an error, which retrace reports itself as a
    // bounded excerpt.
    Ok(EnvFilter::new(match verbose {
        0 => "warn,zeromq=error,async_openai=off",
        1 => "warn,zeromq=error,async_openai=off,retrace=info",
        _ => "warn,zeromq=error,async_openai=off,retrace=debug",
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
        // Log lines quote endpoints' errors, ids and replies: the
        // configured secrets go (from the whole event, before it is cut),
        // controls are shown as escapes, never acted on, and no colour (an
        // ESC sequence) is written.
        .with_writer(|| {
            redact::Writer(retrace::util::terminal::Writer::new(Bounded(
                std::io::stderr(),
            )))
        })
        .with_ansi(false)
        .try_init();
}

/// The most bytes of one log event shown on stderr: a library may log a
/// whole reply body (a `RETRACE_LOG` that lets async-openai speak).
const MAX_EVENT_BYTES: usize = 16 << 10;

/// A writer that cuts each event (one write per event) to
/// [`MAX_EVENT_BYTES`], saying how much it left out.
struct Bounded<W>(W);

impl<W: Write> Write for Bounded<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() <= MAX_EVENT_BYTES {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut cut = MAX_EVENT_BYTES;
        // Back to the start of a UTF-8 character.
        while cut > 0 && buf[cut] & 0xc0 == 0x80 {
            cut -= 1;
        }
        self.0.write_all(&buf[..cut])?;
        writeln!(
            self.0,
            "… [{} more bytes of this log line not shown]",
            buf.len() - cut
        )?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_wins_and_verbosity_sets_retrace_level() {
        assert_eq!(
            filter(0, None).unwrap().to_string(),
            "async_openai=off,zeromq=error,warn"
        );
        assert_eq!(
            filter(1, None).unwrap().to_string(),
            "async_openai=off,retrace=info,zeromq=error,warn"
        );
        assert_eq!(
            filter(2, Some("  ")).unwrap().to_string(),
            "async_openai=off,retrace=debug,zeromq=error,warn"
        );
        assert_eq!(
            filter(2, Some("retrace=trace")).unwrap().to_string(),
            "retrace=trace"
        );
        assert!(filter(0, Some("retrace=loud")).is_err());
    }

    #[test]
    fn a_huge_event_is_cut_on_a_character_boundary() {
        let mut out = Vec::new();
        let line = format!("{}é tail\n", "x".repeat(MAX_EVENT_BYTES - 1));
        let mut w = Bounded(&mut out);
        assert_eq!(w.write(line.as_bytes()).unwrap(), line.len());
        let shown = String::from_utf8(out).expect("still UTF-8");
        assert!(shown.len() < MAX_EVENT_BYTES + 100, "{}", shown.len());
        assert!(shown.ends_with("more bytes of this log line not shown]\n"));
        let mut out = Vec::new();
        Bounded(&mut out).write_all(b"short\n").unwrap();
        assert_eq!(out, b"short\n");
    }
}
