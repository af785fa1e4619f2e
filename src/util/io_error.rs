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
