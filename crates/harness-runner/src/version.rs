//! `PROGRAM --version`, run the way the runner runs its CLI's at start and `harness doctor` runs
//! every installed binary's: through the supervisor, so a program that hangs, prints without end
//! or leaves a process holding its stdout cannot hold the caller.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use crate::supervise::{self, Spawn, StderrTo, StdoutTo};

/// How long `--version` may take.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of its stdout that is kept.
const MAX_VERSION_OUTPUT: usize = 64 * 1024;

/// Why `PROGRAM --version` gave no version.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    /// It could not be started (not there, not executable).
    #[error("cannot run {program:?} --version: {source}")]
    Start {
        /// The program.
        program: std::path::PathBuf,
        /// The OS cause.
        #[source]
        source: std::io::Error,
    },
    /// It did not exit 0 within [`VERSION_TIMEOUT`] (the reason says how it ended).
    #[error("{0}")]
    Failed(String),
    /// What it printed is not UTF-8.
    #[error("{program:?} --version printed text that is not UTF-8")]
    NotUtf8 {
        /// The program.
        program: std::path::PathBuf,
    },
}

/// Runs `program --version` with `PATH` alone in its environment (a launcher such as Pi's finds
/// Node on it), stdin closed, in a process group of its own that is killed when it ends, under a
/// wall clock of [`VERSION_TIMEOUT`]; returns what it printed on stdout (untrimmed). `program` is
/// absolute, or a name looked up in `path`.
pub fn program_version(program: &Path, path: OsString) -> Result<String, VersionError> {
    let start = |source| VersionError::Start { program: program.to_owned(), source };
    // Its stderr is not read: no thread for it either.
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null").map_err(start)?;
    let outcome = supervise::run(Spawn {
        program,
        args: vec!["--version".into()],
        env: vec![("PATH".into(), path)],
        cwd: Path::new("/"),
        stdout: StdoutTo::Inline(MAX_VERSION_OUTPUT),
        stderr: StderrTo::Direct(null),
        deadline: VERSION_TIMEOUT,
        stop: None,
        pre_exec: None,
    })
    .map_err(start)?;
    if !outcome.success() {
        let what = format!("{program:?} --version");
        return Err(VersionError::Failed(outcome.ended.describe(&what, VERSION_TIMEOUT)));
    }
    String::from_utf8(outcome.stdout)
        .map_err(|_| VersionError::NotUtf8 { program: program.to_owned() })
}
