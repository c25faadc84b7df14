//! Cargo, for every subcommand: the one place in xtask that finds cargo, the target directory and
//! the binaries a build made.
//!
//! The target directory is whatever cargo itself uses (`cargo metadata`), so `CARGO_TARGET_DIR`,
//! relative or absolute, and `build.target-dir` are honoured alike; every cargo that xtask starts
//! gets it back as an absolute `CARGO_TARGET_DIR`, so that a relative value cannot be read against
//! another directory. A build returns the directory of its profile in that target directory.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result};
use serde_json::Value;

use crate::process;

/// The cargo that runs xtask, in the workspace root.
#[derive(Debug, Clone)]
pub(crate) struct Cargo {
    program: OsString,
    root: PathBuf,
    target: PathBuf,
}

impl Cargo {
    /// Finds cargo (`$CARGO`, which cargo sets for xtask, else `cargo` on PATH) and asks it for
    /// the target directory.
    pub(crate) fn locate(root: &Path) -> Result<Self> {
        let program = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        let target = target_directory(&mut metadata(&program, root))?;
        Ok(Self { program, root: root.to_owned(), target })
    }

    /// Returns `cargo ARGS` in the workspace root, with the target directory made explicit.
    /// Cargo's own environment is kept on purpose: it carries the toolchain choice and proxies.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = process::command(&self.program);
        cmd.current_dir(&self.root).args(args).env("CARGO_TARGET_DIR", &self.target);
        cmd
    }

    /// Returns `cargo install ARGS`, which builds in a directory of its own, not the workspace's.
    pub(crate) fn install(&self, args: &[&str]) -> Command {
        let mut cmd = process::command(&self.program);
        cmd.arg("install").args(args).env_remove("CARGO_TARGET_DIR");
        cmd
    }

    /// Builds the binaries of `packages` (`cargo build --release` with `release`, else the dev
    /// profile) and returns the directory that holds them, in the target directory.
    fn build_binaries(&self, packages: &[&str], release: bool) -> Result<PathBuf> {
        let mut cmd = self.command(&["build", "--bins"]);
        if release {
            cmd.arg("--release");
        }
        for package in packages {
            cmd.args(["-p", package]);
        }
        process::run_visible(&mut cmd)?;
        Ok(self.bin_dir(release))
    }

    /// Builds every binary an install holds ([`harness_adapters::INSTALL_BINARIES`], the one list)
    /// and returns the directory that holds them: the demo, the canary, `dist` and the benchmarks
    /// all build through here, so none can leave a binary of the layout out.
    pub(crate) fn build_install_binaries(&self, release: bool) -> Result<PathBuf> {
        let packages = harness_adapters::INSTALL_BINARIES.map(|(_, package)| package);
        self.build_binaries(&packages, release)
    }

    /// Returns the directory of the release or the dev profile's binaries.
    pub(crate) fn bin_dir(&self, release: bool) -> PathBuf {
        self.target.join(if release { "release" } else { "debug" })
    }
}

/// Returns `cargo metadata` for the workspace at `root`, run in xtask's own directory: cargo reads a
/// relative `CARGO_TARGET_DIR` against its working directory, so this one reads it as the cargo
/// that started xtask did.
fn metadata(program: &OsStr, root: &Path) -> Command {
    let mut cmd = process::command(program);
    cmd.args(["metadata", "--format-version", "1", "--no-deps", "--manifest-path"]);
    cmd.arg(root.join("Cargo.toml"));
    cmd
}

/// Runs `cargo metadata` and returns its `target_directory`.
fn target_directory(metadata: &mut Command) -> Result<PathBuf> {
    let out = process::stdout_of(metadata)?;
    let parsed: Value = serde_json::from_str(&out).context("cargo metadata printed no JSON")?;
    let dir =
        parsed["target_directory"].as_str().context("cargo metadata has no target_directory")?;
    Ok(PathBuf::from(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_target_dir_is_honoured_absolute_or_relative_to_where_xtask_runs() {
        let dir = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let cargo = std::env::var_os("CARGO").unwrap_or("cargo".into());
        let mut absolute = metadata(&cargo, root);
        absolute.env("CARGO_TARGET_DIR", dir.path().join("abs"));
        assert_eq!(target_directory(&mut absolute).unwrap(), dir.path().join("abs"));
        // It runs where xtask runs, as the cargo that started xtask did.
        let mut relative = metadata(&cargo, root);
        assert_eq!(relative.get_current_dir(), None);
        relative.current_dir(dir.path()).env("CARGO_TARGET_DIR", "rel");
        assert_eq!(target_directory(&mut relative).unwrap(), dir.path().join("rel"));
    }
}
