//! `cargo xtask dist --prefix DIR [--archive FILE.tar.gz]`: builds the release binaries and
//! installs them, the assets and the schemas in the layout the bundle points into
//! (`harness_adapters::InstallLayout::under`, `SchemaFiles::under`); with `--archive`, also
//! writes that install as a relocatable `.tar.gz` a host unpacks with any `tar` into a prefix of
//! its own, without Rust or a checkout.
//!
//! The binaries come from the target directory cargo itself uses (`CARGO_TARGET_DIR` honoured),
//! where the release build just put them; nothing is copied unless every file is there, and a
//! missing one is named.
//! Every file is copied to a temporary name beside its destination and renamed into place, so a
//! running session never sees half a binary; binaries are 0755, assets and schemas 0644.
//!
//! The archive is written in-process with the `tar` and `flate2` crates rather than the system
//! `tar`: its entries are then the same on every host whatever tar it has (GNU and BSD tar take
//! different flags for owner, order and time): prefix-relative paths (`bin/harness`,
//! `share/harness/...`, no leading `/` or `..`), directories 0755, files with the install's
//! modes, owner and group 0 with no names, a fixed mtime, and the install's order.

use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt as _};
use std::path::Path;

use anyhow::{Context as _, Result, anyhow, bail};
use camino::{Utf8Path, Utf8PathBuf};
use harness_adapters::{InstallLayout, SchemaFiles};

use crate::cargo::Cargo;
use crate::{process, setup};

const USAGE: &str = "usage: cargo xtask dist --prefix DIR [--archive FILE.tar.gz]";

pub(crate) fn run(root: &Path, args: &[&str]) -> Result<()> {
    let (prefix, archive) = match args {
        ["--prefix", prefix] => (*prefix, None),
        ["--prefix", prefix, "--archive", archive] | ["--archive", archive, "--prefix", prefix] => {
            (*prefix, Some(Path::new(archive)))
        }
        _ => bail!(USAGE),
    };
    let prefix = Utf8Path::new(prefix);
    // The layout's paths are text in every bundle's manifest: UTF-8, the directory included.
    let prefix = camino::absolute_utf8(prefix)
        .with_context(|| format!("--prefix {prefix:?} cannot be made an absolute UTF-8 path"))?;
    eprintln!("dist: building the release binaries ...");
    let bin_dir = Cargo::locate(root)?.build_install_binaries(true)?;
    eprintln!("dist: installing from {}", bin_dir.display());
    let utf8 = |path: &Path| {
        Utf8PathBuf::try_from(path.to_path_buf()).map_err(|_| anyhow!("{path:?} is not UTF-8"))
    };
    let root = utf8(root)?;
    let from = Install::from_checkout(&root, &utf8(&bin_dir)?);
    let to = Install::under(&prefix);
    let installed = install(&from, &to)?;
    eprintln!("dist: installed {installed} files under {prefix}");
    if let Some(archive) = archive {
        let written = write_archive(&to, &prefix, archive, flate2::Compression::default())?;
        eprintln!(
            "dist: wrote {} ({written} files; unpack with tar -xzf into a prefix)",
            archive.display()
        );
    }
    Ok(())
}

/// Everything an install holds: the layout's binaries and assets, and the schemas.
#[derive(Debug, Clone)]
pub(crate) struct Install {
    pub(crate) layout: InstallLayout,
    pub(crate) schemas: SchemaFiles,
}

impl Install {
    /// The install under `prefix`.
    pub(crate) fn under(prefix: &Utf8Path) -> Self {
        Self { layout: InstallLayout::under(prefix), schemas: SchemaFiles::under(prefix) }
    }

    /// The sources in a checkout: binaries from `bin_dir`, assets and schemas from the tree.
    pub(crate) fn from_checkout(root: &Utf8Path, bin_dir: &Utf8Path) -> Self {
        Self {
            layout: InstallLayout::from_checkout(root, bin_dir),
            schemas: SchemaFiles::from_checkout(root),
        }
    }

    /// Every file with its mode: the layout's, then the schemas.
    pub(crate) fn files(&self) -> Vec<(Utf8PathBuf, u32)> {
        let mut files = self.layout.files();
        files.extend(self.schemas.files());
        files
    }
}

/// `cargo xtask ci`'s last step, the host's whole path from a fresh clone: `dist` builds the
/// release binaries and installs them, the assets and the schemas into a temporary prefix and
/// writes the release archive; the system `tar` (as a host without Rust would) unpacks the
/// archive into another directory, `harness doctor` must pass on it, and on that unpacked install
/// both example hosts run a whole session with each real CLI: the Node host
/// (examples/host/host.mjs) through `harness bundle build`, the Rust one (`harness-bundle`'s
/// example) through the library.
pub(crate) fn ci_hosts(root: &Path) -> Result<()> {
    let dir = tempfile::Builder::new().prefix("harness-dist-").tempdir()?;
    let prefix = dir.path().join("prefix");
    let prefix = prefix.to_str().context("the temporary directory is not UTF-8")?;
    let archive = dir.path().join("harness.tar.gz");
    let archive = archive.to_str().context("the temporary directory is not UTF-8")?;
    run(root, &["--prefix", prefix, "--archive", archive])?;
    let tools = setup::run(root)?;
    // Unpacked somewhere else than where dist installed: the archive is relocatable.
    let unpacked = dir.path().join("unpacked");
    std::fs::create_dir(&unpacked)?;
    let mut untar = process::command("tar");
    untar.arg("-xzf").arg(archive).arg("-C").arg(&unpacked);
    process::run_captured(&mut untar, HOST_DEADLINE).context("unpacking the release archive")?;
    let unpacked = unpacked.to_str().context("the temporary directory is not UTF-8")?;
    // doctor with Node 24 first on PATH, as a host's would be, and nothing else of ours.
    let mut doctor = process::command(Path::new(unpacked).join("bin/harness"));
    doctor.env_clear().env("PATH", tools.path()).args(["doctor", "--prefix", unpacked]);
    let checked = process::run_captured(&mut doctor, HOST_DEADLINE)
        .context("harness doctor on the unpacked release archive")?;
    eprintln!(
        "dist: harness doctor on the unpacked archive: {} checks, all ok",
        checked.stdout.lines().count()
    );
    let cargo = Cargo::locate(root)?;
    for (cli, program) in [("pi", "pi"), ("claude", "claude")] {
        let scratch = dir.path().join(format!("scratch-{cli}"));
        std::fs::create_dir(&scratch)?;
        let mut node = tools.isolated("node", &scratch)?;
        node.arg(root.join("examples/host/host.mjs"))
            .args(["--prefix", unpacked, "--cli"])
            .arg(tools.bin(program));
        let ran = process::run_captured(&mut node, HOST_DEADLINE)
            .with_context(|| format!("the Node example host with {cli} on the unpacked archive"))?;
        eprintln!("dist: the Node host with {cli}: {}", ran.stdout.lines().last().unwrap_or(""));
        let mut rust = cargo.command(&["run", "--quiet", "-p", "harness-bundle", "--example"]);
        rust.args(["host", "--", "--prefix", unpacked, "--cli", cli]);
        let ran = process::run_captured(&mut rust, HOST_DEADLINE)
            .with_context(|| format!("the Rust example host with {cli} on the unpacked archive"))?;
        eprintln!("dist: the Rust host with {cli}: {}", ran.stdout.lines().last().unwrap_or(""));
    }
    Ok(())
}

/// How long one example host may take, its build included (each has its own, shorter, limits).
const HOST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);

/// Returns every file of the install: (source in `from`, destination in `to`, mode).
fn files(from: &Install, to: &Install) -> Vec<(Utf8PathBuf, Utf8PathBuf, u32)> {
    from.files()
        .into_iter()
        .zip(to.files())
        .map(|((source, mode), (target, _))| (source, target, mode))
        .collect()
}

/// Copies every file of `from` to its place in `to` and returns how many, or, when any is
/// missing, copies nothing and names every missing one.
pub(crate) fn install(from: &Install, to: &Install) -> Result<usize> {
    let files = files(from, to);
    let missing: Vec<String> = files
        .iter()
        .filter(|(source, ..)| !source.is_file())
        .map(|(source, ..)| source.to_string())
        .collect();
    if !missing.is_empty() {
        bail!("nothing installed: these files are missing:\n  {}", missing.join("\n  "));
    }
    for (source, target, mode) in &files {
        copy_into_place(source.as_std_path(), target.as_std_path(), *mode)?;
    }
    Ok(files.len())
}

/// The mtime of every archive entry: a fixed time, so two archives of the same files are the
/// same bytes (2026-01-01T00:00:00Z).
const ARCHIVE_MTIME: u64 = 1_767_225_600;

/// Writes every file of `install` (which is under `prefix`) to `archive` as a gzip-compressed
/// tar of prefix-relative paths, its directories first, compressed at `level`; returns how many
/// files. The archive is
/// written beside its destination and renamed into place, so a half-written one is never there.
pub(crate) fn write_archive(
    install: &Install,
    prefix: &Utf8Path,
    archive: &Path,
    level: flate2::Compression,
) -> Result<usize> {
    let files = install.files();
    let relative = |path: &Utf8Path| -> Result<Utf8PathBuf> {
        let rel =
            path.strip_prefix(prefix).with_context(|| format!("{path} is not under {prefix}"))?;
        Ok(rel.to_path_buf())
    };
    let mut dirs = std::collections::BTreeSet::new();
    for (path, _) in &files {
        let mut parent = relative(path)?.parent().map(Utf8Path::to_path_buf);
        while let Some(dir) = parent.filter(|dir| !dir.as_str().is_empty()) {
            parent = dir.parent().map(Utf8Path::to_path_buf);
            dirs.insert(dir);
        }
    }
    let dest_dir = match archive.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let temp = tempfile::Builder::new()
        .prefix(".harness-archive-")
        .tempfile_in(dest_dir)
        .with_context(|| format!("cannot create a file in {}", dest_dir.display()))?;
    let gzip = flate2::write::GzEncoder::new(temp.as_file(), level);
    let mut tar = tar::Builder::new(gzip);
    let header = |kind: tar::EntryType, mode: u32, size: u64| {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_size(size);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(ARCHIVE_MTIME);
        header
    };
    for dir in &dirs {
        let mut head = header(tar::EntryType::Directory, 0o755, 0);
        tar.append_data(&mut head, format!("{dir}/"), std::io::empty())
            .with_context(|| format!("cannot add {dir}/ to the archive"))?;
    }
    for (path, mode) in &files {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {path}"))?;
        let mut head = header(tar::EntryType::Regular, *mode, bytes.len() as u64);
        tar.append_data(&mut head, relative(path)?.as_str(), bytes.as_slice())
            .with_context(|| format!("cannot add {path} to the archive"))?;
    }
    tar.into_inner()
        .and_then(flate2::write::GzEncoder::finish)
        .and_then(|file| file.sync_all())
        .with_context(|| format!("cannot write {}", temp.path().display()))?;
    // A release file others read: 0644, where the temporary file was made 0600.
    std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o644))
        .with_context(|| format!("cannot set the mode of {}", temp.path().display()))?;
    temp.persist(archive).with_context(|| format!("cannot write {}", archive.display()))?;
    Ok(files.len())
}

fn copy_into_place(source: &Path, target: &Path, mode: u32) -> Result<()> {
    let bytes =
        std::fs::read(source).with_context(|| format!("cannot read {}", source.display()))?;
    let parent = target.parent().with_context(|| format!("{} has no parent", target.display()))?;
    DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    setup::write_file(target, &bytes, mode)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn utf8(path: std::path::PathBuf) -> Utf8PathBuf {
        Utf8PathBuf::try_from(path).unwrap()
    }

    /// Writes every source file of `from` but those whose path ends with one of `except`.
    fn sources(from: &Install, except: &[&str]) -> usize {
        let files = files(from, &Install::under(Utf8Path::new("/unused")));
        let written =
            files.iter().filter(|(source, ..)| !except.iter().any(|e| source.ends_with(e)));
        written
            .enumerate()
            .map(|(index, (source, ..))| {
                std::fs::create_dir_all(source.parent().unwrap()).unwrap();
                std::fs::write(source, format!("file {index}")).unwrap();
            })
            .count()
    }

    #[test]
    fn install_copies_every_file_with_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let from = Install::under(&utf8(dir.path().join("from")));
        let to = Install::under(&utf8(dir.path().join("to")));
        let count = sources(&from, &[]);
        assert_eq!(install(&from, &to).unwrap(), count);
        // Installing again replaces the files in place.
        assert_eq!(install(&from, &to).unwrap(), count);
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let layout = &to.layout;
        assert_eq!(
            (mode(layout.gate.as_std_path()), mode(layout.adapters.join("pi.sh").as_std_path())),
            (0o755, 0o644)
        );
        assert_eq!(mode(to.schemas.dir.join("run.json").as_std_path()), 0o644);
        assert_eq!(std::fs::read_to_string(&layout.unslop_lists).unwrap(), "file 7");
        let leftovers: Vec<_> = std::fs::read_dir(layout.gate.parent().unwrap())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn missing_binaries_are_all_named_and_nothing_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let from = Install::under(&utf8(dir.path().join("from")));
        let to = Install::under(&utf8(dir.path().join("to")));
        sources(&from, &["bin/harness-gate", "bin/harness"]);
        let error = install(&from, &to).unwrap_err().to_string();
        let named = |end: &str| error.lines().any(|line| line.trim().ends_with(end));
        assert!(named("bin/harness-gate") && named("bin/harness"), "{error}");
        assert!(!error.contains("harness-mcp"), "{error}");
        assert!(!dir.path().join("to").exists(), "a partial install was made");
    }

    /// The entries of a gzip-compressed tar: (path, mode, uid, gid, mtime, bytes), in order.
    fn entries(archive: &Path) -> Vec<(String, u32, u64, u64, u64, Vec<u8>)> {
        let file = std::fs::File::open(archive).unwrap();
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
        tar.entries()
            .unwrap()
            .map(|entry| {
                let mut entry = entry.unwrap();
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
                let header = entry.header();
                (
                    entry.path().unwrap().to_string_lossy().into_owned(),
                    header.mode().unwrap(),
                    header.uid().unwrap(),
                    header.gid().unwrap(),
                    header.mtime().unwrap(),
                    bytes,
                )
            })
            .collect()
    }

    /// `tar -xzf ARCHIVE -C DIR` with the system's tar, as a host without Rust unpacks it.
    fn untar(archive: &Path, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        let mut cmd = process::command("tar");
        cmd.arg("-xzf").arg(archive).arg("-C").arg(dir);
        process::run_captured(&mut cmd, std::time::Duration::from_secs(60)).unwrap();
    }

    /// Issue 21: the archive holds every file of the install under its prefix-relative path
    /// with its mode, owner 0 and a fixed time, its directories first; the same files give the
    /// same bytes; the system tar unpacks it, anywhere, to the install's files and modes.
    #[test]
    fn the_archive_is_the_install_relative_with_its_modes() {
        let dir = tempfile::tempdir().unwrap();
        let from = Install::under(&utf8(dir.path().join("from")));
        let prefix = utf8(dir.path().join("to"));
        let to = Install::under(&prefix);
        let count = sources(&from, &[]);
        install(&from, &to).unwrap();
        let archive = dir.path().join("harness.tar.gz");
        assert_eq!(
            write_archive(&to, &prefix, &archive, flate2::Compression::default()).unwrap(),
            count
        );
        let archive_mode = std::fs::metadata(&archive).unwrap().permissions().mode() & 0o777;
        assert_eq!(archive_mode, 0o644);
        let listed = entries(&archive);
        let files: Vec<_> = listed.iter().filter(|entry| !entry.0.ends_with('/')).collect();
        assert_eq!(files.len(), count);
        let first_file = listed.iter().position(|entry| !entry.0.ends_with('/')).unwrap();
        assert!(listed[first_file..].iter().all(|entry| !entry.0.ends_with('/')), "dirs first");
        for (path, mode, uid, gid, mtime, _) in &listed {
            assert!(!path.starts_with('/') && !path.split('/').any(|part| part == ".."), "{path}");
            assert_eq!((*uid, *gid, *mtime), (0, 0, ARCHIVE_MTIME), "{path}");
            if path.ends_with('/') {
                assert_eq!(*mode, 0o755, "{path}");
            }
        }
        for (path, mode) in to.files() {
            let rel = path.strip_prefix(&prefix).unwrap().as_str();
            let entry = files.iter().find(|entry| entry.0 == rel).unwrap();
            assert_eq!((entry.1, &entry.5), (mode, &std::fs::read(&path).unwrap()), "{rel}");
        }
        // Written again from the same files: the same bytes.
        let again = dir.path().join("again.tar.gz");
        write_archive(&to, &prefix, &again, flate2::Compression::default()).unwrap();
        assert_eq!(std::fs::read(&archive).unwrap(), std::fs::read(&again).unwrap());
        let unpacked = utf8(dir.path().join("elsewhere/opt"));
        untar(&archive, unpacked.as_std_path());
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        for ((installed, wanted), (out, _)) in
            to.files().into_iter().zip(Install::under(&unpacked).files())
        {
            assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&installed).unwrap(), "{out}");
            // The umask may take bits away, never the executable bit of a binary.
            assert_eq!(mode(out.as_std_path()) & 0o100, wanted & 0o100, "{out}");
        }
    }

    /// Issue 21: `harness doctor` passes on the archive of an install made of the build's
    /// binaries and the checkout's assets and schemas, unpacked by the system tar into a
    /// directory of its own (run with `cargo build --workspace` done, as the other suites are).
    #[test]
    fn doctor_passes_on_the_unpacked_archive() {
        let Some(_node) = harness_testkit::require_node() else { return };
        let dir = tempfile::tempdir().unwrap();
        let bin_dir = harness_testkit::workspace_binary("harness").parent().unwrap().to_path_buf();
        for (binary, _) in harness_adapters::INSTALL_BINARIES {
            harness_testkit::workspace_binary(binary);
        }
        let from = Install::from_checkout(&harness_testkit::workspace_root(), &utf8(bin_dir));
        let prefix = utf8(dir.path().join("prefix"));
        let to = Install::under(&prefix);
        install(&from, &to).unwrap();
        let archive = dir.path().join("harness.tar.gz");
        // The fastest level: the debug binaries are large, and the level changes no entry.
        write_archive(&to, &prefix, &archive, flate2::Compression::fast()).unwrap();
        // The install is gone: doctor checks what the archive alone holds.
        std::fs::remove_dir_all(&prefix).unwrap();
        let unpacked = dir.path().join("unpacked");
        untar(&archive, &unpacked);
        let mut doctor = process::command(unpacked.join("bin/harness"));
        let path = format!("{}:/usr/bin:/bin", harness_testkit::tools_bin_dir().display());
        doctor.env_clear().env("PATH", path).arg("doctor").arg("--prefix").arg(&unpacked);
        let checked = process::run_captured(&mut doctor, std::time::Duration::from_secs(120));
        let checked = checked.unwrap();
        let lines: Vec<&str> = checked.stdout.lines().collect();
        assert!(lines.iter().all(|line| line.starts_with("ok ")), "{}", checked.stdout);
        let expected = to.files().len() + harness_adapters::INSTALL_BINARIES.len() + 2;
        assert_eq!(lines.len(), expected, "{}", checked.stdout);
    }
}
