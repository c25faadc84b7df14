//! The bundle's refusals and failures, each with the spec's code.

use std::path::PathBuf;

/// Why no bundle was written. Nothing is left behind in any case.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A listed skill is not in the skills directory (`skill-not-enabled`).
    #[error("skill-not-enabled: the skill {skill:?} is not enabled (no {path:?})")]
    SkillNotEnabled {
        /// The skill as the role file lists it.
        skill: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A skill cannot go into the prompt as it is (`bundle-refused`).
    #[error("bundle-refused: {reason}: {path:?}")]
    Refused {
        /// What is wrong, in words.
        reason: RefusalReason,
        /// The offending file or directory.
        path: PathBuf,
    },
    /// A route var is missing or names no model (`no-route`).
    #[error("no-route: {0}")]
    NoRoute(String),
    /// The request itself is not usable (a relative workspace, ...).
    #[error("bundle-refused: {0}")]
    Invalid(String),
    /// The bundle directory exists already; a bundle is never overwritten.
    #[error("bundle-exists: {0:?} exists already; a bundle is written once")]
    Exists(PathBuf),
    /// Reading or writing failed.
    #[error("cannot {operation} {path:?}")]
    Io {
        /// What was being done.
        operation: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// The spec's reasons for `bundle-refused`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// The skill directory, its SKILL.md or a file in it is a symlink.
    Symlink,
    /// A file name (its path in the skill) has a character outside `[A-Za-z0-9._/-]`, or the
    /// skill's name is not a plain name.
    BadName,
    /// A file is not UTF-8.
    NotUtf8,
    /// A file holds `</skill-file>`, which would end its section of the prompt early.
    HoldsClosingTag,
    /// The role's skills add up to more than [`crate::SKILL_BYTES`].
    TooLarge,
    /// The skill has no SKILL.md.
    NoSkillMd,
    /// An entry is neither a regular file nor a directory (a FIFO, a socket, a device).
    NotAFile,
}

impl RefusalReason {
    fn text(self) -> &'static str {
        match self {
            Self::Symlink => "a symlink",
            Self::BadName => "a name outside [A-Za-z0-9._/-]",
            Self::NotUtf8 => "not UTF-8",
            Self::HoldsClosingTag => "holds </skill-file>",
            Self::TooLarge => "the role's skills add up to more than 64 KiB",
            Self::NoSkillMd => "no SKILL.md",
            Self::NotAFile => "not a regular file or directory",
        }
    }
}

impl std::fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

impl BundleError {
    /// The spec's code: `skill-not-enabled`, `bundle-refused`, `no-route`, `bundle-exists`, or
    /// `bundle-failed` for an I/O failure.
    pub fn code(&self) -> &'static str {
        match self {
            Self::SkillNotEnabled { .. } => "skill-not-enabled",
            Self::Refused { .. } | Self::Invalid(_) => "bundle-refused",
            Self::NoRoute(_) => "no-route",
            Self::Exists(_) => "bundle-exists",
            Self::Io { .. } => "bundle-failed",
        }
    }

    pub(crate) fn io(
        operation: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { operation, path, source }
    }
}
