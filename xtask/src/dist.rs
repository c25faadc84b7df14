//! `cargo xtask dist --prefix DIR`: installs the binaries and assets in the layout the bundle
//! points into (`harness_adapters::InstallLayout::under`).
//!
//! The binaries come from the target directory cargo itself uses (`CARGO_TARGET_DIR` honoured),
//! where the release build just put them; nothing is copied unless every file is there, and a
//! missing one is named.
//! Every file is copied to a temporary name beside its destination and renamed into place, so a
//! running session never sees half a binary; binaries are 0755, assets 0644.

use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use anyhow::{Context as _, Result, anyhow, bail};
use camino::{Utf8Path, Utf8PathBuf};
use harness_adapters::InstallLayout;

use crate::cargo::Cargo;
use crate::{process, setup};

pub(crate) fn run(root: &Path, args: &[&str]) -> Result<()> {
    let prefix = match args {
        ["--prefix", prefix] => Utf8Path::new(prefix),
        _ => bail!("usage: cargo xtask dist --prefix DIR"),
    };
    // The layout's paths are text in every bundle's manifest: UTF-8, the directory included.
    let prefix = camino::absolute_utf8(prefix)
        .with_context(|| format!("--prefix {prefix:?} cannot be made an absolute UTF-8 path"))?;
    eprintln!("dist: building the release binaries ...");
    let bin_dir = Cargo::locate(root)?.build_install_binaries(true)?;
    eprintln!("dist: installing from {}", bin_dir.display());
    let utf8 = |path: &Path| {
        Utf8PathBuf::try_from(path.to_path_buf()).map_err(|_| anyhow!("{path:?} is not UTF-8"))
    };
    let from = InstallLayout::from_checkout(&utf8(root)?, &utf8(&bin_dir)?);
    let to = InstallLayout::under(&prefix);
    let installed = install(&from, &to)?;
    eprintln!("dist: installed {installed} files under {prefix}");
    Ok(())
}

/// `cargo xtask ci`'s last step, the host's whole path from a fresh clone: `dist` installs the
/// release binaries and assets into a temporary prefix, and on that install both example hosts
/// run a whole session with each real CLI: the Node host (examples/host/host.mjs) through
/// `harness bundle build`, the Rust one (`harness-bundle`'s example) through the library.
pub(crate) fn ci_hosts(root: &Path) -> Result<()> {
    let dir = tempfile::Builder::new().prefix("harness-dist-").tempdir()?;
    let prefix = dir.path().join("prefix");
    let prefix = prefix.to_str().context("the temporary directory is not UTF-8")?;
    run(root, &["--prefix", prefix])?;
    let tools = setup::run(root)?;
    let cargo = Cargo::locate(root)?;
    for (cli, program) in [("pi", "pi"), ("claude", "claude")] {
        let scratch = dir.path().join(format!("scratch-{cli}"));
        std::fs::create_dir(&scratch)?;
        let mut node = tools.isolated("node", &scratch)?;
        node.arg(root.join("examples/host/host.mjs"))
            .args(["--prefix", prefix, "--cli"])
            .arg(tools.bin(program));
        let ran = process::run_captured(&mut node, HOST_DEADLINE)
            .with_context(|| format!("the Node example host with {cli} on the dist install"))?;
        eprintln!("dist: the Node host with {cli}: {}", ran.stdout.lines().last().unwrap_or(""));
        let mut rust = cargo.command(&["run", "--quiet", "-p", "harness-bundle", "--example"]);
        rust.args(["host", "--", "--prefix", prefix, "--cli", cli]);
        let ran = process::run_captured(&mut rust, HOST_DEADLINE)
            .with_context(|| format!("the Rust example host with {cli} on the dist install"))?;
        eprintln!("dist: the Rust host with {cli}: {}", ran.stdout.lines().last().unwrap_or(""));
    }
    Ok(())
}

/// How long one example host may take, its build included (each has its own, shorter, limits).
const HOST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);

/// Returns every file of the layout: (source in `from`, destination in `to`, mode).
fn files(from: &InstallLayout, to: &InstallLayout) -> Vec<(Utf8PathBuf, Utf8PathBuf, u32)> {
    from.files()
        .into_iter()
        .zip(to.files())
        .map(|((source, mode), (target, _))| (source, target, mode))
        .collect()
}

/// Copies every file of `from` to its place in `to` and returns how many, or, when any is
/// missing, copies nothing and names every missing one.
pub(crate) fn install(from: &InstallLayout, to: &InstallLayout) -> Result<usize> {
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
    fn sources(from: &InstallLayout, except: &[&str]) -> usize {
        let files = files(from, &InstallLayout::under(Utf8Path::new("/unused")));
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
        let from = InstallLayout::under(&utf8(dir.path().join("from")));
        let to = InstallLayout::under(&utf8(dir.path().join("to")));
        let count = sources(&from, &[]);
        assert_eq!(install(&from, &to).unwrap(), count);
        // Installing again replaces the files in place.
        assert_eq!(install(&from, &to).unwrap(), count);
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            (mode(to.gate.as_std_path()), mode(to.adapters.join("pi.sh").as_std_path())),
            (0o755, 0o644)
        );
        assert_eq!(std::fs::read_to_string(&to.unslop_lists).unwrap(), "file 7");
        let leftovers: Vec<_> = std::fs::read_dir(to.gate.parent().unwrap())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn missing_binaries_are_all_named_and_nothing_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let from = InstallLayout::under(&utf8(dir.path().join("from")));
        let to = InstallLayout::under(&utf8(dir.path().join("to")));
        sources(&from, &["bin/harness-gate", "bin/harness"]);
        let error = install(&from, &to).unwrap_err().to_string();
        let named = |end: &str| error.lines().any(|line| line.trim().ends_with(end));
        assert!(named("bin/harness-gate") && named("bin/harness"), "{error}");
        assert!(!error.contains("harness-mcp"), "{error}");
        assert!(!dir.path().join("to").exists(), "a partial install was made");
    }
}
