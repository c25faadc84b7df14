//! Verifying a bundle against its manifest and digest, and the sealed bundle the runner keeps.
//!
//! The bundle directory is walked once, each directory held open and each name opened relative
//! to it with `O_NOFOLLOW`, so nothing outside the bundle is ever read through it: a manifest key
//! is only compared with what the walk found, never opened, and a key that is not a plain
//! relative path refuses the manifest. The installed assets (the gate, the extension or the
//! typed tools' server, the unslop files, the adapter script) are read at the absolute paths the manifest
//! records.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Dir, FileType, Mode, OFlags};
use serde_json::Value;

use crate::error::BundleError;
use crate::staging::{DIR_MODE, FILE_MODE, hex_sha256};

/// The most bytes one bundle file may have: the prompt is capped far below it.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

const DIR_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);
const FILE_FLAGS: OFlags =
    OFlags::RDONLY.union(OFlags::NOFOLLOW).union(OFlags::NONBLOCK).union(OFlags::CLOEXEC);

/// One difference between a bundle and its manifest or digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// manifest.json does not hash to the digest given.
    Digest {
        /// The digest given (run.json's `bundleDigest`, `--digest`).
        expected: String,
        /// What manifest.json hashes to.
        actual: String,
    },
    /// A file whose bytes no longer match the recorded sha256.
    Changed {
        /// The file, relative to the bundle (or the asset's role and path).
        file: String,
        /// What the manifest records.
        recorded: String,
        /// What the file hashes to now.
        actual: String,
    },
    /// A file the manifest records that is gone (or cannot be read).
    Missing(String),
    /// A file in the bundle the manifest does not record.
    Unrecorded(String),
    /// A bundle file or directory whose mode is not the one the build gives it.
    Mode {
        /// The file or directory, relative to the bundle (`.` for the bundle itself).
        file: String,
        /// Its mode now.
        mode: u32,
        /// 0600 for a file, 0700 for a directory.
        expected: u32,
    },
    /// A bundle entry that is neither a regular file nor a directory (a symlink, a FIFO, ...).
    NotAFile(String),
    /// A bundle file with more than one hard link: the same bytes could be changed through a
    /// name outside the bundle (in the workspace, say) while the gate reads them.
    HardLinked {
        /// The file, relative to the bundle.
        file: String,
        /// Its link count.
        links: u64,
    },
    /// An installed asset the manifest records (the gate, an extension, the adapter, ...) is
    /// gone or cannot be read: the install moved or was removed since the build.
    AssetMissing {
        /// Its role in the manifest (`gate`, `adapter`, ...).
        role: String,
        /// Where the manifest says it is.
        path: String,
    },
    /// An installed asset's bytes are not the ones the manifest records: the install changed
    /// (an upgrade in place) since the build.
    AssetChanged {
        /// Its role in the manifest.
        role: String,
        /// Where it is.
        path: String,
        /// What the manifest records.
        recorded: String,
        /// What it hashes to now.
        actual: String,
    },
    /// The manifest's `adapter` is not the adapter asset it seals.
    Adapter {
        /// The manifest's `adapter`.
        adapter: String,
        /// The sealed adapter asset's path.
        sealed: String,
    },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Digest { expected, actual } => {
                write!(f, "manifest.json: sha256 {actual}, the bundle digest is {expected}")
            }
            Self::Changed { file, recorded, actual } => {
                write!(f, "{file}: sha256 {actual}, the manifest records {recorded}")
            }
            Self::Missing(file) => write!(f, "{file}: missing"),
            Self::Unrecorded(file) => write!(f, "{file}: not in the manifest"),
            Self::Mode { file, mode, expected } => {
                write!(f, "{file}: mode {mode:04o}, the bundle's is {expected:04o}")
            }
            Self::NotAFile(file) => write!(f, "{file}: not a regular file or directory"),
            Self::HardLinked { file, links } => {
                write!(f, "{file}: {links} hard links, the bundle's files have one")
            }
            Self::AssetMissing { role, path } => write!(f, "{role} ({path}): missing"),
            Self::AssetChanged { role, path, recorded, actual } => {
                write!(f, "{role} ({path}): sha256 {actual}, the manifest records {recorded}")
            }
            Self::Adapter { adapter, sealed } => {
                write!(f, "adapter: the manifest runs {adapter}, but seals {sealed}")
            }
        }
    }
}

impl Mismatch {
    /// True if and only if this is about the install the bundle points into, not the bundle.
    pub fn is_install(&self) -> bool {
        matches!(self, Self::AssetMissing { .. } | Self::AssetChanged { .. })
    }
}

/// What to do when every mismatch is about the install: the bundle itself is as it was built.
pub const INSTALL_HINT: &str = "the bundle is as built, but the install it points into moved, was removed or changed since (an upgrade?); build a new bundle against the current install";

/// What [`verify_bundle`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Bundle files and installed assets checked.
    pub checked: usize,
    /// The sha256 of manifest.json as it is now: the bundle's digest if nothing else differs.
    pub digest: String,
    /// Every difference found: the digest first, then bundle files in path order, then assets.
    pub mismatches: Vec<Mismatch>,
}

/// What the walk of the bundle directory found.
#[derive(Debug, Default)]
struct Tree {
    /// Regular files with mode 0600: path → bytes.
    files: BTreeMap<String, Vec<u8>>,
    /// Everything that is not as the build leaves it, except digests.
    problems: Vec<Mismatch>,
}

/// The parts of manifest.json verification reads.
#[derive(Debug)]
struct Parsed {
    files: BTreeMap<String, String>,
    /// Asset role → (path, sha256).
    assets: BTreeMap<String, (PathBuf, String)>,
    adapter: Option<PathBuf>,
    cli_version: String,
}

/// Returns true if and only if `key` is a plain relative path inside the bundle: `/`-separated
/// names, none empty, `.` or `..`.
fn is_plain_relative(key: &str) -> bool {
    !key.is_empty()
        && !key.contains('\0')
        && !key.contains('\\')
        && key.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
        && Path::new(key).components().all(|c| matches!(c, Component::Normal(_)))
}

fn parse_manifest(path: &Path, bytes: &[u8]) -> Result<Parsed, BundleError> {
    let bad = |problem: String| BundleError::Manifest { path: path.to_path_buf(), problem };
    let manifest: Value =
        serde_json::from_slice(bytes).map_err(|error| bad(format!("not JSON: {error}")))?;
    let files_value =
        manifest["files"].as_object().ok_or_else(|| bad("no files object".to_owned()))?;
    let mut files = BTreeMap::new();
    for (key, digest) in files_value {
        if !is_plain_relative(key) || key == "manifest.json" {
            return Err(bad(format!("the files key {key:?} is not a plain relative path")));
        }
        let digest =
            digest.as_str().ok_or_else(|| bad(format!("the digest of {key:?} is not a string")))?;
        files.insert(key.clone(), digest.to_owned());
    }
    let mut assets = BTreeMap::new();
    let assets_value =
        manifest["assets"].as_object().ok_or_else(|| bad("no assets object".to_owned()))?;
    for (role, asset) in assets_value {
        let (Some(asset_path), Some(digest)) = (asset["path"].as_str(), asset["sha256"].as_str())
        else {
            return Err(bad(format!("the asset {role:?} has no path and sha256")));
        };
        if !Path::new(asset_path).is_absolute() {
            return Err(bad(format!("the asset {role:?} has a relative path {asset_path:?}")));
        }
        assets.insert(role.clone(), (PathBuf::from(asset_path), digest.to_owned()));
    }
    if !assets.contains_key("adapter") {
        return Err(bad("no adapter asset: the adapter script is not sealed".to_owned()));
    }
    let adapter = manifest["adapter"].as_str().map(PathBuf::from);
    let cli_version = manifest["cliVersion"]
        .as_str()
        .ok_or_else(|| bad("no cliVersion: the CLI is not sealed".to_owned()))?
        .to_owned();
    Ok(Parsed { files, assets, adapter, cli_version })
}

/// Reads manifest.json: a regular file, never through a symlink, size-capped.
fn read_manifest(dir: &Path) -> Result<Vec<u8>, BundleError> {
    let path = dir.join("manifest.json");
    let fd = rustix::fs::open(&path, FILE_FLAGS, Mode::empty())
        .map_err(|errno| BundleError::io("open", &path)(errno.into()))?;
    read_regular(fd).map_err(BundleError::io("read", &path))
}

fn read_regular(fd: OwnedFd) -> std::io::Result<Vec<u8>> {
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd).take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::other("larger than a bundle file can be"));
    }
    Ok(bytes)
}

fn mode_of(fd: &OwnedFd) -> std::io::Result<(FileType, u32, u64)> {
    let stat = rustix::fs::fstat(fd)?;
    Ok((FileType::from_raw_mode(stat.st_mode), stat.st_mode & 0o7777, stat.st_nlink))
}

/// Walks the bundle directory without following a link; reads only the files `recorded` names.
fn walk(dir: &Path, recorded: &BTreeSet<&str>) -> Result<Tree, BundleError> {
    let fd = rustix::fs::open(dir, DIR_FLAGS, Mode::empty())
        .map_err(|errno| BundleError::io("open", dir)(errno.into()))?;
    let mut tree = Tree::default();
    let (_, mode, _) = mode_of(&fd).map_err(BundleError::io("examine", dir))?;
    if mode != DIR_MODE {
        tree.problems.push(Mismatch::Mode { file: ".".to_owned(), mode, expected: DIR_MODE });
    }
    walk_dir(&fd, dir, "", recorded, &mut tree)?;
    Ok(tree)
}

fn walk_dir(
    fd: &OwnedFd,
    dir: &Path,
    prefix: &str,
    recorded: &BTreeSet<&str>,
    tree: &mut Tree,
) -> Result<(), BundleError> {
    let entries = Dir::read_from(fd).map_err(|errno| BundleError::io("list", dir)(errno.into()))?;
    for entry in entries {
        let entry = entry.map_err(|errno| BundleError::io("list", dir)(errno.into()))?;
        let name_bytes = entry.file_name().to_bytes();
        if name_bytes == b"." || name_bytes == b".." {
            continue;
        }
        let name = String::from_utf8_lossy(name_bytes).into_owned();
        let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        let path = dir.join(&name);
        match entry.file_type() {
            FileType::Directory => {
                let sub = rustix::fs::openat(fd, entry.file_name(), DIR_FLAGS, Mode::empty())
                    .map_err(|errno| BundleError::io("open", &path)(errno.into()))?;
                let (_, mode, _) = mode_of(&sub).map_err(BundleError::io("examine", &path))?;
                if mode != DIR_MODE {
                    tree.problems.push(Mismatch::Mode {
                        file: rel.clone(),
                        mode,
                        expected: DIR_MODE,
                    });
                }
                walk_dir(&sub, &path, &rel, recorded, tree)?;
            }
            FileType::RegularFile => {
                if rel != "manifest.json" && !recorded.contains(rel.as_str()) {
                    tree.problems.push(Mismatch::Unrecorded(rel));
                    continue;
                }
                let file = rustix::fs::openat(fd, entry.file_name(), FILE_FLAGS, Mode::empty())
                    .map_err(|errno| BundleError::io("open", &path)(errno.into()))?;
                let (kind, mode, links) =
                    mode_of(&file).map_err(BundleError::io("examine", &path))?;
                if kind != FileType::RegularFile {
                    tree.problems.push(Mismatch::NotAFile(rel));
                    continue;
                }
                if links != 1 {
                    tree.problems.push(Mismatch::HardLinked { file: rel.clone(), links });
                }
                if mode != FILE_MODE {
                    tree.problems.push(Mismatch::Mode {
                        file: rel.clone(),
                        mode,
                        expected: FILE_MODE,
                    });
                }
                let bytes = read_regular(file).map_err(BundleError::io("read", &path))?;
                tree.files.insert(rel, bytes);
            }
            // A symlink, FIFO, socket or device is never followed or read; a file system that
            // does not report types is refused rather than examined twice.
            _ => tree.problems.push(Mismatch::NotAFile(rel)),
        }
    }
    Ok(())
}

/// What [`check`] found, beyond the report: the parsed manifest, the bundle files read, and the
/// manifest bytes the digest was computed from.
struct Checked {
    verification: Verification,
    parsed: Parsed,
    files: BTreeMap<String, Vec<u8>>,
    manifest: Vec<u8>,
}

/// Checks everything the manifest seals.
fn check(dir: &Path, digest: Option<&str>) -> Result<Checked, BundleError> {
    let manifest_path = dir.join("manifest.json");
    let manifest_bytes = read_manifest(dir)?;
    let actual_digest = hex_sha256(&manifest_bytes);
    let mut mismatches = Vec::new();
    if let Some(expected) = digest
        && expected != actual_digest
    {
        mismatches.push(Mismatch::Digest {
            expected: expected.to_owned(),
            actual: actual_digest.clone(),
        });
    }
    let parsed = parse_manifest(&manifest_path, &manifest_bytes)?;
    let recorded: BTreeSet<&str> = parsed.files.keys().map(String::as_str).collect();
    let tree = walk(dir, &recorded)?;
    let mut checked = 0;
    for (rel, recorded_digest) in &parsed.files {
        checked += 1;
        match tree.files.get(rel) {
            Some(bytes) => {
                let actual = hex_sha256(bytes);
                if &actual != recorded_digest {
                    mismatches.push(Mismatch::Changed {
                        file: rel.clone(),
                        recorded: recorded_digest.clone(),
                        actual,
                    });
                }
            }
            None if tree
                .problems
                .iter()
                .any(|problem| problem == &Mismatch::NotAFile(rel.clone())) => {}
            None => mismatches.push(Mismatch::Missing(rel.clone())),
        }
    }
    mismatches.extend(tree.problems);
    for (role, (path, recorded_digest)) in &parsed.assets {
        checked += 1;
        let (role, path_text) = (role.clone(), path.display().to_string());
        match std::fs::read(path).map(|bytes| hex_sha256(&bytes)) {
            Ok(actual) => {
                if &actual != recorded_digest {
                    mismatches.push(Mismatch::AssetChanged {
                        role,
                        path: path_text,
                        recorded: recorded_digest.clone(),
                        actual,
                    });
                }
            }
            Err(_) => mismatches.push(Mismatch::AssetMissing { role, path: path_text }),
        }
    }
    let sealed_adapter = parsed.assets.get("adapter").map(|(path, _)| path.clone());
    if parsed.adapter != sealed_adapter {
        mismatches.push(Mismatch::Adapter {
            adapter: parsed.adapter.as_deref().map(|p| p.display().to_string()).unwrap_or_default(),
            sealed: sealed_adapter.map(|p| p.display().to_string()).unwrap_or_default(),
        });
    }
    let verification = Verification { checked, digest: actual_digest, mismatches };
    Ok(Checked { verification, parsed, files: tree.files, manifest: manifest_bytes })
}

/// Checks a bundle against its manifest, and the manifest against `digest` when given: every
/// bundle file's and asset's sha256 (the adapter script included), that nothing unrecorded is
/// in the bundle, that every entry is a regular file (0600) or directory (0700), and that the
/// manifest's `adapter` is the adapter it seals. A manifest that cannot be checked (not JSON, a
/// `files` key that is not a plain relative path, no sealed adapter or CLI version) is an error
/// (`manifest-invalid`), not a mismatch. Without `digest`, an edit of manifest.json's own fields
/// (model, cliTools, ...) goes unseen: the digest is what seals them.
pub fn verify_bundle(
    dir: impl AsRef<Path>,
    digest: Option<&str>,
) -> Result<Verification, BundleError> {
    let dir = dir.as_ref();
    check(dir, digest).map(|checked| checked.verification)
}

/// A bundle the runner verified against its digest at start, and checks again before each turn.
#[derive(Debug)]
pub struct SealedBundle {
    dir: PathBuf,
    digest: String,
    manifest: Vec<u8>,
    policy: Vec<u8>,
    cli_version: String,
}

/// Every mismatch on one line, and what to do when they are all about the install.
fn describe(mismatches: &[Mismatch]) -> String {
    let listed: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
    let text = listed.join("; ");
    if mismatches.iter().all(Mismatch::is_install) {
        format!("{text}; {INSTALL_HINT}")
    } else {
        text
    }
}

fn changed(mismatches: &[Mismatch]) -> BundleError {
    BundleError::Changed(describe(mismatches))
}

impl Verification {
    /// None when the bundle checks out; else every mismatch on one line, ending with
    /// [`INSTALL_HINT`] when they are all about the install the bundle points into.
    pub fn describe(&self) -> Option<String> {
        (!self.mismatches.is_empty()).then(|| describe(&self.mismatches))
    }
}

impl SealedBundle {
    /// Verifies the bundle in `dir` against `digest` (run.json's `bundleDigest`): everything
    /// [`verify_bundle`] checks. Any mismatch is `bundle-changed`, naming each.
    pub fn open(dir: impl AsRef<Path>, digest: &str) -> Result<Self, BundleError> {
        let dir = dir.as_ref();
        let Checked { verification, parsed, files, manifest } = check(dir, Some(digest))?;
        if !verification.mismatches.is_empty() {
            return Err(changed(&verification.mismatches));
        }
        let Some(policy) = files.get("policy.json") else {
            return Err(BundleError::Changed("policy.json: missing".to_owned()));
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            digest: digest.to_owned(),
            manifest,
            policy: policy.clone(),
            cli_version: parsed.cli_version,
        })
    }

    /// manifest.json's bytes as verified: the runner takes the model, adapter, tools and
    /// assets from these, never from the file again.
    pub fn manifest_bytes(&self) -> &[u8] {
        &self.manifest
    }

    /// The manifest's `cliVersion`.
    pub fn cli_version(&self) -> &str {
        &self.cli_version
    }

    /// Refuses a CLI whose `--version` printed (trimmed) anything but the manifest's
    /// `cliVersion` (`cli-version-mismatch`, naming both).
    pub fn check_cli_version(
        &self,
        cli: impl AsRef<Path>,
        printed: &str,
    ) -> Result<(), BundleError> {
        let cli = cli.as_ref();
        let actual = printed.trim();
        if actual == self.cli_version {
            return Ok(());
        }
        Err(BundleError::CliVersion {
            cli: cli.to_path_buf(),
            expected: self.cli_version.clone(),
            actual: actual.to_owned(),
        })
    }

    /// Refuses a run whose workspace is not the policy's, both resolved (`workspace-mismatch`):
    /// the adapter runs the CLI in the run's workspace, and the gate confines it to the policy's.
    pub fn check_workspace(&self, workspace: impl AsRef<Path>) -> Result<(), BundleError> {
        let workspace = workspace.as_ref();
        let policy: Value =
            serde_json::from_slice(&self.policy).map_err(|error| BundleError::Manifest {
                path: self.dir.join("policy.json"),
                problem: format!("not JSON: {error}"),
            })?;
        let policy_workspace = PathBuf::from(policy["workspace"].as_str().unwrap_or_default());
        let resolve = |path: &Path| std::fs::canonicalize(path).ok();
        match (resolve(workspace), resolve(&policy_workspace)) {
            (Some(run), Some(sealed)) if run == sealed => Ok(()),
            _ => Err(BundleError::WorkspaceMismatch {
                run: workspace.to_path_buf(),
                policy: policy_workspace,
            }),
        }
    }

    /// Checks again the bundle files a session could have changed since the start (it runs as
    /// the user the bundle belongs to): manifest.json against the digest, every bundle file's
    /// bytes and mode (policy.json, which the gate reads on every call, above all), and nothing
    /// added. Any difference is `bundle-changed`, naming each. The installed assets are checked
    /// at start only: the install is the host's, not the session's, and a gate that goes
    /// missing during a run is blocked by the harness itself (the S0 lines).
    pub fn recheck(&self) -> Result<(), BundleError> {
        let manifest_path = self.dir.join("manifest.json");
        let manifest = read_manifest(&self.dir)?;
        let mut mismatches = Vec::new();
        let actual = hex_sha256(&manifest);
        if actual != self.digest {
            mismatches.push(Mismatch::Digest { expected: self.digest.clone(), actual });
            return Err(changed(&mismatches));
        }
        let parsed = parse_manifest(&manifest_path, &manifest)?;
        let recorded: BTreeSet<&str> = parsed.files.keys().map(String::as_str).collect();
        let tree = walk(&self.dir, &recorded)?;
        for (rel, recorded_digest) in &parsed.files {
            match tree.files.get(rel) {
                Some(bytes) if &hex_sha256(bytes) == recorded_digest => {}
                Some(bytes) => mismatches.push(Mismatch::Changed {
                    file: rel.clone(),
                    recorded: recorded_digest.clone(),
                    actual: hex_sha256(bytes),
                }),
                None => mismatches.push(Mismatch::Missing(rel.clone())),
            }
        }
        mismatches.extend(tree.problems);
        if mismatches.is_empty() { Ok(()) } else { Err(changed(&mismatches)) }
    }
}

#[cfg(test)]
mod tests {
    use super::is_plain_relative;

    #[test]
    fn plain_relative_keys() {
        assert!(is_plain_relative("prompt.md"));
        assert!(is_plain_relative("skills/tdd/SKILL.md"));
        for key in [
            "",
            "../../../etc/hostname",
            "/etc/hostname",
            "a//b",
            "./a",
            "a/./b",
            "a/",
            "a\\b",
            "a/..",
        ] {
            assert!(!is_plain_relative(key), "{key:?}");
        }
    }
}
