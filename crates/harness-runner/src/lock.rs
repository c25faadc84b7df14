//! The run-directory lock: one runner per run directory.
//!
//! `RUN/runner.lock` is opened (created 0600 if missing, never through a symlink) and locked
//! with `flock(LOCK_EX | LOCK_NB)` before the runner writes anything in the run directory or
//! claims the role. The lock is held for the runner's life and released by the kernel when the
//! descriptor closes, however the process ends (a SIGKILL included), so a stale lock cannot
//! exist; the empty file stays, since deleting it would let two runners lock two different
//! files. The descriptor is close-on-exec, so an adapter (or anything it leaves behind) never
//! holds the lock.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, FlockOperation, Mode, OFlags};

use crate::error::RunError;

/// The lock file's name in the run directory.
pub const LOCK_FILE: &str = "runner.lock";

/// The held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub(crate) struct RunLock {
    _fd: OwnedFd,
}

/// Locks `dir` for this runner, or fails (exit 2) naming the lock another runner holds.
pub(crate) fn lock_run_dir(dir: &Path) -> Result<RunLock, RunError> {
    let path: PathBuf = dir.join(LOCK_FILE);
    let bad = |what: &'static str, error: rustix::io::Errno| RunError::Io {
        operation: what,
        path: path.clone(),
        source: error.into(),
    };
    let flags = OFlags::RDWR
        .union(OFlags::CREATE)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::NONBLOCK)
        .union(OFlags::CLOEXEC);
    let fd = rustix::fs::open(&path, flags, Mode::from_raw_mode(0o600))
        .map_err(|error| bad("open the run-directory lock", error))?;
    let stat =
        rustix::fs::fstat(&fd).map_err(|error| bad("inspect the run-directory lock", error))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(RunError::invalid(&path, "the run-directory lock is not a regular file"));
    }
    match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(RunLock { _fd: fd }),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(RunError::LockHeld { path }),
        Err(error) => Err(bad("lock", error)),
    }
}
