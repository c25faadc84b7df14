//! Directory handles: the run directory, its `turns/` and `session/`, and the state
//! directory, each opened once and everything beneath them reached through the descriptor.
//!
//! The session can write the run directory (with bash, or before a confinement change), so any
//! component below it may be a link it planted. Nothing here resolves a path string below a
//! handle: every open is one component relative to a held descriptor, with `openat2` and
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` (a link anywhere is `ELOOP`,
//! a `..` cannot climb out), and `O_NOFOLLOW`; every file is created `O_CREAT | O_EXCL` with its
//! final mode; renames and removals are `renameat`/`unlinkat` on the held descriptor. On a kernel
//! without `openat2` (before 5.6) the same open is `openat` with `O_NOFOLLOW` on a single
//! component that is neither `.` nor `..` nor holds a `/`, which resolves no link either. cap-std's
//! `Dir` is the model.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use harness_contract::RunDir;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::config::Run;
use crate::error::RunError;

/// A directory the runner holds open.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
    /// Where it was when opened: for messages and for the paths handed to children.
    path: PathBuf,
}

/// The run's directories, opened once after the run-directory lock.
#[derive(Debug)]
pub(crate) struct RunDirs {
    /// `RUN/`.
    pub(crate) run: Dir,
    /// `RUN/turns/`.
    pub(crate) turns: Dir,
    /// `RUN/session/`.
    pub(crate) session: Dir,
    /// The state directory (run.json `stateDir`, by default `RUN/state/`).
    pub(crate) state: Dir,
}

impl RunDirs {
    /// Opens the run directory and creates (0700) or opens its own directories beneath it; a
    /// link in the place of any of them ends the run (exit 2) naming it.
    pub(crate) fn open(run: &Run) -> Result<Self, RunError> {
        let dir = Dir::open(&run.dir)?;
        let state = match &run.file.state_dir {
            Some(state) => Dir::open_or_create(Path::new(state))?,
            None => dir.subdir(RunDir::STATE)?,
        };
        Ok(Self {
            turns: dir.subdir(RunDir::TURNS)?,
            session: dir.subdir(RunDir::SESSION)?,
            state,
            run: dir,
        })
    }
}

/// Returns `name` as one path component, or an error naming it: no `/`, not `.` or `..`, not
/// empty, no NUL.
fn component<'a>(dir: &Dir, name: &'a str) -> Result<&'a str, RunError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(RunError::invalid(dir.path.join(name), "is not one plain path component"));
    }
    Ok(name)
}

impl Dir {
    /// Opens the directory at `path` as given (the host's path; its own links are the host's).
    pub(crate) fn open(path: &Path) -> Result<Self, RunError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty())
            .map_err(|error| RunError::io("open the directory", path)(error.into()))?;
        Ok(Self { fd, path: path.to_owned() })
    }

    /// Opens the directory at `path`, creating it (0700) first when it is missing.
    fn open_or_create(path: &Path) -> Result<Self, RunError> {
        match rustix::fs::mkdir(path, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => Self::open(path),
            Err(error) => Err(RunError::io("create", path)(error.into())),
        }
    }

    /// The path of `name` beneath this directory, for messages and for children.
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The directory's path as it was opened.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Opens `name` beneath this directory with `flags`, resolving no link.
    fn open_at(&self, name: &str, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(self.fd.as_fd(), name, flags, mode, resolve) {
            Err(Errno::NOSYS) => rustix::fs::openat(self.fd.as_fd(), name, flags, mode),
            opened => opened,
        }
    }

    /// Creates (0700) or opens the directory `name` beneath this one; a link there is refused.
    pub(crate) fn subdir(&self, name: &str) -> Result<Dir, RunError> {
        let name = component(self, name)?;
        let path = self.join(name);
        match rustix::fs::mkdirat(self.fd.as_fd(), name, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(error) => return Err(RunError::io("create", &path)(error.into())),
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
        match self.open_at(name, flags, Mode::empty()) {
            Ok(fd) => Ok(Dir { fd, path }),
            // O_DIRECTORY with O_NOFOLLOW on a link is ENOTDIR: told apart by a look.
            Err(Errno::LOOP | Errno::XDEV | Errno::NOTDIR)
                if self.file_type(name) == Some(FileType::Symlink) =>
            {
                Err(RunError::invalid(&path, "is a symbolic link; the runner does not follow it"))
            }
            Err(Errno::NOTDIR) => Err(RunError::invalid(&path, "is not a directory")),
            Err(error) => Err(RunError::io("open the directory", &path)(error.into())),
        }
    }

    /// Creates (0700) or opens each directory of `relative` (`a/b/c`) in turn.
    pub(crate) fn subdirs(&self, relative: &str) -> Result<Dir, RunError> {
        let mut parts = relative.split('/').filter(|part| !part.is_empty());
        let first = parts.next().unwrap_or(".");
        let mut dir = self.subdir(first)?;
        for part in parts {
            dir = dir.subdir(part)?;
        }
        Ok(dir)
    }

    /// Creates `name` exclusively with mode 0600 (never through a link, never over what is
    /// there) and returns it open for writing.
    pub(crate) fn create(&self, name: &str) -> Result<std::fs::File, RunError> {
        let name = component(self, name)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL;
        self.open_at(name, flags, Mode::from_raw_mode(0o600))
            .map(std::fs::File::from)
            .map_err(|error| RunError::io("create", self.join(name))(error.into()))
    }

    /// Creates `name` as [`Dir::create`] does and writes `bytes`; a file that cannot be
    /// written whole (a full disk) is removed, never left behind half-written.
    pub(crate) fn write_new(&self, name: &str, bytes: &[u8]) -> Result<(), RunError> {
        let mut file = self.create(name)?;
        let written = file.write_all(bytes).and_then(|()| file.flush());
        written.map_err(|error| {
            let _ = self.remove(name);
            RunError::io("write", self.join(name))(error)
        })
    }

    /// A new file with no name in this directory (`O_TMPFILE`, 0600), which nothing else can
    /// open and which goes when its last descriptor closes; `None` where the file system has no
    /// such files.
    pub(crate) fn anonymous(&self) -> Option<std::fs::File> {
        let flags = OFlags::RDWR | OFlags::TMPFILE | OFlags::CLOEXEC;
        rustix::fs::openat(self.fd.as_fd(), ".", flags, Mode::from_raw_mode(0o600))
            .ok()
            .map(std::fs::File::from)
    }

    /// Reads `name` whole, if it is a regular file of at most `cap` bytes; `None` when it does
    /// not exist. A link, a FIFO, a device or a file over `cap` is an error naming it.
    pub(crate) fn read_capped(&self, name: &str, cap: u64) -> Result<Option<Vec<u8>>, RunError> {
        let name = component(self, name)?;
        let path = self.join(name);
        let fd = match self.open_at(name, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP | Errno::XDEV) => {
                return Err(RunError::invalid(
                    &path,
                    "is a symbolic link; the runner does not follow it",
                ));
            }
            Err(error) => return Err(RunError::io("open", &path)(error.into())),
        };
        let stat =
            rustix::fs::fstat(&fd).map_err(|error| RunError::io("inspect", &path)(error.into()))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(RunError::invalid(&path, "is not a regular file"));
        }
        let mut bytes = Vec::new();
        std::fs::File::from(fd)
            .take(cap + 1)
            .read_to_end(&mut bytes)
            .map_err(RunError::io("read", &path))?;
        if bytes.len() as u64 > cap {
            return Err(RunError::invalid(&path, format!("is over {cap} bytes")));
        }
        Ok(Some(bytes))
    }

    /// Removes the file (or link) `name`; one that is not there is no error.
    pub(crate) fn remove(&self, name: &str) -> Result<(), RunError> {
        let name = component(self, name)?;
        match rustix::fs::unlinkat(self.fd.as_fd(), name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(error) => Err(RunError::io("remove", self.join(name))(error.into())),
        }
    }

    /// Renames `from` to `to`, both in this directory, replacing `to`.
    pub(crate) fn rename(&self, from: &str, to: &str) -> Result<(), RunError> {
        let (from, to) = (component(self, from)?, component(self, to)?);
        rustix::fs::renameat(self.fd.as_fd(), from, self.fd.as_fd(), to)
            .map_err(|error| RunError::io("replace", self.join(to))(error.into()))
    }

    /// The type of `name`, not following a link; `None` when nothing is there.
    pub(crate) fn file_type(&self, name: &str) -> Option<FileType> {
        let name = component(self, name).ok()?;
        rustix::fs::statat(self.fd.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|stat| FileType::from_raw_mode(stat.st_mode))
    }

    /// Returns true if and only if something (a link included) is at `name`.
    pub(crate) fn exists(&self, name: &str) -> bool {
        self.file_type(name).is_some()
    }

    /// The names of the entries of this directory (not `.` and `..`).
    pub(crate) fn names(&self) -> Vec<OsString> {
        use std::os::unix::ffi::OsStrExt;
        let Ok(fd) = self.open_at(".", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()) else {
            return Vec::new();
        };
        let Ok(dir) = rustix::fs::Dir::new(fd) else {
            return Vec::new();
        };
        dir.flatten()
            .map(|entry| OsString::from(std::ffi::OsStr::from_bytes(entry.file_name().to_bytes())))
            .filter(|name| name != "." && name != "..")
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails loudly")]

    use std::os::unix::fs::symlink;

    use super::*;

    /// A link planted anywhere beneath the handle is never followed: not as a directory to
    /// create in, not as a file to read or write, at any depth.
    #[test]
    fn links_beneath_the_handle_are_never_followed() {
        let root = tempfile::tempdir().unwrap();
        let (run, outside) = (root.path().join("run"), root.path().join("outside"));
        std::fs::create_dir_all(run.join("session")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        symlink(&outside, run.join("session/pi-agent")).unwrap();
        symlink(&outside, run.join("turns")).unwrap();
        symlink(outside.join("secret"), run.join("session/id")).unwrap();
        let dir = Dir::open(&run).unwrap();
        let error = dir.subdirs("session/pi-agent").unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
        assert!(dir.subdir("turns").unwrap_err().to_string().contains("symbolic link"));
        let session = dir.subdir("session").unwrap();
        assert!(session.read_capped("id", 64).unwrap_err().to_string().contains("symbolic link"));
        assert!(session.create("id").is_err(), "never over a link");
        assert!(session.write_new("../escape", b"x").is_err(), "one component only");
        session.remove("id").unwrap();
        assert_eq!(std::fs::read_to_string(outside.join("secret")).unwrap(), "s");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1, "nothing written outside");
        // A directory swapped for a link after it was opened is still the directory.
        let turns_dir = root.path().join("turns-real");
        std::fs::remove_file(run.join("turns")).unwrap();
        std::fs::create_dir(run.join("turns")).unwrap();
        let turns = dir.subdir("turns").unwrap();
        std::fs::rename(run.join("turns"), &turns_dir).unwrap();
        symlink(&outside, run.join("turns")).unwrap();
        turns.write_new("0001.request", b"r").unwrap();
        assert!(turns_dir.join("0001.request").is_file());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1, "nothing written outside");
    }

    #[test]
    fn fifos_devices_and_big_files_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = Dir::open(root.path()).unwrap();
        assert!(dir.read_capped("f", 10).unwrap().is_none());
        rustix::fs::mknodat(&dir.fd, "f", FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        assert!(dir.read_capped("f", 10).unwrap_err().to_string().contains("not a regular file"));
        dir.remove("f").unwrap();
        dir.write_new("f", b"0123456789x").unwrap();
        assert!(dir.read_capped("f", 10).unwrap_err().to_string().contains("over 10 bytes"));
        assert_eq!(dir.read_capped("f", 11).unwrap().unwrap(), b"0123456789x");
        assert!(dir.write_new("f", b"again").is_err(), "never over a file that is there");
        dir.rename("f", "g").unwrap();
        assert_eq!(dir.names(), [OsString::from("g")]);
    }
}
