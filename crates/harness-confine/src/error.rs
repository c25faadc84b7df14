//! Why a domain could not be prepared.

use std::path::PathBuf;

/// A confinement that `"required"` demands and the kernel or the paths cannot give.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The kernel has no usable Landlock.
    #[error("the kernel offers no Landlock (confine \"required\"): {0}")]
    Unavailable(String),
    /// A namespace layer the kernel does not let this user make.
    #[error("the kernel does not let this user make a {0} (confine \"required\")")]
    Layer(&'static str),
    /// A rule could not be applied.
    #[error("cannot apply the rule for {path}: {reason} (confine \"required\")")]
    Rule {
        /// The path the rule is for.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A part of the policy the kernel's ABI does not have.
    #[error("{what} needs Landlock ABI {needs}, the kernel has {abi} (confine \"required\")")]
    Abi {
        /// What could not be applied.
        what: &'static str,
        /// The ABI it needs.
        needs: u32,
        /// The kernel's ABI.
        abi: u32,
    },
    /// The ruleset could not be created or a rule added (a kernel error).
    #[error("cannot build the Landlock ruleset: {0}")]
    Ruleset(#[source] landlock::RulesetError),
}
