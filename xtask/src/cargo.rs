//! Cargo, for every subcommand: the one place in xtask that finds cargo, the target directory and
//! the binaries a build made.
//!
//! The target directory is whatever cargo itself uses (`cargo metadata`), so `CARGO_TARGET_DIR`,
//! relative or absolute, and `build.target-dir` are honoured alike; every cargo that xtask starts
//! gets it back as an absolute `CARGO_TARGET_DIR`, so that a relative value cannot be read against
//! another directory. A build returns the paths cargo reports for the executables it made, and
//! fails naming each package that made none.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};
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
        let mut metadata = process::command(&program);
        metadata.current_dir(root).args(["metadata", "--format-version", "1", "--no-deps"]);
        let target = target_directory(&mut metadata)?;
        Ok(Self { program, root: root.to_owned(), target })
    }

    /// Returns `cargo ARGS` in the workspace root, with the target directory made explicit.
    /// Cargo's own environment is kept on purpose: it carries the toolchain choice and proxies.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = process::command(&self.program);
        cmd.current_dir(&self.root).args(args).env("CARGO_TARGET_DIR", &self.target);
        cmd
    }

    /// Builds the binaries of `packages` (`cargo build --release` with `release`, else the dev
    /// profile) and returns the directory holding them, failing unless each package made one.
    pub(crate) fn build_binaries(&self, packages: &[&str], release: bool) -> Result<PathBuf> {
        let mut cmd = self.command(&["build", "--message-format=json-render-diagnostics"]);
        if release {
            cmd.arg("--release");
        }
        for package in packages {
            cmd.args(["-p", package, "--bins"]);
        }
        let out = process::stdout_of(&mut cmd)?;
        let executables = executables(&out);
        let missing: Vec<&str> = packages
            .iter()
            .copied()
            .filter(|package| !executables.iter().any(|(of, path)| of == package && path.is_file()))
            .collect();
        if !missing.is_empty() {
            bail!(
                "`{}` made no binary for {} under {}",
                process::display(&cmd),
                missing.join(", "),
                self.target.display()
            );
        }
        let dir = executables.first().and_then(|(_, path)| path.parent());
        Ok(dir.context("the build made no binary at all")?.to_owned())
    }
}

/// Runs `cargo metadata` and returns its `target_directory`.
fn target_directory(metadata: &mut Command) -> Result<PathBuf> {
    let out = process::stdout_of(metadata.stderr(Stdio::inherit()))?;
    let parsed: Value = serde_json::from_str(&out).context("cargo metadata printed no JSON")?;
    let dir =
        parsed["target_directory"].as_str().context("cargo metadata has no target_directory")?;
    Ok(PathBuf::from(dir))
}

/// Returns (package name, path) of every executable in cargo's JSON messages.
fn executables(messages: &str) -> Vec<(String, PathBuf)> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter_map(|message| {
            let path = message["executable"].as_str()?;
            Some((package_name(message["package_id"].as_str()?)?.to_owned(), PathBuf::from(path)))
        })
        .collect()
}

/// Returns the package name of a cargo package id: `path+file:///…/DIR#VERSION` (the directory
/// is the name), `path+file:///…/DIR#NAME@VERSION`, or the older `NAME VERSION (…)`.
fn package_name(id: &str) -> Option<&str> {
    match id.split_once('#') {
        Some((url, fragment)) => match fragment.split_once('@') {
            Some((name, _)) => Some(name),
            None => url.rsplit('/').next(),
        },
        None => id.split(' ').next(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_target_dir_is_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut metadata = process::command(std::env::var_os("CARGO").unwrap_or("cargo".into()));
        metadata.current_dir(root).args(["metadata", "--format-version", "1", "--no-deps"]);
        metadata.env("CARGO_TARGET_DIR", dir.path());
        assert_eq!(target_directory(&mut metadata).unwrap(), dir.path());
    }

    #[test]
    fn executables_are_read_from_cargo_messages() {
        let messages = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/bins/harness-gate-cli#0.1.0","executable":"/t/release/harness-gate"}
{"reason":"compiler-artifact","package_id":"path+file:///w/crates/harness-gate#harness-gate@0.1.0","executable":null}
{"reason":"compiler-artifact","package_id":"path+file:///w/bins/cli#harness-cli@0.1.0","executable":"/t/release/harness"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            executables(messages),
            [
                ("harness-gate-cli".to_owned(), PathBuf::from("/t/release/harness-gate")),
                ("harness-cli".to_owned(), PathBuf::from("/t/release/harness")),
            ]
        );
    }

    /// Every other file of xtask reaches cargo and the target directory through this module.
    #[test]
    fn no_other_module_finds_cargo_or_the_target_dir() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for entry in std::fs::read_dir(&src).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap() == "cargo.rs" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for needle in ["\"target/", "\"target\"", "(\"CARGO\")", "\"CARGO_TARGET_DIR\""] {
                assert!(!text.contains(needle), "{} contains {needle}", path.display());
            }
        }
    }
}
