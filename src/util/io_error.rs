//! An I/O error with what was being done (the file, the cgroup): the one
//! `Io` variant every stage's error enum wraps.

use std::fmt;

/// "creating /run/retrace/k1: Permission denied (os error 13)". The cause
/// is part of the message and deliberately not a `source()`, so a printed
/// error chain names it once.
#[derive(Debug)]
pub struct IoError {
    pub context: String,
    pub cause: std::io::Error,
}

impl IoError {
    pub fn new(context: impl Into<String>, cause: std::io::Error) -> Self {
        IoError {
            context: context.into(),
            cause,
        }
    }

    pub fn kind(&self) -> std::io::ErrorKind {
        self.cause.kind()
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, self.cause)
    }
}

impl std::error::Error for IoError {}

/// Attaches what was being done to an `io::Result`, so a call site reads
/// `fs::read(&p).at("reading", &p)?` and every stage's `Io` variant (a
/// `From<IoError>`) takes it; no `X::io(format!(..))` per site.
pub trait IoContext<T> {
    /// "`what` `path`: cause".
    fn at(self, what: &str, path: &std::path::Path) -> Result<T, IoError>;
    /// A context built only when the call failed.
    fn io_context(self, context: impl FnOnce() -> String) -> Result<T, IoError>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, what: &str, path: &std::path::Path) -> Result<T, IoError> {
        self.map_err(|cause| IoError::new(format!("{what} {}", path.display()), cause))
    }

    fn io_context(self, context: impl FnOnce() -> String) -> Result<T, IoError> {
        self.map_err(|cause| IoError::new(context(), cause))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_names_the_path_and_keeps_the_kind() {
        let missing = std::path::Path::new("/nonexistent/retrace-io-context");
        let err = std::fs::read(missing).at("reading", missing).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        assert!(err
            .to_string()
            .starts_with("reading /nonexistent/retrace-io-context: "));
        let err = std::fs::read(missing)
            .io_context(|| "loading the corpus".into())
            .unwrap_err();
        assert!(err.to_string().starts_with("loading the corpus: "));
    }
}
