//! Skills: read each listed skill from the skills directory, refusing what the prompt cannot
//! carry, and render the prompt's Skills section from the bundle's own copy.
//!
//! Nothing here follows a symlink: every entry is examined with `lstat`, and files are opened
//! with `O_NOFOLLOW`, so a link swapped in after the check fails the open instead of being read.

use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Dir, FileType, Mode, OFlags};

use crate::error::{BundleError, RefusalReason};

/// The most the skills of one role may add up to: the prompt goes to the harness as one argv
/// argument, and Linux caps one argument at 128 KiB.
pub const SKILL_BYTES: usize = 64 * 1024;

/// The closing tag a skill file may not hold.
const CLOSING_TAG: &str = "</skill-file>";

/// One file of a skill: its path inside the skill and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SkillFile {
    pub(crate) rel: String,
    pub(crate) text: String,
}

/// One listed skill, its files in sorted path order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skill {
    pub(crate) name: String,
    pub(crate) files: Vec<SkillFile>,
}

fn refused(reason: RefusalReason, path: impl Into<PathBuf>) -> BundleError {
    BundleError::Refused { reason, path: path.into() }
}

/// Returns true if and only if every byte of `name` is in `[A-Za-z0-9._/-]`.
fn is_allowed_path(name: &[u8]) -> bool {
    !name.is_empty()
        && name.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-'))
}

/// Returns true if and only if `name` can name a skill directory: allowed characters, no `/`,
/// and not `.` or `..`.
fn is_skill_name(name: &str) -> bool {
    is_allowed_path(name.as_bytes()) && !name.contains('/') && name != "." && name != ".."
}

/// Reads the listed skills from `skills_dir`, in the order listed.
///
/// The walk holds each directory open and opens names relative to it with `O_NOFOLLOW`, so no
/// component is looked up twice and a symlink anywhere fails the open (`ELOOP`, `ENOTDIR`)
/// instead of being followed.
pub(crate) fn read_skills(skills_dir: &Path, names: &[String]) -> Result<Vec<Skill>, BundleError> {
    let mut total = 0usize;
    let mut skills = Vec::with_capacity(names.len());
    for name in names {
        let dir = skills_dir.join(name);
        if !is_skill_name(name) {
            return Err(refused(RefusalReason::BadName, dir));
        }
        let fd = match rustix::fs::open(&dir, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => {
                return Err(BundleError::SkillNotEnabled { skill: name.clone(), path: dir });
            }
            Err(errno) => return Err(open_error(errno, &dir)),
        };
        let mut files = Vec::new();
        collect(&fd, &dir, "", &mut files, &mut total)?;
        if !files.iter().any(|file| file.rel == "SKILL.md") {
            // A SKILL.md that is a symlink or a directory was refused in the walk already.
            return Err(refused(RefusalReason::NoSkillMd, dir.join("SKILL.md")));
        }
        files.sort_by(|a, b| a.rel.as_bytes().cmp(b.rel.as_bytes()));
        skills.push(Skill { name: name.clone(), files });
    }
    Ok(skills)
}

const DIR_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);
const FILE_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// Maps a failed open: a symlink (`ELOOP`, or `ENOTDIR` for a link opened as a directory) is a
/// refusal; anything else an I/O failure.
fn open_error(errno: rustix::io::Errno, path: &Path) -> BundleError {
    match errno {
        rustix::io::Errno::LOOP => refused(RefusalReason::Symlink, path),
        rustix::io::Errno::NOTDIR => match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => refused(RefusalReason::Symlink, path),
            _ => refused(RefusalReason::NotAFile, path),
        },
        other => BundleError::io("open", path)(other.into()),
    }
}

fn collect(
    dir_fd: &OwnedFd,
    dir: &Path,
    prefix: &str,
    files: &mut Vec<SkillFile>,
    total: &mut usize,
) -> Result<(), BundleError> {
    let entries =
        Dir::read_from(dir_fd).map_err(|errno| BundleError::io("list", dir)(errno.into()))?;
    for entry in entries {
        let entry = entry.map_err(|errno| BundleError::io("list", dir)(errno.into()))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let path = dir.join(OsStr::from_bytes(name));
        let Ok(name) = std::str::from_utf8(name) else {
            return Err(refused(RefusalReason::BadName, path));
        };
        let rel = if prefix.is_empty() { name.to_owned() } else { format!("{prefix}/{name}") };
        if !is_allowed_path(rel.as_bytes()) {
            return Err(refused(RefusalReason::BadName, path));
        }
        match entry.file_type() {
            FileType::Symlink => return Err(refused(RefusalReason::Symlink, path)),
            FileType::Directory => {
                let fd = rustix::fs::openat(dir_fd, name, DIR_FLAGS, Mode::empty())
                    .map_err(|errno| open_error(errno, &path))?;
                collect(&fd, &path, &rel, files, total)?;
            }
            FileType::RegularFile => {
                let fd = rustix::fs::openat(dir_fd, name, FILE_FLAGS, Mode::empty())
                    .map_err(|errno| open_error(errno, &path))?;
                let mut bytes = Vec::new();
                std::fs::File::from(fd)
                    .take(SKILL_BYTES as u64 + 1)
                    .read_to_end(&mut bytes)
                    .map_err(BundleError::io("read", &path))?;
                *total += bytes.len();
                if *total > SKILL_BYTES {
                    return Err(refused(RefusalReason::TooLarge, path));
                }
                let Ok(text) = String::from_utf8(bytes) else {
                    return Err(refused(RefusalReason::NotUtf8, path));
                };
                // A NUL cannot go through the command-line argument the prompt travels in: the
                // adapter's `$(cat prompt.md)` would drop it silently.
                if text.contains('\0') {
                    return Err(refused(RefusalReason::NulByte, path));
                }
                if text.contains(CLOSING_TAG) {
                    return Err(refused(RefusalReason::HoldsClosingTag, path));
                }
                files.push(SkillFile { rel, text });
            }
            // A file system that does not report types is refused rather than examined twice.
            _ => return Err(refused(RefusalReason::NotAFile, path)),
        }
    }
    Ok(())
}

/// Renders the prompt's Skills section: each file between `<skill-file skill="NAME"
/// path="REL">` and `</skill-file>`, its bytes unchanged, a newline added after the text only
/// when it does not end with one.
pub(crate) fn render_section(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "## Skills\n\nThese skills are part of your instructions. Their scripts and assets are text here, never run.\n",
    );
    for skill in skills {
        for file in &skill.files {
            out.push_str(&format!(
                "\n<skill-file skill=\"{}\" path=\"{}\">\n",
                skill.name, file.rel
            ));
            out.push_str(&file.text);
            if !file.text.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(CLOSING_TAG);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_allowed_path(b"SKILL.md"));
        assert!(is_allowed_path(b"scripts/run-1_x.sh"));
        assert!(!is_allowed_path(b"a b"));
        assert!(!is_allowed_path(b"caf\xc3\xa9"));
        assert!(!is_allowed_path(b""));
        assert!(is_skill_name("writing-1.2"));
        assert!(!is_skill_name(".."));
        assert!(!is_skill_name("a/b"));
        assert!(!is_skill_name("a b"));
    }
}
