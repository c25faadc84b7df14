//! Where a path really leads: a component-by-component walk with `lstat` and `readlink`.
//!
//! The walk follows the kernel: a symlink's target replaces the link, an absolute target starts
//! again at `/`, and `..` inside a target applies after the link is followed (unlike Node's
//! `fs.realpathSync`, docs/gate.md). It tells three kinds of absence apart: a tail of names that do
//! not exist yet (a new file, allowed when its real parent is inside), a symlink whose target is
//! missing at any depth (dangling: always refused), and a `..` that climbs out of a directory
//! that does not exist.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Component, Path, PathBuf};

/// Linux's limit on symlinks followed in one lookup (`MAXSYMLINKS`).
const MAX_HOPS: u32 = 40;

/// Where a path leads.
#[derive(Debug)]
pub(crate) enum Resolution {
    /// Every component exists; this is the real path.
    Existing(PathBuf),
    /// The real path of the longest existing prefix, followed by names that do not exist.
    Absent(PathBuf),
    /// The path goes through a symlink whose target does not fully exist; this name inside the
    /// target is the one missing.
    Dangling(PathBuf),
    /// More than [`MAX_HOPS`] symlinks: the kernel would fail with `ELOOP`.
    Loop(PathBuf),
    /// A `..` follows a name that does not exist or is not a directory; the kernel would fail,
    /// and what it means for a tool that creates directories first cannot be known.
    ClimbsOutOfAbsent(PathBuf),
    /// The path enters `/proc`, whose links (`/proc/self`, `fd/N`, `cwd`, `root`) name different
    /// things in the gate's process and in the tool's, so what they lead to cannot be promised.
    ThroughProc(PathBuf),
    /// A component could not be examined (permission denied, name too long, ...).
    Unreadable(PathBuf, io::Error),
}

struct Step {
    name: OsString,
    /// True if this name came from a symlink's target, so its absence makes the link dangling.
    from_link: bool,
}

fn push_components(queue: &mut VecDeque<Step>, path: &Path, from_link: bool) -> bool {
    let mut absolute = false;
    let mut steps = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir => absolute = true,
            Component::CurDir => {}
            Component::ParentDir => steps.push(Step { name: OsString::from(".."), from_link }),
            Component::Normal(name) => steps.push(Step { name: name.to_owned(), from_link }),
            Component::Prefix(_) => {}
        }
    }
    for step in steps.into_iter().rev() {
        queue.push_front(step);
    }
    absolute
}

/// Walks the absolute path `path` as the kernel would, without opening anything.
pub(crate) fn resolve(path: &Path) -> Resolution {
    let mut queue = VecDeque::new();
    push_components(&mut queue, path, false);
    let mut current = PathBuf::from("/");
    let mut absent = false;
    // False once `current` is a file: the kernel then fails any further lookup with ENOTDIR.
    let mut current_is_dir = true;
    let mut hops = 0;
    while let Some(step) = queue.pop_front() {
        if step.name == OsStr::new("..") {
            if absent || !current_is_dir {
                return Resolution::ClimbsOutOfAbsent(current);
            }
            current.pop();
            continue;
        }
        let next = current.join(&step.name);
        if next.starts_with("/proc") {
            return Resolution::ThroughProc(next);
        }
        if absent {
            current = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_HOPS {
                    return Resolution::Loop(next);
                }
                let target = match std::fs::read_link(&next) {
                    Ok(target) => target,
                    Err(error) => return Resolution::Unreadable(next, error),
                };
                if push_components(&mut queue, &target, true) {
                    current = PathBuf::from("/");
                }
                // A link found while expanding another stays dangling-sensitive, and so do the
                // names of its own target, which `push_components` marked.
            }
            Ok(meta) => {
                current_is_dir = meta.is_dir();
                current = next;
            }
            Err(error) if is_absence(&error) => {
                if step.from_link {
                    return Resolution::Dangling(next);
                }
                absent = true;
                current = next;
            }
            Err(error) => return Resolution::Unreadable(next, error),
        }
    }
    if absent { Resolution::Absent(current) } else { Resolution::Existing(current) }
}

/// Returns true if and only if the error means "no such name here": `ENOENT`, or `ENOTDIR` for a
/// name under a file.
fn is_absence(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
}
