//! How an execution ended, named from OS evidence (wait status, cgroup
//! counter deltas, the kernel's network-namespace counters, tmpfs and
//! descriptor-table levels, the harness's own timers and policy), never from
//! what the kernel says about itself.

use serde::{Deserialize, Serialize};
use strum::{Display, EnumIter, EnumString, IntoStaticStr};

/// The primary label of one execution. Its name (serde, `Display`,
/// `FromStr`, [`Verdict::as_str`]) is the snake_case variant name.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumIter,
    EnumString,
    IntoStaticStr,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[strum(
    serialize_all = "snake_case",
    parse_err_ty = String,
    parse_err_fn = crate::util::names::unknown::<Verdict>
)]
pub enum Verdict {
    Ok,
    /// The code raised an exception (the name is in the outcome's error).
    Error,
    TimeoutWall,
    TimeoutCpu,
    OomKilled,
    MemoryError,
    PidsLimit,
    OutputLimit,
    DiskLimit,
    FdLimit,
    /// The kernel's processes held more file locks than their bound.
    LockLimit,
    /// The kernel died from a signal (the signal is in the outcome's exit).
    Crash,
    /// The kernel process exited by itself (`os._exit`, `quit()`).
    KernelExit,
    NetworkBlocked,
    PolicyDenied,
    /// The cell's code was larger than the harness runs (`kernel::MAX_CODE_BYTES`):
    /// refused before it reached the kernel, like `policy_denied`.
    CodeTooLarge,
    /// The harness failed: could not start, confine, kill or clean up.
    InternalError,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Verdicts that name a limit of the confinement or the harness: the
    /// ones `Outcome.fired` lists.
    pub fn is_limit(self) -> bool {
        matches!(
            self,
            Verdict::TimeoutWall
                | Verdict::TimeoutCpu
                | Verdict::OomKilled
                | Verdict::MemoryError
                | Verdict::PidsLimit
                | Verdict::OutputLimit
                | Verdict::DiskLimit
                | Verdict::FdLimit
                | Verdict::LockLimit
                | Verdict::NetworkBlocked
                | Verdict::PolicyDenied
                | Verdict::CodeTooLarge
        )
    }

    /// Executions that ended with the harness or the OS killing something.
    pub fn is_kill(self) -> bool {
        matches!(
            self,
            Verdict::TimeoutWall
                | Verdict::TimeoutCpu
                | Verdict::OomKilled
                | Verdict::PidsLimit
                | Verdict::OutputLimit
                | Verdict::LockLimit
                | Verdict::Crash
        )
    }
}

/// Secondary facts about an execution.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    EnumIter,
    EnumString,
    IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(
    serialize_all = "snake_case",
    parse_err_ty = String,
    parse_err_fn = crate::util::names::unknown::<Flag>
)]
pub enum Flag {
    /// The kernel was restarted; its variables are gone.
    Restarted,
    /// The interrupt did not end the execution; a kill was needed.
    InterruptIgnored,
    /// Processes of the kernel were still alive after the execution.
    LeftoverProcs,
    Zombies,
    OutputTruncated,
    /// The CPU quota throttled the kernel.
    Throttled,
    /// The kernel ran without confinement (`--unsafe-no-sandbox`).
    Unconfined,
    /// The error's text claims a limit (`Outcome.suggested`) that no OS
    /// evidence confirms; the verdict stays `error`.
    UnverifiedClaim,
    /// The kernel's messages said the execution ended while its main
    /// thread, seen from the host, was still running it (a forged end).
    ForgedEnd,
}

impl Flag {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::IntoEnumIterator;

    #[test]
    fn names_round_trip() {
        for v in Verdict::iter() {
            assert_eq!(v.as_str().parse::<Verdict>().unwrap(), v);
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", v.as_str()));
            assert_eq!(v.to_string(), v.as_str());
        }
        for f in Flag::iter() {
            assert_eq!(f.as_str().parse::<Flag>().unwrap(), f);
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.as_str()));
        }
        assert_eq!(Verdict::iter().count(), 17);
        assert_eq!(Verdict::TimeoutWall.as_str(), "timeout_wall");
        assert_eq!(Flag::InterruptIgnored.as_str(), "interrupt_ignored");
        let err = "nope".parse::<Verdict>().unwrap_err();
        assert!(
            err.starts_with("unknown verdict `nope`; expected one of ok, error, timeout_wall, ")
        );
        let err = "nope".parse::<Flag>().unwrap_err();
        assert!(
            err.starts_with("unknown flag `nope`; expected one of restarted, "),
            "{err}"
        );
        assert_eq!("zombies".parse::<Flag>().unwrap(), Flag::Zombies);
    }
}
