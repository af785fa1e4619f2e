//! Install lines in a kernel whose image is fixed (the `fat` and `slim`
//! strategies, `retrace exec`): the model's `%pip install X`, `!pip
//! install X`, `pip3`, `python -m pip` lines are found by the same cell
//! scanner as the `dynamic` strategy's (IPython's transformer and Python's
//! parser, never a pattern on text: a string that mentions pip stays) and
//! each is replaced, before the cell is sent, by a line that prints why
//! nothing was installed. A raw pip in the kernel could only fail on the
//! missing network, and tell the model its own command was wrong.

use super::dynamic::{might_install, CellScanner, InstallLine, ScanError};
use super::Strategy;

/// A fixed image's kernels and the scanner that finds their install lines.
pub struct FixedImage {
    scanner: CellScanner,
    /// What the kernels run as (`fat` or `slim`), for the notice.
    strategy: Strategy,
}

/// A cell with its install lines replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    /// What the kernel runs.
    pub code: String,
    /// What the model is told, one line per install line (`None` when the
    /// cell had none).
    pub notice: Option<String>,
}

impl FixedImage {
    pub fn new(scanner: CellScanner, strategy: Strategy) -> FixedImage {
        FixedImage { scanner, strategy }
    }

    /// `code` with each install line replaced by a `print` of its notice
    /// to stderr (indentation and line numbers kept).
    pub async fn rewrite(&self, code: &str) -> Result<Rewritten, ScanError> {
        if !might_install(code) {
            return Ok(Rewritten {
                code: code.to_string(),
                notice: None,
            });
        }
        let scan = self.scanner.scan(code).await?;
        if scan.installs.is_empty() {
            return Ok(Rewritten {
                code: code.to_string(),
                notice: None,
            });
        }
        let mut lines: Vec<String> = scan.code.split('\n').map(str::to_string).collect();
        let mut notices = Vec::new();
        for install in &scan.installs {
            let text = notice(install, self.strategy);
            if let Some(line) = lines.get_mut(install.line as usize - 1) {
                let indent = &line[..line.len() - line.trim_start().len()];
                *line = format!("{indent}{}", print_statement(&text));
            }
            notices.push(text);
        }
        Ok(Rewritten {
            code: lines.join("\n"),
            notice: Some(notices.join("\n")),
        })
    }
}

/// Why `install` installed nothing, in the model's terms.
pub fn notice(install: &InstallLine, strategy: Strategy) -> String {
    let what = match strategy {
        Strategy::Slim => "the standard library only",
        _ => "its pre-installed packages",
    };
    format!(
        "`{} install {}` was not run: this kernel's image is fixed ({what}; strategy `{strategy}`) \
         and has no network, so nothing can be installed. Use what is installed; the `{}` \
         strategy installs packages from an allowlist.",
        install.tool,
        install.args.join(" "),
        Strategy::Dynamic,
    )
}

/// A Python statement that prints `text` on stderr: one line, whatever
/// `text` holds (JSON's string escapes are Python's).
fn print_statement(text: &str) -> String {
    let literal = serde_json::to_string(text).unwrap_or_else(|_| "''".into());
    format!("print({literal}, file=__import__('sys').stderr)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notice_names_the_request_and_the_strategy_that_installs() {
        let line = InstallLine {
            line: 1,
            tool: "pip".into(),
            args: vec!["-q".into(), "tabulate".into()],
        };
        let fat = notice(&line, Strategy::Fat);
        assert!(
            fat.contains("`pip install -q tabulate` was not run"),
            "{fat}"
        );
        assert!(
            fat.contains("strategy `fat`") && fat.contains("`dynamic`"),
            "{fat}"
        );
        assert!(notice(&line, Strategy::Slim).contains("standard library only"));
        let stmt = print_statement("a \"quoted\" `x`\nnext");
        assert_eq!(
            stmt,
            r#"print("a \"quoted\" `x`\nnext", file=__import__('sys').stderr)"#
        );
    }
}
