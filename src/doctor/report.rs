//! All checks of one `retrace doctor`: aligned lines for people, JSON for
//! scripts, and the exit code.

use serde::Serialize;

use super::check::{Check, Status};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// A confined run can work: no check is an error (warnings allowed).
    pub can_run: bool,
    pub checks: Vec<Check>,
}

impl Report {
    pub fn new(checks: Vec<Check>) -> Report {
        let can_run = checks.iter().all(|c| c.status != Status::Error);
        Report { can_run, checks }
    }

    /// 0 when a confined run can work, 1 when it cannot.
    pub fn exit_code(&self) -> i32 {
        if self.can_run {
            0
        } else {
            1
        }
    }

    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }

    /// One line per check, `status  name  fact → fix`, columns aligned,
    /// then a verdict line.
    pub fn render(&self) -> String {
        let width = self.checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        let mut out = String::new();
        for check in &self.checks {
            let status = check.status.to_string();
            out.push_str(&format!(
                "{status:<5}  {:<width$}  {}",
                check.name, check.detail
            ));
            if let Some(fix) = &check.fix {
                out.push_str(" → ");
                out.push_str(fix);
            }
            out.push('\n');
        }
        let count = |s: Status| self.checks.iter().filter(|c| c.status == s).count();
        let verdict = if self.can_run {
            "a confined run can work"
        } else {
            "a confined run cannot work until the errors above are fixed"
        };
        out.push_str(&format!(
            "{} ok, {} info, {} warning(s), {} error(s): {verdict}\n",
            count(Status::Ok),
            count(Status::Info),
            count(Status::Warn),
            count(Status::Error)
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_allow_a_run_and_an_error_does_not() {
        let fine = Report::new(vec![
            Check::ok("root", "running as root"),
            Check::info("images", "not built yet"),
            Check::warn("compiler", "no C++ compiler", "install build-essential"),
        ]);
        assert!(fine.can_run);
        assert_eq!(fine.exit_code(), 0);
        let broken = Report::new(vec![
            Check::ok("root", "running as root"),
            Check::error("python", "no interpreter", "install python3"),
        ]);
        assert!(!broken.can_run);
        assert_eq!(broken.exit_code(), 1);
    }

    #[test]
    fn severity_orders_the_statuses() {
        assert!(Status::Ok < Status::Info);
        assert!(Status::Info < Status::Warn);
        assert!(Status::Warn < Status::Error);
    }

    #[test]
    fn lines_are_aligned_and_carry_the_fix() {
        let report = Report::new(vec![
            Check::ok("root", "running as root"),
            Check::error("python", "not found", "install python3"),
        ]);
        let text = report.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "ok     root    running as root");
        assert_eq!(lines[1], "error  python  not found → install python3");
        assert!(
            lines[2].starts_with("1 ok, 0 info, 0 warning(s), 1 error(s): a confined run cannot")
        );
    }

    #[test]
    fn json_names_status_in_lowercase() {
        let report = Report::new(vec![Check::warn("disk", "2.0 GiB free", "free space")]);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["can_run"], true);
        assert_eq!(json["checks"][0]["status"], "warn");
        assert_eq!(json["checks"][0]["fix"], "free space");
    }
}
