//! A command run with a deadline, its output kept: the doctor's probes (pip
//! waiting on an unreachable index must not hang the doctor).

use std::io::{self, Read};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What a bounded command did.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// The last non-empty line of stderr (else stdout): what failed.
    pub fn last_line(&self) -> String {
        [&self.stderr, &self.stdout]
            .iter()
            .find_map(|text| text.lines().rev().find(|l| !l.trim().is_empty()))
            .map(|l| l.trim().to_string())
            .unwrap_or_else(|| self.status.to_string())
    }
}

/// Why a bounded command gave no result. Each message is one line.
#[derive(Debug, thiserror::Error)]
pub enum BoundedError {
    #[error("cannot run {program}: {cause}")]
    Spawn { program: String, cause: io::Error },
    #[error("{program} took longer than {}s", limit.as_secs())]
    Timeout { program: String, limit: Duration },
    #[error("waiting for {program}: {cause}")]
    Wait { program: String, cause: io::Error },
}

/// Runs `cmd` to completion or kills it at `limit`.
pub fn run(mut cmd: Command, limit: Duration) -> Result<Finished, BoundedError> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|cause| BoundedError::Spawn {
            program: program.clone(),
            cause,
        })?;
    // Drained on threads so that neither pipe blocks the other.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(BoundedError::Timeout { program, limit });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(cause) => return Err(BoundedError::Wait { program, cause }),
        }
    };
    Ok(Finished {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_past_its_limit_is_killed() {
        let mut cmd = Command::new("sleep");
        cmd.arg("1000");
        // The error says the limit fired (a sleep left alone would hold the
        // test for 1000 s, not fail it fast: no timing is asserted).
        let err = run(cmd, Duration::from_millis(200)).unwrap_err();
        assert!(err.to_string().contains("took longer"), "{err}");
        assert!(matches!(err, BoundedError::Timeout { .. }), "{err:?}");
    }

    #[test]
    fn output_and_the_failing_line_are_kept() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo first >&2; echo last >&2; exit 3"]);
        let done = run(cmd, Duration::from_secs(10)).unwrap();
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(done.stdout, "out\n");
        assert_eq!(done.last_line(), "last");
    }
}
