//! The crate's one error type.

use std::path::PathBuf;

/// Why a lists file cannot be used, or a log cannot be read or written.
///
/// A broken lists file is not a failure of the session: the hooks log it (`broken_lists`,
/// `skipped_broken`) and carry on; see [`crate::run_hook`].
#[derive(Debug, thiserror::Error)]
pub enum UnslopError {
    /// The lists file could not be read.
    #[error("cannot read the lists file {path:?}")]
    ReadLists {
        /// The lists file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The lists file is larger than the checker accepts.
    #[error("the lists file {path:?} is larger than {limit} bytes")]
    ListsTooLarge {
        /// The lists file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// The lists file is not JSON of the documented shape.
    #[error("the lists file is not valid: {0}")]
    ListsJson(#[source] serde_json::Error),
    /// The lists file is JSON of the right shape, but an entry or a field breaks a rule.
    #[error("the lists file is not valid: {0}")]
    ListsRule(String),
    /// An entry's pattern is not a pattern the checker accepts.
    #[error("the lists file is not valid: entry {id:?}: {reason}")]
    Pattern {
        /// The entry's id.
        id: String,
        /// What is wrong with its pattern.
        reason: String,
    },
    /// The log could not be opened, locked, read or written.
    #[error("cannot {operation} the unslop log {path:?}")]
    Log {
        /// What was being done: `open`, `lock`, `append to`, `read`.
        operation: &'static str,
        /// The log file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Returns `error` and its sources joined with `: `, on one line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text.replace('\n', " ")
}
