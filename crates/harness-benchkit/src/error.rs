//! The one error type of the crate.

use std::path::PathBuf;

/// What can go wrong while a bench target measures.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A file or a process could not be read, opened, started or waited for.
    #[error("cannot {operation} {}", path.display())]
    Io {
        /// What was being done.
        operation: &'static str,
        /// The file or program it was done to.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A measured process did not do what the measurement needs (a wrong exit code, a missing
    /// field in /proc, a sibling binary not built).
    #[error("{0}")]
    Unexpected(String),
}

impl BenchError {
    pub(crate) fn io(
        operation: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { operation, path, source }
    }
}
