//! The `dynamic` strategy inside a round: running one cell so that packages
//! reach the kernel on demand, and only through retrace.
//!
//! 1. The model's own `pip install` lines are found by the cell scanner
//!    and neutralised before the cell runs (they never run in the kernel);
//!    what they ask for is decided by the allowlist.
//! 2. A `ModuleNotFoundError` for a module the image lacks is a request
//!    too; when it is allowed and installed, the cell runs again. That
//!    re-run is an install step, recorded in the round, not a model round.
//! 3. Installs go through the confined installer into the package store;
//!    the live kernel then gets the store entries on `sys.path`.
//!
//! A refused request ends the execution with verdict `policy_denied` and
//! a message that names what can be installed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::kernel::{AnyKernel, ExecOptions, Outcome};
use crate::pyenv::dynamic::{
    might_install, missing_module, Allowlist, CellScanner, Decision, Installer, Pin, Request,
    RequestSource,
};
use crate::pyenv::FixedImage;
use crate::record::{InstallOn, InstallStep, InstallTrigger, WheelRecord};
use crate::sandbox::Verdict;

/// Missing-import installs per cell run: a cell that needs more packages
/// than this is left with its error.
const MAX_STEPS: usize = 4;

/// Everything a `dynamic` arm shares across its tasks.
pub struct Packages {
    pub allowlist: Allowlist,
    pub installer: Arc<Installer>,
    /// Finds a cell's install lines and imports, in a jail of its own.
    pub scanner: Arc<CellScanner>,
    pub install_on: InstallOn,
}

/// What one kernel has been given so far.
#[derive(Debug, Default)]
pub struct Activated {
    dirs: BTreeSet<PathBuf>,
    /// Distributions whose closure is on the kernel's path.
    distributions: BTreeSet<String>,
    /// The kernel's restart count when these were given: a restarted
    /// kernel (after a kill) is a fresh interpreter without them.
    restarts: u32,
}

/// Why a cell's install lines could not be found.
#[derive(Debug, thiserror::Error)]
enum ScannerFailed {
    #[error("the cell scanner failed: {0}")]
    Scan(crate::pyenv::dynamic::ScanError),
}

impl Activated {
    fn follow(&mut self, kernel: &AnyKernel) {
        if kernel.restarts() != self.restarts {
            *self = Activated {
                restarts: kernel.restarts(),
                ..Activated::default()
            };
        }
    }
}

/// A cell run with its install steps.
pub struct CellRun {
    pub outcome: Outcome,
    pub steps: Vec<InstallStep>,
}

impl Packages {
    /// Runs `code` in `kernel`, installing what it asks for or misses.
    pub async fn run_cell(
        &self,
        kernel: &mut AnyKernel,
        activated: &mut Activated,
        code: &str,
        exec: &ExecOptions,
    ) -> CellRun {
        activated.follow(kernel);
        let mut steps = Vec::new();
        // Code past the size bound is refused before the scanner reads it.
        if let Some(outcome) = crate::kernel::code_refusal(code) {
            return CellRun { outcome, steps };
        }
        let mut code = code.to_string();
        if self.install_on.explicit() && might_install(&code) {
            match self.explicit(kernel, activated, &code).await {
                Ok((neutralised, None)) => code = neutralised,
                Ok((neutralised, Some(step))) => {
                    code = neutralised;
                    let refused = step.denied().then(|| policy_denied(&step, &self.allowlist));
                    steps.push(step);
                    if let Some(outcome) = refused {
                        return CellRun { outcome, steps };
                    }
                }
                Err(why) => {
                    let outcome =
                        Outcome::not_run(Verdict::InternalError, "HarnessError", why.to_string());
                    return CellRun { outcome, steps };
                }
            }
        }
        let mut outcome = kernel.execute(&code, exec).await;
        let mut asked = BTreeSet::new();
        while self.install_on.missing() && steps.len() < MAX_STEPS {
            let Some(module) = outcome
                .error
                .as_ref()
                .and_then(|e| missing_module(&e.ename, &e.evalue))
            else {
                break;
            };
            if !asked.insert(module.clone()) {
                break;
            }
            let request = Request {
                requested: module.clone(),
                source: RequestSource::MissingImport,
            };
            let decision = self.allowlist.decide(&request);
            if let Decision::Allowed { distribution, .. } = &decision {
                // Installed already: the error is the code's (a wrong
                // submodule name), not a missing package.
                if activated.distributions.contains(distribution) {
                    break;
                }
            }
            let mut step = self
                .provide(
                    kernel,
                    activated,
                    InstallTrigger::MissingImport { module },
                    vec![decision],
                )
                .await;
            if step.denied() {
                outcome.verdict = Verdict::PolicyDenied;
                outcome.fired.push(Verdict::PolicyDenied);
                outcome.fired.sort_by_key(|v| v.as_str());
                outcome.fired.dedup();
                outcome.policy = Some(denial_text(&step, &self.allowlist));
                steps.push(step);
                break;
            }
            if step.failed() {
                outcome.policy = Some(failure_text(&step));
                steps.push(step);
                break;
            }
            step.rerun = true;
            let rerun = kernel.execute(&code, exec).await;
            step.failed_outcome = Some(Box::new(std::mem::replace(&mut outcome, rerun)));
            steps.push(step);
        }
        if let Some(step) = steps.iter().find(|s| s.failed()) {
            if outcome.policy.is_none() && !outcome.succeeded() {
                outcome.policy = Some(failure_text(step));
            }
        }
        CellRun { outcome, steps }
    }

    /// The cell's own install lines: neutralised code, and the step that
    /// handled them (`None` when there were none).
    async fn explicit(
        &self,
        kernel: &mut AnyKernel,
        activated: &mut Activated,
        code: &str,
    ) -> Result<(String, Option<InstallStep>), ScannerFailed> {
        let found = self.scanner.scan(code).await.map_err(ScannerFailed::Scan)?;
        if found.installs.is_empty() {
            return Ok((found.code, None));
        }
        let decisions: Vec<Decision> = found
            .installs
            .iter()
            .flat_map(|line| line.requests())
            .map(|r| self.allowlist.decide(&r))
            .collect();
        let step = if decisions.iter().all(Decision::is_allowed) {
            self.provide(kernel, activated, InstallTrigger::ExplicitLines, decisions)
                .await
        } else {
            // Nothing is installed for a cell that is refused anyway.
            empty_step(InstallTrigger::ExplicitLines, decisions)
        };
        Ok((found.code, Some(step)))
    }

    /// Installs the allowed decisions' closures and puts them on the
    /// kernel's path.
    async fn provide(
        &self,
        kernel: &mut AnyKernel,
        activated: &mut Activated,
        trigger: InstallTrigger,
        decisions: Vec<Decision>,
    ) -> InstallStep {
        if decisions.iter().any(|d| !d.is_allowed()) {
            return empty_step(trigger, decisions);
        }
        let started = Instant::now();
        let mut closure: Vec<Pin> = Vec::new();
        let mut distributions = Vec::new();
        for d in &decisions {
            if let Decision::Allowed {
                closure: pins,
                distribution,
                ..
            } = d
            {
                distributions.push(distribution.clone());
                for pin in pins {
                    if !closure.contains(pin) {
                        closure.push(pin.clone());
                    }
                }
            }
        }
        let mut step = empty_step(trigger, decisions);
        match self.installer.install(&closure).await {
            Ok(installed) => {
                step.installer_ms = installed.installer_ms;
                step.store_hit = installed.wheels.iter().all(|w| w.store_hit);
                step.wheels = installed
                    .wheels
                    .iter()
                    .map(|w| WheelRecord {
                        name: w.entry.pin.name.clone(),
                        version: w.entry.pin.version.clone(),
                        sha256: w.entry.pin.sha256.clone(),
                        store_hit: w.store_hit,
                        bytes: w.entry.bytes,
                    })
                    .collect();
                activated.follow(kernel);
                let new: Vec<PathBuf> = installed
                    .wheels
                    .iter()
                    .map(|w| w.site.clone())
                    .filter(|d| !activated.dirs.contains(d))
                    .collect();
                match kernel.add_import_paths(&new).await {
                    Ok(()) => {
                        activated.dirs.extend(new);
                        activated.distributions.extend(distributions);
                    }
                    Err(e) => step.error = Some(format!("activating in the kernel: {e}")),
                }
            }
            Err(e) if e.is_refusal() => {
                step.findings = e.findings().to_vec();
                step.refused = Some(e.to_string());
            }
            Err(e) => step.error = Some(e.to_string()),
        }
        step.ms = started.elapsed().as_secs_f64() * 1e3;
        step
    }

    /// The store, read-only in every kernel of the arm.
    pub fn store_dir(&self) -> &Path {
        self.installer.store().root()
    }
}

/// Runs `code` in a kernel of a fixed image (`fat`, `slim`): its install
/// lines replaced by a notice that nothing can be installed, which a
/// failing cell's feedback carries too.
pub async fn fixed_cell(
    fixed: &FixedImage,
    kernel: &mut AnyKernel,
    code: &str,
    exec: &ExecOptions,
) -> Outcome {
    if let Some(outcome) = crate::kernel::code_refusal(code) {
        return outcome;
    }
    match fixed.rewrite(code).await {
        Ok(rewritten) => {
            let mut outcome = kernel.execute(&rewritten.code, exec).await;
            if !outcome.succeeded() && outcome.policy.is_none() {
                outcome.policy = rewritten.notice;
            }
            outcome
        }
        Err(why) => Outcome::not_run(
            Verdict::InternalError,
            "HarnessError",
            ScannerFailed::Scan(why).to_string(),
        ),
    }
}

/// A step that has installed nothing (yet).
fn empty_step(trigger: InstallTrigger, decisions: Vec<Decision>) -> InstallStep {
    InstallStep {
        trigger,
        decisions,
        wheels: Vec::new(),
        store_hit: false,
        ms: 0.0,
        installer_ms: 0.0,
        error: None,
        refused: None,
        findings: Vec::new(),
        rerun: false,
        failed_outcome: None,
    }
}

fn policy_denied(step: &InstallStep, allowlist: &Allowlist) -> Outcome {
    let mut outcome = Outcome::not_run(
        Verdict::PolicyDenied,
        "PolicyDenied",
        "the cell was not run: an install request was refused".into(),
    );
    outcome.policy = Some(denial_text(step, allowlist));
    outcome.fired = vec![Verdict::PolicyDenied];
    outcome
}

/// The denials' own messages (each names what is available).
fn denial_text(step: &InstallStep, allowlist: &Allowlist) -> String {
    if let Some(why) = &step.refused {
        return format!(
            "Nothing was installed: {why}. Packages that can be installed: {}.",
            allowlist.available().join(", ")
        );
    }
    let mut lines: Vec<String> = step
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Denied { message, .. } => Some(message.clone()),
            Decision::Allowed { .. } => None,
        })
        .collect();
    lines.dedup();
    lines.join("\n")
}

fn failure_text(step: &InstallStep) -> String {
    let names: Vec<String> = step
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Allowed { distribution, .. } => Some(distribution.clone()),
            Decision::Denied { .. } => None,
        })
        .collect();
    format!(
        "{} could not be installed in this sandbox right now; solve the task without it.",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_are_told_in_the_policys_words() {
        let allowlist = Allowlist::embedded().unwrap();
        let request = |r: &str| Request {
            requested: r.into(),
            source: RequestSource::ExplicitLine { line: 1 },
        };
        let step = empty_step(
            InstallTrigger::ExplicitLines,
            vec![
                allowlist.decide(&request("scipy")),
                allowlist.decide(&request("scipyy")),
            ],
        );
        assert!(step.denied());
        let outcome = policy_denied(&step, &allowlist);
        assert_eq!(outcome.verdict, Verdict::PolicyDenied);
        assert_eq!(outcome.fired, vec![Verdict::PolicyDenied]);
        let text = outcome.policy.unwrap();
        assert!(text.contains("scipyy"), "{text}");
        assert!(!step.failed());
    }
}
