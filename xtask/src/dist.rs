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
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use harness_adapters::InstallLayout;

use crate::cargo::Cargo;
use crate::setup;

/// The packages whose binaries the layout holds.
const PACKAGES: [&str; 4] =
    ["harness-gate-cli", "harness-mcp-cli", "harness-unslop-cli", "harness-cli"];

pub(crate) fn run(root: &Path, args: &[&str]) -> Result<()> {
    let prefix = match args {
        ["--prefix", prefix] => PathBuf::from(prefix),
        _ => bail!("usage: cargo xtask dist --prefix DIR"),
    };
    let prefix = if prefix.is_absolute() { prefix } else { std::env::current_dir()?.join(prefix) };
    eprintln!("dist: building the release binaries ...");
    let bin_dir = Cargo::locate(root)?.build_binaries(&PACKAGES, true)?;
    eprintln!("dist: installing from {}", bin_dir.display());
    let from = InstallLayout::from_checkout(root, &bin_dir);
    let to = InstallLayout::under(&prefix);
    let installed = install(&from, &to)?;
    eprintln!("dist: installed {installed} files under {}", prefix.display());
    Ok(())
}

/// Copies every file of `from` to its place in `to`; returns how many.
pub(crate) fn install(from: &InstallLayout, to: &InstallLayout) -> Result<usize> {
    let mut pairs: Vec<(PathBuf, PathBuf, u32)> = vec![
        (from.gate.clone(), to.gate.clone(), 0o755),
        (from.mcp.clone(), to.mcp.clone(), 0o755),
        (from.unslop.clone(), to.unslop.clone(), 0o755),
        (from.pi_extension.clone(), to.pi_extension.clone(), 0o644),
        (from.pi_unslop_extension.clone(), to.pi_unslop_extension.clone(), 0o644),
        (from.unslop_lists.clone(), to.unslop_lists.clone(), 0o644),
    ];
    if let (Some(from_bin), Some(to_bin)) = (from.gate.parent(), to.gate.parent()) {
        pairs.push((from_bin.join("harness"), to_bin.join("harness"), 0o755));
    }
    for script in ["pi.sh", "claude-code.sh"] {
        pairs.push((from.adapters.join(script), to.adapters.join(script), 0o644));
    }
    let missing: Vec<String> = pairs
        .iter()
        .filter(|(source, _, _)| !source.is_file())
        .map(|(source, _, _)| source.display().to_string())
        .collect();
    if !missing.is_empty() {
        bail!("nothing installed: these files are missing:\n  {}", missing.join("\n  "));
    }
    for (source, target, mode) in &pairs {
        copy_into_place(source, target, *mode)?;
    }
    Ok(pairs.len())
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

    #[test]
    fn install_copies_every_file_with_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let from = InstallLayout::under(&dir.path().join("from"));
        let to = InstallLayout::under(&dir.path().join("to"));
        let extra = from.gate.parent().unwrap().join("harness");
        let scripts = [from.adapters.join("pi.sh"), from.adapters.join("claude-code.sh")];
        let sources = [
            &from.gate,
            &from.mcp,
            &from.unslop,
            &from.pi_extension,
            &from.pi_unslop_extension,
            &from.unslop_lists,
            &extra,
            &scripts[0],
            &scripts[1],
        ];
        for (index, path) in sources.iter().enumerate() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, format!("file {index}")).unwrap();
        }
        assert_eq!(install(&from, &to).unwrap(), 9);
        // Installing again replaces the files in place.
        assert_eq!(install(&from, &to).unwrap(), 9);
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&to.gate), 0o755);
        assert_eq!(mode(&to.adapters.join("pi.sh")), 0o644);
        assert_eq!(std::fs::read_to_string(&to.unslop_lists).unwrap(), "file 5");
        let leftovers: Vec<_> = std::fs::read_dir(to.gate.parent().unwrap())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn missing_binaries_are_all_named_and_nothing_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        let from = InstallLayout::under(&dir.path().join("from"));
        let to = InstallLayout::under(&dir.path().join("to"));
        // Every asset is there, and the mcp server, but not the gate nor `harness`.
        for path in [&from.mcp, &from.unslop, &from.pi_extension, &from.pi_unslop_extension]
            .into_iter()
            .chain([&from.unslop_lists, &from.adapters.join("pi.sh")])
            .chain([&from.adapters.join("claude-code.sh")])
        {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "file").unwrap();
        }
        let error = install(&from, &to).unwrap_err().to_string();
        let named = |end: &str| error.lines().any(|line| line.trim().ends_with(end));
        assert!(named("bin/harness-gate") && named("bin/harness"), "{error}");
        assert!(!error.contains("harness-mcp"), "{error}");
        assert!(!dir.path().join("to").exists(), "a partial install was made");
    }
}
