//! Reading a file the runner names by path (run.json, the bundle's policy.json), which the
//! session may have replaced: nothing is opened through a symbolic link at its last component,
//! nothing read blocks (a FIFO put in a file's place) or reads without bound (a link to
//! `/dev/zero`, a huge file). Everything beneath the run directory's own directories goes
//! through their handles instead (`dirs.rs`).

use std::io::Read;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};

use crate::error::RunError;

/// The most the runner reads of one file of the run directory it did not write itself.
pub(crate) const MAX_READ: u64 = 4 * 1024 * 1024;

/// Reads `path` whole, if it is a regular file of at most `cap` bytes; `None` when it does not
/// exist. A link, a FIFO, a device or a file over `cap` is an error naming it.
pub(crate) fn read_capped(path: &Path, cap: u64) -> Result<Option<Vec<u8>>, RunError> {
    let flags =
        OFlags::RDONLY.union(OFlags::NOFOLLOW).union(OFlags::NONBLOCK).union(OFlags::CLOEXEC);
    let fd = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::LOOP) => {
            return Err(RunError::invalid(
                path,
                "is a symbolic link; the runner does not follow it",
            ));
        }
        Err(error) => return Err(RunError::io("open", path)(error.into())),
    };
    let stat =
        rustix::fs::fstat(&fd).map_err(|error| RunError::io("inspect", path)(error.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(RunError::invalid(path, "is not a regular file"));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(RunError::io("read", path))?;
    if bytes.len() as u64 > cap {
        return Err(RunError::invalid(path, format!("is over {cap} bytes")));
    }
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_devices_and_big_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        assert!(read_capped(&path, 10).unwrap().is_none());
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        assert!(read_capped(&path, 10).unwrap_err().to_string().contains("symbolic link"));
        std::fs::remove_file(&path).unwrap();
        rustix::fs::mknodat(rustix::fs::CWD, &path, FileType::Fifo, Mode::from_raw_mode(0o600), 0)
            .unwrap();
        assert!(read_capped(&path, 10).unwrap_err().to_string().contains("not a regular file"));
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "0123456789x").unwrap();
        assert!(read_capped(&path, 10).unwrap_err().to_string().contains("over 10 bytes"));
        assert_eq!(read_capped(&path, 11).unwrap().unwrap(), b"0123456789x");
    }
}
