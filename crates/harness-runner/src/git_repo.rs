//! The repositories the runner's git touches, through directory descriptors (issue 20).
//!
//! The session can write its clone's `.git` (with bash, or with a write tool and a gate that
//! lets it), so git is never run on the clone: every git the runner runs works in a bare
//! repository the runner makes for that one call ([`CallRepo`]) in `STATE/git/`, whose
//! configuration the runner writes and whose `objects/info/alternates` names the clone's object
//! store, which git only reads. What git would otherwise have read of the clone the runner reads
//! itself ([`Clone`]): the branch to push and the refs that tell git what the clone already has,
//! from loose ref files and `packed-refs`, each a regular file of bounded size holding a 40- or
//! 64-hex id. What a fetch brings reaches the clone through the runner's own descriptors too:
//! the runner copies the new pack into the clone's `objects/pack` and writes the ref file.
//!
//! Every path below a directory the runner opened is resolved with `openat2` and
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`: no component may be a link,
//! none may climb out with `..`, so nothing the session plants in the clone or the state
//! directory can redirect a read or a write of the runner.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};

use crate::error::Refusal;

/// How every path below an opened directory is resolved.
const RESOLVE: ResolveFlags =
    ResolveFlags::BENEATH.union(ResolveFlags::NO_SYMLINKS).union(ResolveFlags::NO_MAGICLINKS);

/// The largest loose ref file read (an id and a newline; a symbolic ref's target).
const MAX_REF_BYTES: u64 = 4096;
/// The largest `packed-refs` read.
const MAX_PACKED_REFS_BYTES: u64 = 64 * 1024 * 1024;
/// The most loose refs read from a clone's `refs/` (entries walked, directories included).
const MAX_LOOSE_REFS: usize = 100_000;
/// How deep `refs/` is walked.
const MAX_REF_DEPTH: usize = 32;

/// Numbers the runner's own temporary names.
static SERIAL: AtomicU64 = AtomicU64::new(0);

/// Returns true if and only if `text` is an object id: 40 (SHA-1) or 64 (SHA-256) lower-case hex
/// digits.
pub(crate) fn object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Opens `path` below `dir` with no link in any component and no way out of `dir`.
fn open_beneath(dir: impl AsFd, path: &str, flags: OFlags, mode: u32) -> io::Result<OwnedFd> {
    // openat2 fails with EAGAIN when a rename elsewhere races the lookup; it is safe to retry.
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(
            dir.as_fd(),
            path,
            flags | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
            RESOLVE,
        ) {
            Err(rustix::io::Errno::AGAIN) if tries < 16 => tries += 1,
            other => return other.map_err(io::Error::from),
        }
    }
}

/// Opens directory `path` below `dir` for reading its entries and resolving below it.
fn open_dir(dir: impl AsFd, path: &str) -> io::Result<OwnedFd> {
    open_beneath(dir, path, OFlags::DIRECTORY | OFlags::RDONLY, 0)
}

/// Returns true if and only if `error` says the path is not there (a missing component, or one
/// that is a file where a directory was needed).
fn absent(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(code) if code == libc_enoent() || code == libc_enotdir())
}

fn libc_enoent() -> i32 {
    rustix::io::Errno::NOENT.raw_os_error()
}

fn libc_enotdir() -> i32 {
    rustix::io::Errno::NOTDIR.raw_os_error()
}

/// Reads `path` below `dir` if it is a regular file of at most `cap` bytes: `None` if it is not
/// there, an error if it is a link, anything but a regular file, or too large. Opened without
/// blocking, so a FIFO put there never holds the runner.
fn read_file(dir: impl AsFd, path: &str, cap: u64) -> io::Result<Option<Vec<u8>>> {
    let fd = match open_beneath(dir, path, OFlags::RDONLY | OFlags::NONBLOCK, 0) {
        Ok(fd) => fd,
        Err(error) if absent(&error) => return Ok(None),
        Err(error) => return Err(error),
    };
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{path} is not a file")));
    }
    let mut bytes = Vec::new();
    File::from(fd).take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{path} is too large")));
    }
    Ok(Some(bytes))
}

/// Creates `path` below `dir` (never over anything there) with `bytes`, mode `mode`.
fn create_file(dir: impl AsFd, path: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
    let fd = open_beneath(dir, path, OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL, mode)?;
    File::from(fd).write_all(bytes)
}

/// Creates directory `name` in `dir`; one already there is fine.
fn make_dir(dir: impl AsFd, name: &str, mode: u32) -> io::Result<()> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// The entries of `dir` (not `.` and `..`), with their types (looked up when the file system
/// does not say).
fn entries(dir: &OwnedFd) -> io::Result<Vec<(CString, FileType)>> {
    let mut found = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => FileType::from_raw_mode(
                rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?.st_mode,
            ),
            kind => kind,
        };
        found.push((name.to_owned(), kind));
    }
    Ok(found)
}

/// Removes `name` in `parent` and everything below it, following no link.
fn remove_tree(parent: &OwnedFd, name: &CStr) -> io::Result<()> {
    let Ok(text) = name.to_str() else {
        return rustix::fs::unlinkat(parent, name, AtFlags::empty()).map_err(Into::into);
    };
    match open_dir(parent, text) {
        Ok(dir) => {
            for (entry, kind) in entries(&dir)? {
                if kind == FileType::Directory {
                    remove_tree(&dir, &entry)?;
                } else {
                    rustix::fs::unlinkat(&dir, entry.as_c_str(), AtFlags::empty())?;
                }
            }
            rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR).map_err(Into::into)
        }
        Err(error) if error.raw_os_error() == Some(libc_enoent()) => Ok(()),
        // A file or a link where a directory was: removed as it is, never followed.
        Err(_) => rustix::fs::unlinkat(parent, name, AtFlags::empty()).map_err(Into::into),
    }
}

/// A clone's `.git`, opened through the workspace with no link followed.
#[derive(Debug)]
pub(crate) struct Clone {
    git: OwnedFd,
    objects: OwnedFd,
    /// `WORKSPACE/PROJECT/.git/objects`, the alternate the call's repository names.
    objects_path: PathBuf,
}

impl Clone {
    /// Opens `WORKSPACE/PROJECT/.git`. `NotAClone` if it is not there; `UnsafeGitDir` if it is
    /// anything but a plain directory (a `gitdir:` file, a link), if the project or its
    /// `objects` is a link, or if it holds `commondir`, `objects/info/alternates` or
    /// `objects/info/http-alternates` in any form (each would send git to another object store).
    pub(crate) fn open(workspace: &Path, project: &str) -> Result<Self, Refusal> {
        let plain = !project.is_empty()
            && project != "."
            && project != ".."
            && !project.contains(['/', '\n', '\0']);
        if !plain {
            return Err(Refusal::NotAClone);
        }
        let workspace_dir = rustix::fs::open(
            workspace,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|_| Refusal::NotAClone)?;
        let git = match open_dir(&workspace_dir, &format!("{project}/.git")) {
            Ok(git) => git,
            Err(error) if error.raw_os_error() == Some(libc_enoent()) => {
                return Err(Refusal::NotAClone);
            }
            Err(_) => return Err(Refusal::UnsafeGitDir),
        };
        let objects = open_dir(&git, "objects").map_err(|_| Refusal::UnsafeGitDir)?;
        let gone = |dir: &OwnedFd, path: &str| matches!(open_beneath(dir, path, OFlags::PATH, 0), Err(error) if error.raw_os_error() == Some(libc_enoent()));
        if !gone(&git, "commondir")
            || !gone(&objects, "info/alternates")
            || !gone(&objects, "info/http-alternates")
        {
            return Err(Refusal::UnsafeGitDir);
        }
        let objects_path = workspace.join(project).join(".git/objects");
        Ok(Self { git, objects, objects_path })
    }

    /// `WORKSPACE/PROJECT/.git/objects`: what the call's repository names as its alternate.
    pub(crate) fn objects_path(&self) -> &Path {
        &self.objects_path
    }

    /// The id `name` (a full ref name such as `refs/heads/main`) holds: its loose file, else its
    /// line in `packed-refs`. `None` when neither has it; an error when the loose file is a link,
    /// not a regular file, too large, or holds anything but an id (a symbolic ref included).
    pub(crate) fn read_ref(&self, name: &str) -> io::Result<Option<String>> {
        read_ref_in(&self.git, name)
    }

    /// Every id the clone's refs hold (loose and packed, peeled tags included), for git to know
    /// what the clone already has. Anything that is not a regular file holding an id is skipped.
    pub(crate) fn ref_ids(&self) -> Vec<String> {
        let mut ids = std::collections::BTreeSet::new();
        let mut budget = MAX_LOOSE_REFS;
        if let Ok(refs) = open_dir(&self.git, "refs") {
            walk_refs(&refs, 0, &mut budget, &mut ids);
        }
        if let Ok(Some(packed)) = read_file(&self.git, "packed-refs", MAX_PACKED_REFS_BYTES) {
            for line in String::from_utf8_lossy(&packed).lines() {
                let id = line.strip_prefix('^').unwrap_or(line);
                let id = id.split(' ').next().unwrap_or_default();
                if object_id(id) {
                    ids.insert(id.to_owned());
                }
            }
        }
        ids.into_iter().collect()
    }

    /// Copies what git fetched into `repo` (its packs, and any loose object) into the clone's
    /// object store: each file written under a temporary name and renamed into place, never over
    /// a file already there (same name, same content: git names packs by their checksum).
    pub(crate) fn import(&self, repo: &CallRepo) -> io::Result<()> {
        let from = open_dir(&repo.dir, "objects")?;
        let packs = open_dir(&from, "pack")?;
        let mut names: Vec<String> = entries(&packs)?
            .into_iter()
            .filter(|(_, kind)| *kind == FileType::RegularFile)
            .filter_map(|(name, _)| name.into_string().ok())
            .filter(|name| {
                name.starts_with("pack-")
                    && [".pack", ".idx", ".rev"].iter().any(|end| name.ends_with(end))
            })
            .collect();
        // The index last: git takes a pack into account once its .idx is there.
        names.sort_by_key(|name| (name.ends_with(".idx"), !name.ends_with(".pack"), name.clone()));
        if !names.is_empty() {
            make_dir(&self.objects, "pack", 0o755)?;
            let to = open_dir(&self.objects, "pack")?;
            for name in &names {
                copy_into(&packs, name, &to, name)?;
            }
        }
        for (dir, kind) in entries(&from)? {
            let Ok(dir) = dir.into_string() else { continue };
            let fan_out = dir.len() == 2 && dir.bytes().all(|b| b.is_ascii_hexdigit());
            if kind != FileType::Directory || !fan_out {
                continue;
            }
            let source = open_dir(&from, &dir)?;
            make_dir(&self.objects, &dir, 0o755)?;
            let target = open_dir(&self.objects, &dir)?;
            for (name, kind) in entries(&source)? {
                let Ok(name) = name.into_string() else { continue };
                if kind == FileType::RegularFile && object_id(&format!("{dir}{name}")) {
                    copy_into(&source, &name, &target, &name)?;
                }
            }
        }
        Ok(())
    }

    /// Writes `name` (a full ref name, already checked plain) as a loose ref holding `id`: the
    /// directories created as needed, the file written under a temporary name and renamed over
    /// the old one, so git never reads half a ref.
    pub(crate) fn write_ref(&self, name: &str, id: &str) -> io::Result<()> {
        write_ref_in(&self.git, name, id)
    }
}

/// The id ref `name` holds below the git directory `git` (see [`Clone::read_ref`]).
fn read_ref_in(git: &OwnedFd, name: &str) -> io::Result<Option<String>> {
    if let Some(bytes) = read_file(git, name, MAX_REF_BYTES)? {
        let text = String::from_utf8_lossy(&bytes);
        let id = text.strip_suffix('\n').unwrap_or(&text);
        return if object_id(id) {
            Ok(Some(id.to_owned()))
        } else {
            Err(io::Error::new(io::ErrorKind::InvalidData, format!("{name} holds no id")))
        };
    }
    let Some(packed) = read_file(git, "packed-refs", MAX_PACKED_REFS_BYTES)? else {
        return Ok(None);
    };
    Ok(String::from_utf8_lossy(&packed).lines().find_map(|line| {
        let (id, refname) = line.split_once(' ')?;
        (refname == name && object_id(id)).then(|| id.to_owned())
    }))
}

/// Walks `dir` (part of `refs/`) and collects the ids of its regular files.
fn walk_refs(
    dir: &OwnedFd,
    depth: usize,
    budget: &mut usize,
    ids: &mut std::collections::BTreeSet<String>,
) {
    let Ok(list) = entries(dir) else { return };
    for (name, kind) in list {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let Ok(name) = name.into_string() else { continue };
        match kind {
            FileType::Directory if depth < MAX_REF_DEPTH => {
                if let Ok(sub) = open_dir(dir, &name) {
                    walk_refs(&sub, depth + 1, budget, ids);
                }
            }
            FileType::RegularFile => {
                if let Ok(Some(bytes)) = read_file(dir, &name, MAX_REF_BYTES) {
                    let text = String::from_utf8_lossy(&bytes);
                    let id = text.strip_suffix('\n').unwrap_or(&text);
                    if object_id(id) {
                        ids.insert(id.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
}

/// Copies regular file `name` of `from` to `target` in `to`: written to a temporary name, then
/// renamed into place unless something is there already.
fn copy_into(from: &OwnedFd, name: &str, to: &OwnedFd, target: &str) -> io::Result<()> {
    let source = open_beneath(from, name, OFlags::RDONLY | OFlags::NONBLOCK, 0)?;
    let mut source = File::from(source);
    let temp = temporary_name();
    let written = open_beneath(to, &temp, OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL, 0o444)
        .and_then(|fd| {
            let mut file = File::from(fd);
            io::copy(&mut source, &mut file)?;
            file.sync_all()
        });
    let renamed = written.and_then(|()| {
        rustix::fs::renameat_with(to, temp.as_str(), to, target, rustix::fs::RenameFlags::NOREPLACE)
            .or_else(|error| if error == rustix::io::Errno::EXIST { Ok(()) } else { Err(error) })
            .map_err(io::Error::from)
    });
    // Whatever happened, the temporary name is gone (after a rename it names nothing).
    let _ = rustix::fs::unlinkat(to, temp.as_str(), AtFlags::empty());
    renamed
}

fn temporary_name() -> String {
    format!(".harness-tmp-{}-{}", std::process::id(), SERIAL.fetch_add(1, Ordering::Relaxed))
}

/// Writes loose ref `name` holding `id` below the git directory `git` (see [`Clone::write_ref`]).
fn write_ref_in(git: &OwnedFd, name: &str, id: &str) -> io::Result<()> {
    let (dirs, leaf) = name.rsplit_once('/').unwrap_or(("", name));
    let mut dir = git.try_clone()?;
    for part in dirs.split('/').filter(|part| !part.is_empty()) {
        make_dir(&dir, part, 0o755)?;
        dir = open_dir(&dir, part)?;
    }
    let temp = temporary_name();
    let written = create_file(&dir, &temp, format!("{id}\n").as_bytes(), 0o644).and_then(|()| {
        rustix::fs::renameat(&dir, temp.as_str(), &dir, leaf).map_err(io::Error::from)
    });
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&dir, temp.as_str(), AtFlags::empty());
    }
    written
}

/// The object format of a repository, from the length of the ids it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Sha1,
    Sha256,
}

impl Format {
    /// The format of `id` (an [`object_id`]).
    pub(crate) fn of(id: &str) -> Self {
        if id.len() == 64 { Self::Sha256 } else { Self::Sha1 }
    }
}

/// The bare repository of one git tool call, `STATE/git/call-PID-N/`: made by the runner, its
/// configuration the runner's, removed with everything in it when dropped.
#[derive(Debug)]
pub(crate) struct CallRepo {
    root: OwnedFd,
    name: CString,
    dir: OwnedFd,
    path: PathBuf,
}

impl CallRepo {
    /// Makes an empty directory for the call in `STATE/git` (created 0700 if missing; neither
    /// it nor the call's directory may be a link).
    pub(crate) fn create(state: &Path) -> io::Result<Self> {
        let state_dir = rustix::fs::open(
            state,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        make_dir(&state_dir, "git", 0o700)?;
        let root = open_dir(&state_dir, "git")?;
        let name =
            format!("call-{}-{}", std::process::id(), SERIAL.fetch_add(1, Ordering::Relaxed));
        let c_name = CString::new(name.clone()).map_err(io::Error::other)?;
        match rustix::fs::mkdirat(&root, name.as_str(), Mode::from_raw_mode(0o700)) {
            Ok(()) => {}
            // Left by an earlier runner with this process id, killed before it cleaned up.
            Err(rustix::io::Errno::EXIST) => {
                remove_tree(&root, &c_name)?;
                rustix::fs::mkdirat(&root, name.as_str(), Mode::from_raw_mode(0o700))?;
            }
            Err(error) => return Err(error.into()),
        }
        let dir = open_dir(&root, &name);
        let dir = match dir {
            Ok(dir) => dir,
            Err(error) => {
                let _ = remove_tree(&root, &c_name);
                return Err(error);
            }
        };
        Ok(Self { root, name: c_name, dir, path: state.join("git").join(name) })
    }

    /// The repository's path, for git's `--git-dir`.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Lays the bare repository out: `HEAD`, `refs/`, `objects/` with `alternates` naming
    /// `alternate` (the clone's object store), the runner's configuration, and `seeds` (ids
    /// the clone's refs hold) for the alternate-refs command the configuration names.
    pub(crate) fn init(
        &self,
        format: Format,
        alternate: &Path,
        seeds: &[String],
    ) -> io::Result<()> {
        let alternate = alternate.to_str().filter(|text| line_safe(text)).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the clone's path cannot be named to git")
        })?;
        for dir in ["objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags"] {
            rustix::fs::mkdirat(&self.dir, dir, Mode::from_raw_mode(0o700))?;
        }
        create_file(&self.dir, "HEAD", b"ref: refs/heads/main\n", 0o600)?;
        create_file(
            &self.dir,
            "config",
            crate::git_safety::config(self.path(), format)?.as_bytes(),
            0o600,
        )?;
        create_file(
            &self.dir,
            "objects/info/alternates",
            format!("{alternate}\n").as_bytes(),
            0o600,
        )?;
        let mut listed = seeds.join("\n");
        listed.push('\n');
        create_file(&self.dir, "seeds", listed.as_bytes(), 0o600)?;
        Ok(())
    }

    /// The id ref `name` of this repository holds, read as the clone's are.
    pub(crate) fn read_ref(&self, name: &str) -> io::Result<Option<String>> {
        read_ref_in(&self.dir, name)
    }

    /// Writes ref `name` of this repository.
    pub(crate) fn write_ref(&self, name: &str, id: &str) -> io::Result<()> {
        write_ref_in(&self.dir, name, id)
    }

    /// A new file `name` in the call's directory, read and write, 0600.
    pub(crate) fn create_file(&self, name: &str) -> io::Result<File> {
        open_beneath(&self.dir, name, OFlags::RDWR | OFlags::CREATE | OFlags::EXCL, 0o600)
            .map(File::from)
    }

    /// A file with no name in the call's directory (`O_TMPFILE`): nothing, git included, can
    /// reach it but through the descriptor.
    pub(crate) fn anonymous(&self) -> io::Result<File> {
        match rustix::fs::openat(
            &self.dir,
            ".",
            OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => Ok(File::from(fd)),
            // A file system without O_TMPFILE: a new file, unlinked at once.
            Err(_) => {
                let name = temporary_name();
                let file = self.create_file(&name)?;
                rustix::fs::unlinkat(&self.dir, name.as_str(), AtFlags::empty())?;
                Ok(file)
            }
        }
    }
}

impl Drop for CallRepo {
    fn drop(&mut self) {
        if let Err(error) = remove_tree(&self.root, &self.name) {
            tracing::warn!("could not remove {}: {error}", self.path.display());
        }
    }
}

/// Returns true if and only if `text` can stand on a line of git's `alternates` file and inside
/// single quotes in a shell command: no newline, no quote of either kind, no backslash.
pub(crate) fn line_safe(text: &str) -> bool {
    !text.is_empty() && !text.contains(['\n', '\r', '\'', '"', '\\', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(object_id(&"a".repeat(40)) && object_id(&"0".repeat(64)));
        for bad in
            ["", "A".repeat(40).as_str(), &"a".repeat(41), &"g".repeat(40), "ref: refs/heads/x"]
        {
            assert!(!object_id(bad), "{bad}");
        }
    }

    fn clone_dir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join("web/.git");
        std::fs::create_dir_all(git.join("objects")).unwrap();
        std::fs::create_dir_all(git.join("refs/heads")).unwrap();
        (dir, git)
    }

    #[test]
    fn refs_are_read_from_regular_files_only_with_no_link_followed() {
        let (dir, git) = clone_dir();
        let id = "1".repeat(40);
        std::fs::write(git.join("refs/heads/main"), format!("{id}\n")).unwrap();
        std::fs::write(
            git.join("packed-refs"),
            format!("# pack-refs\n{} refs/heads/old\n^{}\n", "2".repeat(40), "3".repeat(40)),
        )
        .unwrap();
        let clone = Clone::open(dir.path(), "web").unwrap();
        assert_eq!(clone.read_ref("refs/heads/main").unwrap(), Some(id.clone()));
        assert_eq!(clone.read_ref("refs/heads/old").unwrap(), Some("2".repeat(40)));
        assert_eq!(clone.read_ref("refs/heads/none").unwrap(), None);
        // A link (to a file holding an id), a symbolic ref, a FIFO: never an id.
        std::fs::write(dir.path().join("outside"), format!("{id}\n")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside"), git.join("refs/heads/link"))
            .unwrap();
        assert!(clone.read_ref("refs/heads/link").is_err());
        std::fs::write(git.join("refs/heads/sym"), "ref: refs/heads/main\n").unwrap();
        assert!(clone.read_ref("refs/heads/sym").is_err());
        rustix::fs::mknodat(
            rustix::fs::CWD,
            git.join("refs/heads/fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(clone.read_ref("refs/heads/fifo").is_err());
        // A directory of refs that is a link is not walked.
        std::os::unix::fs::symlink(dir.path(), git.join("refs/tags")).unwrap();
        assert_eq!(clone.ref_ids(), vec![id, "2".repeat(40), "3".repeat(40)]);
    }

    #[test]
    fn a_git_dir_that_names_another_repository_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let clone = dir.path().join("web");
        std::fs::create_dir_all(&clone).unwrap();
        let open = || Clone::open(dir.path(), "web").map(|_| ());
        assert_eq!(open(), Err(Refusal::NotAClone));
        std::fs::write(clone.join(".git"), "gitdir: /elsewhere\n").unwrap();
        assert_eq!(open(), Err(Refusal::UnsafeGitDir));
        std::fs::remove_file(clone.join(".git")).unwrap();
        std::os::unix::fs::symlink(dir.path(), clone.join(".git")).unwrap();
        assert_eq!(open(), Err(Refusal::UnsafeGitDir));
        std::fs::remove_file(clone.join(".git")).unwrap();
        std::fs::create_dir_all(clone.join(".git/objects/info")).unwrap();
        assert_eq!(open(), Ok(()));
        std::fs::write(clone.join(".git/commondir"), "/elsewhere\n").unwrap();
        assert_eq!(open(), Err(Refusal::UnsafeGitDir));
        std::fs::remove_file(clone.join(".git/commondir")).unwrap();
        std::fs::write(clone.join(".git/objects/info/alternates"), "/elsewhere\n").unwrap();
        assert_eq!(open(), Err(Refusal::UnsafeGitDir));
        std::fs::remove_file(clone.join(".git/objects/info/alternates")).unwrap();
        std::fs::create_dir_all(clone.join(".git/objects/info/alternates")).unwrap();
        assert_eq!(open(), Err(Refusal::UnsafeGitDir), "alternates in any form");
        std::fs::remove_dir(clone.join(".git/objects/info/alternates")).unwrap();
        std::fs::remove_dir(clone.join(".git/objects/info")).unwrap();
        std::os::unix::fs::symlink(dir.path(), clone.join(".git/objects/info")).unwrap();
        assert_eq!(open(), Err(Refusal::UnsafeGitDir), "objects/info as a link");
        std::fs::remove_file(clone.join(".git/objects/info")).unwrap();
        std::fs::rename(clone.join(".git/objects"), dir.path().join("objects")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("objects"), clone.join(".git/objects")).unwrap();
        assert_eq!(open(), Err(Refusal::UnsafeGitDir), "objects as a link");
        assert_eq!(Clone::open(dir.path(), "../web").map(|_| ()), Err(Refusal::NotAClone));
    }

    #[test]
    fn a_call_repository_is_removed_whole_and_a_ref_written_through_no_link() {
        let state = tempfile::tempdir().unwrap();
        let path;
        {
            let repo = CallRepo::create(state.path()).unwrap();
            path = repo.path().to_path_buf();
            repo.init(Format::Sha1, Path::new("/nowhere/objects"), &[]).unwrap();
            repo.write_ref("refs/heads/a/b", &"1".repeat(40)).unwrap();
            assert_eq!(
                std::fs::read_to_string(path.join("refs/heads/a/b")).unwrap(),
                format!("{}\n", "1".repeat(40))
            );
            // A link planted in the repository is removed as a link, its target untouched.
            std::os::unix::fs::symlink(state.path(), path.join("refs/link")).unwrap();
            assert!(repo.write_ref("refs/link/x", &"1".repeat(40)).is_err());
            // The push bundle's file has no name: the directory gains no entry for it.
            let names = || {
                let mut names: Vec<_> = std::fs::read_dir(&path)
                    .unwrap()
                    .map(|entry| entry.unwrap().file_name())
                    .collect();
                names.sort();
                names
            };
            let before = names();
            let mut file = repo.anonymous().unwrap();
            file.write_all(b"bundle").unwrap();
            assert_eq!(names(), before);
            assert_eq!(file.metadata().unwrap().len(), 6);
        }
        assert!(!path.exists());
        assert!(state.path().join("git").is_dir());
    }
}
