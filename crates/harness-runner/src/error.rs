//! How a run ends, and the exit code each ending has (spec, "The runner").

/// Why the runner stopped other than by a signal.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The run directory or stdin is unusable (exit 2).
    #[error("bad run directory or stdin: {0}")]
    BadRun(String),
    /// A founder credential is in the environment, or a service lacks a usable role token
    /// (exit 20).
    #[error("founder credentials: {0}")]
    FounderCredentials(String),
    /// The broker refused `role.claim` (exit 21).
    #[error("role.claim refused: {0}")]
    ClaimRefused(String),
    /// The capability or the claim stopped working (exit 22).
    #[error("the session is no longer valid: {0}")]
    SessionInvalid(String),
    /// `role.claim` got no answer, or the broker stayed unreachable (exit 23).
    #[error("the broker is unreachable: {0}")]
    BrokerUnreachable(String),
}

impl RunError {
    /// The exit code of the spec's table.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::BadRun(_) => 2,
            Self::FounderCredentials(_) => 20,
            Self::ClaimRefused(_) => 21,
            Self::SessionInvalid(_) => 22,
            Self::BrokerUnreachable(_) => 23,
        }
    }

    /// The launch end reason the host records for this exit.
    pub fn end_reason(&self) -> &'static str {
        match self {
            Self::BadRun(_) => "failed",
            Self::FounderCredentials(_) => "founder-credentials",
            Self::ClaimRefused(_) => "claim-refused",
            Self::SessionInvalid(_) => "session-invalid",
            Self::BrokerUnreachable(_) => "broker-unreachable",
        }
    }
}
