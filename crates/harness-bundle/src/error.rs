//! The bundle's refusals and failures, each with a stable code (docs/bundle.md lists them all).

use std::path::PathBuf;

use camino::Utf8PathBuf;

/// Why no bundle was written, or why a bundle is not the one its manifest and digest describe.
/// A build leaves nothing behind in any case.
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
    /// A skill cannot go into the prompt as it is (`bundle-refused`, which the launcher reports
    /// as skill-refused: every case is about a skill's own files).
    #[error("bundle-refused: {reason}: {path:?}")]
    Refused {
        /// What is wrong, in words.
        reason: RefusalReason,
        /// The offending file or directory.
        path: PathBuf,
    },
    /// The role lists the same skill twice (`skill-duplicate`).
    #[error("skill-duplicate: resolved.skills lists {skill:?} more than once")]
    DuplicateSkill {
        /// The skill listed twice.
        skill: String,
    },
    /// A route var is missing or names no model (`no-route`).
    #[error("no-route: {0}")]
    NoRoute(String),
    /// A path the session runs from is relative (`path-not-absolute`).
    #[error("path-not-absolute: {field} {path:?} is not an absolute path")]
    NotAbsolute {
        /// The request field (`dir`, `session.workspace`, `install.gate`, ...).
        field: &'static str,
        /// The path as given.
        path: PathBuf,
    },
    /// A path the bundle's files point at holds `.` or `..` (`path-not-normal`).
    #[error(
        "path-not-normal: {field} {path:?} holds . or ..; give the path without them (the manifest and the CLI's permission rules hold it as text)"
    )]
    NotNormal {
        /// The request field (`dir`, `install.gate`, ...).
        field: &'static str,
        /// The path as given.
        path: Utf8PathBuf,
    },
    /// A path the bundle's JSON files or a CLI take as text is not UTF-8 (`path-not-utf8`).
    #[error(
        "path-not-utf8: {field} {path:?} is not UTF-8; the bundle's JSON files and the CLIs take paths as text"
    )]
    NotUtf8 {
        /// What the path is (`--out, made absolute`, `the request file, made absolute`, ...).
        field: &'static str,
        /// The path as given.
        path: PathBuf,
    },
    /// The install layout does not point at a whole install (`install-invalid`): with a prefix,
    /// that prefix is not one `cargo xtask dist` installed into.
    #[error("install-invalid: {}", install_problem(prefix.as_deref(), *missing, *of, first))]
    Install {
        /// The install prefix, if the layout is the one under a prefix.
        prefix: Option<Utf8PathBuf>,
        /// How many of the install's files are missing.
        missing: usize,
        /// How many files an install holds.
        of: usize,
        /// The first missing file.
        first: Utf8PathBuf,
    },
    /// The workspace cannot be the session's workspace (`workspace-invalid`).
    #[error("workspace-invalid: session.workspace {path:?} {problem}")]
    Workspace {
        /// The workspace as given.
        path: PathBuf,
        /// What is wrong with it, in words.
        problem: String,
    },
    /// The rendered prompt.md cannot go to the CLI as one argument (`prompt-too-large`).
    #[error(
        "prompt-too-large: prompt.md would be {bytes} bytes, over the {limit} bytes one command-line argument may take here (contract, session section and skill tags included)"
    )]
    PromptTooLarge {
        /// The rendered prompt's size.
        bytes: usize,
        /// [`crate::PROMPT_BYTES`].
        limit: usize,
    },
    /// The contract text cannot reach the CLI as it is (`contract-invalid`).
    #[error("contract-invalid: contract {0}")]
    Contract(String),
    /// The request asks for land_work against what the broker said (`land-mismatch`).
    #[error(
        "land-mismatch: land is {requested} but resolved.landHeld is {held}; the bundle takes land from the resolved instance"
    )]
    LandMismatch {
        /// What the request said.
        requested: bool,
        /// What the resolved instance says.
        held: bool,
    },
    /// The request is not usable as a request: not JSON of the right shape, an unknown harness,
    /// no install prefix (`request-invalid`).
    #[error("request-invalid: {0}")]
    Request(String),
    /// The bundle directory exists already; a bundle is never overwritten (`bundle-exists`).
    #[error("bundle-exists: {0:?} exists already; a bundle is written once")]
    Exists(PathBuf),
    /// manifest.json is not a manifest this build can check (`manifest-invalid`).
    #[error("manifest-invalid: {path:?}: {problem}")]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The bundle is not the one sealed by its digest: manifest.json, a file, a mode or an
    /// asset changed, or a file was added (`bundle-changed`).
    #[error("bundle-changed: {0}")]
    Changed(String),
    /// The policy's workspace is not the run's (`workspace-mismatch`).
    #[error(
        "workspace-mismatch: run.json's workspace {run:?} is not policy.json's workspace {policy:?} (both resolved)"
    )]
    WorkspaceMismatch {
        /// run.json's workspace.
        run: PathBuf,
        /// policy.json's workspace.
        policy: PathBuf,
    },
    /// The CLI is not the version the bundle was built and its gate proven for
    /// (`cli-version-mismatch`).
    #[error(
        "cli-version-mismatch: {cli:?} --version prints {actual:?}, but the bundle's manifest records cliVersion {expected:?}"
    )]
    CliVersion {
        /// The CLI run.json names.
        cli: PathBuf,
        /// What the manifest records.
        expected: String,
        /// What the CLI printed (trimmed).
        actual: String,
    },
    /// A value could not be serialized (`bundle-failed`): nothing is written in its place.
    #[error("bundle-failed: cannot serialize {what}: {source}")]
    Serialize {
        /// The file being produced.
        what: &'static str,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// Reading or writing failed (`bundle-failed`). The path is the target (the bundle's own
    /// path, never the temporary sibling it is assembled in); the OS cause follows.
    #[error("bundle-failed: cannot {operation} {path:?}: {source}")]
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
    /// A file holds a NUL byte, which cannot go through a command-line argument.
    NulByte,
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
            Self::NulByte => "holds a NUL byte",
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
    /// The stable code: the spec's `skill-not-enabled`, `bundle-refused`, `no-route`,
    /// `bundle-exists`, `bundle-failed`, and this build's own for what the spec does not name.
    pub fn code(&self) -> &'static str {
        match self {
            Self::SkillNotEnabled { .. } => "skill-not-enabled",
            Self::Refused { .. } => "bundle-refused",
            Self::DuplicateSkill { .. } => "skill-duplicate",
            Self::NoRoute(_) => "no-route",
            Self::NotAbsolute { .. } => "path-not-absolute",
            Self::NotUtf8 { .. } => "path-not-utf8",
            Self::NotNormal { .. } => "path-not-normal",
            Self::Install { .. } => "install-invalid",
            Self::Workspace { .. } => "workspace-invalid",
            Self::PromptTooLarge { .. } => "prompt-too-large",
            Self::Contract(_) => "contract-invalid",
            Self::LandMismatch { .. } => "land-mismatch",
            Self::Request(_) => "request-invalid",
            Self::Exists(_) => "bundle-exists",
            Self::Manifest { .. } => "manifest-invalid",
            Self::Changed(_) => "bundle-changed",
            Self::WorkspaceMismatch { .. } => "workspace-mismatch",
            Self::CliVersion { .. } => "cli-version-mismatch",
            Self::Serialize { .. } | Self::Io { .. } => "bundle-failed",
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

/// `path` as UTF-8, or `path-not-utf8` naming `field`: how a host turns a path it got as bytes
/// (an argument, a directory listing) into one a [`crate::BundleRequest`] takes.
pub fn utf8_path(field: &'static str, path: PathBuf) -> Result<Utf8PathBuf, BundleError> {
    Utf8PathBuf::from_path_buf(path).map_err(|path| BundleError::NotUtf8 { field, path })
}

fn install_problem(
    prefix: Option<&camino::Utf8Path>,
    missing: usize,
    of: usize,
    first: &camino::Utf8Path,
) -> String {
    match prefix {
        Some(prefix) => format!(
            "{prefix:?} is not a harness install prefix: {missing} of the {of} files an install holds are missing ({first:?} first); `cargo xtask dist --prefix {prefix}` installs one"
        ),
        None => format!(
            "the install layout is not whole: {missing} of its {of} files are missing ({first:?} first)"
        ),
    }
}
