//! How a run ends, and the exit code each ending has (spec, "The runner"), and the runner's own
//! refusal codes on the tool socket.

use std::path::PathBuf;

use harness_bus::{BrokerError, RefusalCode};

/// Why the runner stopped other than by a signal.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file or directory of the run could not be read, created or written (exit 2).
    #[error("bad run directory or stdin: cannot {operation} {}: {source}", path.display())]
    Io {
        /// What the runner was doing.
        operation: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file of the run is there but not what it must be (exit 2).
    #[error("bad run directory or stdin: {}: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A JSON file of the run does not parse (exit 2).
    #[error("bad run directory or stdin: {} is not valid: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The error, naming the field it is in (`turnTimeout: invalid type: ...`).
        #[source]
        source: harness_tools::json::JsonError,
    },
    /// stdin is not `{"cap": "..."}` and a newline (exit 2). The reason never holds the line.
    #[error("bad run directory or stdin: {0}")]
    Stdin(&'static str),
    /// The bundle cannot be verified against its manifest (exit 2).
    #[error("bad run directory or stdin: the bundle {} cannot be verified: {source}", path.display())]
    Bundle {
        /// The bundle directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: harness_bundle::BundleError,
    },
    /// The tool socket cannot be bound or served (exit 2).
    #[error("bad run directory or stdin: cannot serve the tool socket {}: {source}", path.display())]
    ToolSocket {
        /// The socket path.
        path: PathBuf,
        /// The error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A turn cannot start: the launch preflight failed (exit 2), before any message was read.
    #[error("bad run directory or stdin: the launch preflight of {} failed: {reason}", cli.display())]
    Preflight {
        /// run.json's `cli`.
        cli: PathBuf,
        /// Why, naming the program the sandbox refused where it can.
        reason: String,
    },
    /// Another runner holds the run-directory lock (exit 2).
    #[error(
        "bad run directory or stdin: another runner holds the run-directory lock {}; one runner \
         per run directory",
        path.display()
    )]
    LockHeld {
        /// The lock file.
        path: PathBuf,
    },
    /// A founder credential is in the environment (exit 20).
    #[error(
        "founder credentials: {variable} is set: a founder credential must never reach a session"
    )]
    FounderCredential {
        /// The variable.
        variable: String,
    },
    /// A service the role needs has no usable role token (exit 20).
    #[error("founder credentials: the role needs {service}, and {reason}")]
    NoRoleToken {
        /// The service.
        service: String,
        /// What is missing.
        reason: String,
    },
    /// The broker refused `role.claim` (exit 21).
    #[error("role.claim refused: {code}")]
    ClaimRefused {
        /// The broker's code.
        code: RefusalCode,
    },
    /// The capability or the claim stopped working (exit 22).
    #[error("the session is no longer valid: {operation} refused: {code}")]
    SessionInvalid {
        /// The verb the broker refused.
        operation: &'static str,
        /// The broker's code.
        code: RefusalCode,
    },
    /// `role.claim` got no answer, or the broker stayed unreachable (exit 23).
    #[error(
        "the broker is unreachable: {tries} broker polls in a row failed ({operation}); the last: {source}"
    )]
    BrokerUnreachable {
        /// The verb that failed last.
        operation: &'static str,
        /// How many calls in a row failed.
        tries: u32,
        /// The last failure.
        #[source]
        source: BrokerError,
    },
}

impl RunError {
    /// An io error of `operation` on `path`, for `map_err`.
    pub(crate) fn io(
        operation: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { operation, path, source }
    }

    /// A file that is not what it must be.
    pub(crate) fn invalid(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Invalid { path: path.into(), reason: reason.into() }
    }

    /// The exit code of the spec's table.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Io { .. }
            | Self::Invalid { .. }
            | Self::Json { .. }
            | Self::Stdin(_)
            | Self::Bundle { .. }
            | Self::ToolSocket { .. }
            | Self::Preflight { .. }
            | Self::LockHeld { .. } => 2,
            Self::FounderCredential { .. } | Self::NoRoleToken { .. } => 20,
            Self::ClaimRefused { .. } => 21,
            Self::SessionInvalid { .. } => 22,
            Self::BrokerUnreachable { .. } => 23,
        }
    }

    /// The launch end reason the host records for this exit.
    pub fn end_reason(&self) -> &'static str {
        match self.exit_code() {
            20 => "founder-credentials",
            21 => "claim-refused",
            22 => "session-invalid",
            23 => "broker-unreachable",
            _ => "failed",
        }
    }
}

/// The refusals the runner makes itself on the tool socket, without the host or the broker
/// deciding: the model reads `refused: <code>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The project is not one of the session's clones, or its clone has no `.git`.
    NotAClone,
    /// A branch or ref is not a plain ref name.
    BadBranch,
    /// The branch to push does not exist in the clone.
    NoSuchBranch,
    /// A bundle is over [`crate::MAX_BUNDLE_BYTES`].
    BundleTooLarge,
    /// A landing is already running.
    LandBusy,
    /// The clone's `.git` is not a plain directory of its own: a file or link naming another
    /// repository, or one holding `commondir` or alternates (docs/runner.md, "The runner's git").
    UnsafeGitDir,
}

impl Refusal {
    /// Every refusal, for tests and docs.
    pub const ALL: [Refusal; 6] = [
        Self::NotAClone,
        Self::BadBranch,
        Self::NoSuchBranch,
        Self::BundleTooLarge,
        Self::LandBusy,
        Self::UnsafeGitDir,
    ];

    /// The stable code the model and the logs read.
    pub fn code(self) -> &'static str {
        match self {
            Self::NotAClone => "not-a-clone",
            Self::BadBranch => "bad-branch",
            Self::NoSuchBranch => "no-such-branch",
            Self::BundleTooLarge => "bundle-too-large",
            Self::LandBusy => "land-busy",
            Self::UnsafeGitDir => "unsafe-git-dir",
        }
    }
}

impl From<Refusal> for harness_bus::BackendError {
    fn from(refusal: Refusal) -> Self {
        match RefusalCode::new(refusal.code()) {
            Some(code) => Self::Refused(code),
            None => Self::Failed(refusal.code().to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_code_is_a_valid_refusal_code() {
        for refusal in Refusal::ALL {
            assert!(RefusalCode::new(refusal.code()).is_some(), "{refusal:?}");
            assert!(matches!(
                harness_bus::BackendError::from(refusal),
                harness_bus::BackendError::Refused(_)
            ));
        }
    }

    #[test]
    fn exit_codes_and_end_reasons() {
        let code = RefusalCode::new("claim-revoked").unwrap();
        let error = RunError::SessionInvalid { operation: "message.send", code };
        assert_eq!((error.exit_code(), error.end_reason()), (22, "session-invalid"));
        let error = RunError::invalid("run.json", "bad");
        assert_eq!((error.exit_code(), error.end_reason()), (2, "failed"));
    }
}
