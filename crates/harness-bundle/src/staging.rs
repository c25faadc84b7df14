//! Writing a bundle so that it appears whole or not at all.
//!
//! The files go into a temporary sibling of the bundle directory, created 0700, each file
//! created exclusively (`O_EXCL`) with mode 0600; the sibling is then renamed into place with
//! `RENAME_NOREPLACE`, so an existing bundle (even an empty directory) is never overwritten.
//! Dropping an uncommitted staging removes the sibling, so a refusal leaves nothing behind.

use std::collections::BTreeMap;
use std::fs::DirBuilder;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;

use rustix::fs::{Mode, OFlags};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use crate::error::BundleError;

/// Bundle directories are 0700, bundle files 0600.
pub(crate) const DIR_MODE: u32 = 0o700;
pub(crate) const FILE_MODE: u32 = 0o600;

static COUNTER: AtomicU64 = AtomicU64::new(0);

const DIR_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);
/// Created exclusively (`O_EXCL` never follows a symlink) with the final mode.
const FILE_FLAGS: OFlags = OFlags::WRONLY
    .union(OFlags::CREATE)
    .union(OFlags::EXCL)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// A bundle being assembled.
#[derive(Debug)]
pub(crate) struct Staging {
    temp: PathBuf,
    /// The staging directory, held open: files are created relative to it.
    temp_fd: OwnedFd,
    target: PathBuf,
    /// The sha256 of every file written, by its path in the bundle.
    digests: BTreeMap<String, String>,
    /// Directories made so far inside the staging directory (relative), so each is made once.
    made: std::collections::BTreeSet<PathBuf>,
    committed: bool,
}

impl Staging {
    /// Starts a bundle for `target`, which must not exist yet.
    pub(crate) fn new(target: &Path) -> Result<Self, BundleError> {
        if std::fs::symlink_metadata(target).is_ok() {
            return Err(BundleError::Exists(target.to_path_buf()));
        }
        let name = target.file_name().map(|name| name.to_string_lossy().into_owned());
        let (Some(parent), Some(name)) = (target.parent(), name) else {
            return Err(BundleError::io("name", target)(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the bundle directory needs a parent and a name",
            )));
        };
        let serial = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = parent.join(format!(".{name}.partial-{}-{serial}", std::process::id()));
        // Errors name the bundle directory asked for, never the internal sibling.
        DirBuilder::new()
            .mode(DIR_MODE)
            .create(&temp)
            .map_err(BundleError::io("create", target))?;
        let temp_fd = match rustix::fs::open(&temp, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(errno) => {
                let _ = std::fs::remove_dir(&temp);
                return Err(BundleError::io("open", target)(errno.into()));
            }
        };
        Ok(Self {
            temp,
            temp_fd,
            target: target.to_path_buf(),
            digests: BTreeMap::new(),
            made: std::collections::BTreeSet::new(),
            committed: false,
        })
    }

    /// Writes the file `rel` (a `/`-separated path inside the bundle), making its directories.
    pub(crate) fn write(&mut self, rel: &str, bytes: &[u8]) -> Result<(), BundleError> {
        // Errors name the file's path in the bundle asked for, never the internal sibling.
        let path = self.target.join(rel);
        let mut made = String::new();
        let parents: Vec<&str> = rel.split('/').collect();
        for dir in &parents[..parents.len().saturating_sub(1)] {
            if !made.is_empty() {
                made.push('/');
            }
            made.push_str(dir);
            if self.made.insert(PathBuf::from(&made)) {
                rustix::fs::mkdirat(&self.temp_fd, made.as_str(), Mode::from_raw_mode(DIR_MODE))
                    .map_err(|errno| {
                        BundleError::io("create", self.target.join(&made))(errno.into())
                    })?;
            }
        }
        let fd = rustix::fs::openat(&self.temp_fd, rel, FILE_FLAGS, Mode::from_raw_mode(FILE_MODE))
            .map_err(|errno| BundleError::io("create", &path)(errno.into()))?;
        std::fs::File::from(fd).write_all(bytes).map_err(BundleError::io("write", &path))?;
        self.digests.insert(rel.to_owned(), hex_sha256(bytes));
        Ok(())
    }

    /// The sha256 of every file written so far, by path.
    pub(crate) fn digests(&self) -> &BTreeMap<String, String> {
        &self.digests
    }

    /// Renames the bundle into place; fails, leaving nothing, if the target appeared meanwhile.
    pub(crate) fn commit(mut self) -> Result<(), BundleError> {
        let result = rustix::fs::renameat_with(
            rustix::fs::CWD,
            &self.temp,
            rustix::fs::CWD,
            &self.target,
            rustix::fs::RenameFlags::NOREPLACE,
        );
        match result {
            Ok(()) => {
                self.committed = true;
                Ok(())
            }
            Err(rustix::io::Errno::EXIST) => Err(BundleError::Exists(self.target.clone())),
            Err(errno) => Err(BundleError::io("rename into", &self.target)(errno.into())),
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: the sibling is ours alone, and an error here cannot be reported.
            let _ = std::fs::remove_dir_all(&self.temp);
        }
    }
}

/// The lowercase hex sha256 of `bytes`.
pub fn hex_sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    out
}
