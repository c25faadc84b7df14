//! The files ripgrep and fd open on their own: ignore files in and above the tree they search,
//! git's exclude files, and the global ignore files and config the environment points them at.
//!
//! No argument names these files, so the path rules never see them. Yet ripgrep prints every line
//! of an ignore file it cannot parse (Pi hands that stderr to the model), and any ignore file
//! decides which files a search lists. A search is therefore allowed only when every such file it
//! may read is absent or resolves to a file inside the workspace (docs/gate.md, "Ignore files").
//!
//! What ripgrep and fd read (both through the `ignore` crate, plus fd's own file; seen with the
//! ripgrep 13 Pi runs from `PATH` here, Claude Code's embedded one, and fd 10.5):
//! - in every directory they enter, and in every ancestor of the search root: `.ignore`,
//!   `.rgignore` (ripgrep), `.fdignore` (fd), `.gitignore`, and, where `.git` is, git's
//!   `info/exclude` (for a `.git` file: `gitdir:`, then that directory's `commondir`);
//! - `$HOME/.gitconfig` and `$XDG_CONFIG_HOME/git/config` (for `core.excludesFile`), the default
//!   global excludes `$XDG_CONFIG_HOME/git/ignore`, fd's `$XDG_CONFIG_HOME/fd/ignore`, with
//!   `$HOME/.config` in place of an unset `XDG_CONFIG_HOME`;
//! - ripgrep's `RIPGREP_CONFIG_PATH`, a file of extra arguments.
//!
//! The walk lists each directory once with `getdents` (names and types, no `stat` per entry) and
//! follows no symlink, as ripgrep and fd do not; a directory it may not open is skipped, since the
//! tool, running as the same user, cannot open it either.

use std::collections::HashSet;
use std::ffi::{CString, OsStr};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};
use rustix::io::Errno;

use crate::decide::{Block, Rule};
use crate::policy::Policy;
use crate::walk::{self, Resolution};

/// The ignore files ripgrep or fd read in each directory they search and in its ancestors.
const IGNORE_NAMES: [&str; 4] = [".ignore", ".rgignore", ".fdignore", ".gitignore"];
/// Git's metadata entry, whose `info/exclude` both tools read.
const DOT_GIT: &str = ".git";

/// Which search a tool runs, for what it may read on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Search {
    /// Pi's grep, Pi's find and Claude Code's Grep: ripgrep or fd honouring ignore files.
    Ignoring,
    /// Claude Code's Glob: ripgrep with `--no-ignore`, which reads no ignore file but still
    /// reads `RIPGREP_CONFIG_PATH` when Claude Code runs a ripgrep from `PATH`.
    NoIgnore,
}

/// The search a tool of `harness` named `tool` runs, if it runs one.
pub(crate) fn search_of(harness: crate::policy::Harness, tool: &str) -> Option<Search> {
    use crate::policy::Harness;
    match (harness, tool) {
        (Harness::Pi, "grep" | "find") | (Harness::ClaudeCode, "Grep") => Some(Search::Ignoring),
        (Harness::ClaudeCode, "Glob") => Some(Search::NoIgnore),
        _ => None,
    }
}

fn refuse(rule: Rule, reason: String) -> Block {
    Block { rule, reason }
}

/// Checks everything a search rooted at each of `roots` (absolute, already checked to resolve
/// inside the workspace) may read on its own.
pub(crate) fn check(policy: &Policy, search: Search, roots: &[String]) -> Result<(), Block> {
    if let Some(config) = policy.tool_env.ripgrep_config_path.as_deref() {
        return Err(refuse(
            Rule::CannotCheck,
            format!(
                "RIPGREP_CONFIG_PATH is set ({config:?}): ripgrep would take arguments from that \
                 file, which the gate cannot vouch for"
            ),
        ));
    }
    if search == Search::NoIgnore {
        return Ok(());
    }
    check_global(policy)?;
    let mut checker = Checker { policy, seen: HashSet::new() };
    for root in roots {
        let root = Path::new(root);
        for ancestor in root.ancestors().skip(1) {
            checker.ancestor(ancestor)?;
        }
        let real = match walk::resolve(root) {
            Resolution::Existing(real) => real,
            // Nothing there to search; the tool fails on it.
            _ => continue,
        };
        for ancestor in real.ancestors().skip(1) {
            checker.ancestor(ancestor)?;
        }
        checker.tree(&real)?;
    }
    Ok(())
}

/// The global files: each must be absent or resolve inside the workspace, and a git config there
/// must not name an excludes file of its own.
fn check_global(policy: &Policy) -> Result<(), Block> {
    let Some(home) = policy.home.as_deref() else {
        return Err(refuse(
            Rule::CannotCheck,
            "HOME is not set, so where ripgrep and fd look for global ignore files is unknown"
                .to_owned(),
        ));
    };
    let home = Path::new(home);
    let mut config_dirs = vec![home.join(".config")];
    if let Some(xdg) = policy.tool_env.xdg_config_home.as_deref() {
        // The `ignore` crate takes a relative XDG_CONFIG_HOME as it is, relative to the tool's
        // working directory, the workspace.
        config_dirs.push(Path::new(&policy.workspace_real).join(xdg));
    }
    let mut configs = vec![home.join(".gitconfig")];
    let mut files = Vec::new();
    for dir in &config_dirs {
        configs.push(dir.join("git/config"));
        files.push(dir.join("git/ignore"));
        files.push(dir.join("fd/ignore"));
    }
    for config in &configs {
        if inside_file(policy, config, "ripgrep's and fd's global git config")? {
            let text = std::fs::read(config).unwrap_or_default();
            if text.to_ascii_lowercase().windows(12).any(|window| window == b"excludesfile") {
                return Err(refuse(
                    Rule::CannotCheck,
                    format!(
                        "the git config {config:?} names a core.excludesFile, which ripgrep and \
                         fd would read"
                    ),
                ));
            }
        }
    }
    for file in &files {
        inside_file(policy, file, "a global ignore file ripgrep or fd reads")?;
    }
    Ok(())
}

/// Returns true if and only if `path` exists (and then it resolves inside the workspace); an
/// error when it exists and leads anywhere else, or cannot be examined.
fn inside_file(policy: &Policy, path: &Path, what: &str) -> Result<bool, Block> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => {}
        Err(error) if is_absent(&error) => return Ok(false),
        // The tool, as the same user, cannot open it either.
        Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => return Ok(false),
        Err(error) => {
            return Err(refuse(
                Rule::CannotCheck,
                format!("{what} {path:?} cannot be checked: {error}"),
            ));
        }
    }
    match walk::resolve(path) {
        Resolution::Existing(real) if real.starts_with(&policy.workspace_real) => Ok(true),
        Resolution::Existing(real) => Err(refuse(
            Rule::OutsideWorkspace,
            format!(
                "{what} {path:?} resolves to {real:?}, outside the workspace {:?}: the search \
                 would read it",
                policy.workspace_real
            ),
        )),
        // A dangling link opens nothing.
        Resolution::Dangling(_) | Resolution::Absent(_) => Ok(false),
        other => {
            Err(refuse(Rule::CannotCheck, format!("{what} {path:?} cannot be checked ({other:?})")))
        }
    }
}

fn is_absent(error: &std::io::Error) -> bool {
    matches!(error.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory)
}

struct Checker<'a> {
    policy: &'a Policy,
    /// Directories whose ignore files were checked already.
    seen: HashSet<PathBuf>,
}

impl Checker<'_> {
    /// An ancestor of the search root: its ignore files and git excludes, by name.
    fn ancestor(&mut self, dir: &Path) -> Result<(), Block> {
        if !self.seen.insert(dir.to_path_buf()) {
            return Ok(());
        }
        for name in IGNORE_NAMES {
            inside_file(self.policy, &dir.join(name), "the ignore file")?;
        }
        self.git_exclude(dir)
    }

    /// What the tools read for the `.git` in `dir`, if there is one: `.git/info/exclude` for a
    /// directory (or a link to one), and for a `.git` file the `info/exclude` of the `commondir`
    /// of the directory its `gitdir:` line names.
    fn git_exclude(&self, dir: &Path) -> Result<(), Block> {
        let dot_git = dir.join(DOT_GIT);
        let meta = match std::fs::metadata(&dot_git) {
            Ok(meta) => meta,
            Err(_) => return Ok(()),
        };
        let what = "git's exclude file";
        if meta.is_dir() {
            inside_file(self.policy, &dot_git.join("info/exclude"), what)?;
            return Ok(());
        }
        // A `.git` file: exactly the `ignore` crate's reading of it.
        let Some(first) = first_line(&dot_git) else { return Ok(()) };
        let Some(git_dir) = first.strip_prefix("gitdir: ") else { return Ok(()) };
        if !git_dir.starts_with('/') {
            return Err(refuse(
                Rule::CannotCheck,
                format!(
                    "{dot_git:?} names the relative git directory {git_dir:?}, which ripgrep and \
                     fd resolve from their own working directory"
                ),
            ));
        }
        let git_dir = Path::new(git_dir);
        let Some(common) = first_line(&git_dir.join("commondir")) else { return Ok(()) };
        let common =
            if common.starts_with('.') { git_dir.join(common) } else { PathBuf::from(common) };
        inside_file(self.policy, &common.join("info/exclude"), what)?;
        Ok(())
    }

    /// The tree below `root` (a real directory path inside the workspace), without following
    /// links: every ignore file that is a symlink must resolve inside, every `.git` too.
    ///
    /// Depth first, one `getdents` buffer for the whole walk; a directory is opened only when
    /// its turn comes, relative to its parent's descriptor, so the descriptors open at once are
    /// those of the current path (a directory with thousands of subdirectories does not open them
    /// all).
    fn tree(&mut self, root: &Path) -> Result<(), Block> {
        if !self.seen.insert(root.to_path_buf()) {
            return Ok(());
        }
        let Some(fd) = open_dir(None, root, root)? else { return Ok(()) };
        let mut buffer = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut pending: Vec<Pending> = Vec::new();
        self.directory(root, &Rc::new(fd), &mut buffer, &mut pending)?;
        while let Some(Pending { parent, name, path }) = pending.pop() {
            let Some(fd) = open_dir(Some(&parent), name.as_c_str(), &path)? else { continue };
            // The parent's descriptor closes once its last subdirectory is opened.
            drop(parent);
            self.directory(&path, &Rc::new(fd), &mut buffer, &mut pending)?;
        }
        Ok(())
    }

    /// Lists one directory: checks its ignore-file links and its `.git`, and queues its
    /// subdirectories.
    fn directory(
        &mut self,
        path: &Path,
        fd: &Rc<OwnedFd>,
        buffer: &mut [MaybeUninit<u8>],
        pending: &mut Vec<Pending>,
    ) -> Result<(), Block> {
        let mut has_git = false;
        let mut links = Vec::new();
        let mut entries = RawDir::new(&**fd, buffer);
        while let Some(entry) = entries.next() {
            let entry = entry.map_err(|errno| unreadable(path, errno))?;
            let name = entry.file_name();
            let bytes = name.to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            let mut kind = entry.file_type();
            if kind == FileType::Unknown {
                kind = match rustix::fs::statat(&**fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                    Err(_) => continue,
                };
            }
            if bytes == DOT_GIT.as_bytes() {
                has_git = true;
            } else if kind == FileType::Symlink
                && IGNORE_NAMES.iter().any(|ignore| ignore.as_bytes() == bytes)
            {
                links.push(path.join(OsStr::from_bytes(bytes)));
            }
            if kind == FileType::Directory {
                pending.push(Pending {
                    parent: Rc::clone(fd),
                    name: name.to_owned(),
                    path: path.join(OsStr::from_bytes(bytes)),
                });
            }
        }
        for link in &links {
            inside_file(self.policy, link, "the ignore file")?;
        }
        if has_git {
            self.git_exclude(path)?;
        }
        Ok(())
    }
}

/// A directory still to list: its parent's descriptor, its name there, its path for messages.
struct Pending {
    parent: Rc<OwnedFd>,
    name: CString,
    path: PathBuf,
}

/// Opens a directory without following a link; `None` when the tool could not open it either
/// (permission denied) or it went away.
fn open_dir(
    parent: Option<&OwnedFd>,
    name: impl rustix::path::Arg,
    shown: &Path,
) -> Result<Option<OwnedFd>, Block> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let opened = match parent {
        Some(parent) => rustix::fs::openat(parent, name, flags, Mode::empty()),
        None => rustix::fs::open(name, flags, Mode::empty()),
    };
    match opened {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ACCESS | Errno::PERM | Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => Ok(None),
        Err(errno) => Err(unreadable(shown, errno)),
    }
}

fn unreadable(path: &Path, errno: Errno) -> Block {
    refuse(
        Rule::CannotCheck,
        format!(
            "{path:?} cannot be listed ({}), so the ignore files a search there reads cannot \
             be checked",
            std::io::Error::from(errno)
        ),
    )
}

/// The first line of a small file, as the `ignore` crate reads `.git` and `commondir`.
fn first_line(path: &Path) -> Option<String> {
    let mut head = Vec::with_capacity(4096);
    let file = std::fs::File::open(path).ok()?;
    std::io::Read::read_to_end(&mut std::io::Read::take(file, 4096), &mut head).ok()?;
    let text = String::from_utf8(head).ok()?;
    Some(text.lines().next()?.to_owned())
}
