//! The CLI at launch: its version, read from its install without starting it where the install
//! says it, and the launch preflight, which proves a turn can start before any message is read.
//!
//! The seal (docs/bundle.md) promises that a CLI of another version never runs a turn. Where
//! run.json's `cli` resolves to the bin entry of the CLI's own npm package, the package's
//! `package.json` names the version the CLI prints, so the check costs two small reads and the
//! runner claims the role in milliseconds (`packaged_version`). Anywhere else (a wrapper script,
//! a binary outside its package) the version is what the preflight prints.
//!
//! The preflight runs the adapter in its check mode (`MOSAIC_PREFLIGHT=1`: the adapter execs
//! `CLI --version`) exactly as a turn starts: the same environment, the same sandbox, the same
//! supervisor. It runs beside the claim, so the claim does not wait for a Node start; the first
//! `message.read` does. A CLI or an interpreter the turn may not run (a Node outside what the
//! sandbox grants, a Node too old for the CLI) ends the launch with exit 2 naming the cause,
//! before any message is read, instead of failing every message.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use harness_adapters::HarnessModule;
use harness_contract::{AdapterEnv, RunDir};
use serde::Deserialize;

use crate::config::Run;
use crate::dirs::RunDirs;
use crate::env::Environment;
use crate::error::RunError;
use crate::supervise::{self, Ended, Spawn, StderrTo, StdoutTo};
use crate::turn::{TurnFiles, adapter_env};

/// The longest the preflight may take: a Node start on a loaded machine, with room to spare.
const PREFLIGHT_TIMEOUT: Duration = Duration::from_secs(120);
/// The most of the preflight's output kept.
const MAX_OUTPUT: usize = 64 * 1024;
/// The largest `package.json` read.
const MAX_PACKAGE_JSON: u64 = 1024 * 1024;

/// The fields of a `package.json` the version check reads.
#[derive(Debug, Deserialize)]
struct Package {
    name: String,
    version: String,
    #[serde(default)]
    bin: Option<Bin>,
}

/// `bin`: one path, or a name for each.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Bin {
    One(String),
    Many(std::collections::BTreeMap<String, String>),
}

/// What `cli --version` prints, read from the `package.json` of the package `cli` is installed
/// from, if and only if `cli` resolves (links followed, as exec follows them) to one of that
/// package's own `bin` entries and the package is `module`'s CLI package. No process starts.
pub(crate) fn packaged_version(cli: &Path, module: &dyn HarnessModule) -> Option<String> {
    let real = std::fs::canonicalize(cli).ok()?;
    // The nearest package.json above the entry is the package that owns it.
    let dir = real.ancestors().skip(1).find(|dir| dir.join("package.json").is_file())?;
    let bytes = crate::files::read_capped(&dir.join("package.json"), MAX_PACKAGE_JSON).ok()??;
    let package: Package = serde_json::from_slice(&bytes).ok()?;
    if package.name != module.cli_package() {
        return None;
    }
    let entry = real.strip_prefix(dir).ok()?;
    let names_entry = |bin: &String| Path::new(bin.trim_start_matches("./")) == entry;
    let is_bin = match &package.bin? {
        Bin::One(bin) => names_entry(bin),
        Bin::Many(bins) => bins.values().any(names_entry),
    };
    is_bin.then(|| module.printed_version(&package.version))
}

/// Runs the adapter's check mode inside the turn's sandbox. `Ok(true)` when the CLI started and
/// printed the sealed version, `Ok(false)` when a stop ended it first.
pub(crate) fn preflight(
    run: &Run,
    dirs: &RunDirs,
    env: &Environment,
    stop: &AtomicBool,
) -> Result<bool, RunError> {
    let cli = run.file.cli.as_std_path();
    let failed = |reason: String| RunError::Preflight { cli: cli.to_owned(), reason };
    crate::confinement::prepare_paths(dirs)?;
    // A turn's environment and sandbox, as turn 0; the request it names is never read.
    let files = TurnFiles { number: 0, layout: RunDir::new(&run.dir).turn(0) };
    let domain = crate::confinement::turn_domain(run, dirs, 0, None, env)?;
    // A turn's variables, the egress ones included, as run_turn sets them.
    let egress = domain.egress_env();
    let mut vars = adapter_env(run, &files, "preflight", env);
    vars.retain(|(name, _)| !egress.iter().any(|(egress, _)| egress == name));
    vars.extend(egress);
    vars.push((AdapterEnv::Preflight.name().into(), "1".into()));
    let stderr_file = dirs.state.anonymous();
    let outcome = supervise::run(Spawn {
        program: Path::new("/bin/sh"),
        args: vec![run.manifest.adapter.as_os_str().to_owned()],
        env: vars,
        cwd: run.file.workspace.as_std_path(),
        // No reader thread: one would leave its cached stack and malloc arena in the idle
        // runner's memory. stdout is read on this thread, stderr goes to a nameless file of the
        // state directory, read back below.
        stdout: StdoutTo::Inline(MAX_OUTPUT),
        stderr: match &stderr_file {
            Some(file) => StderrTo::Direct(
                file.try_clone()
                    .map_err(|error| failed(format!("the preflight's stderr file: {error}")))?,
            ),
            None => StderrTo::Capture(MAX_OUTPUT),
        },
        deadline: PREFLIGHT_TIMEOUT,
        stop: Some(stop),
        pre_exec: Some(&domain),
    })
    .map_err(|error| failed(format!("the adapter could not start: {error}")))?;
    crate::supervise::sweep_descendants();
    match outcome.ended {
        Ended::Stopped => return Ok(false),
        Ended::TimedOut => {
            return Err(failed(outcome.ended.describe("the CLI's --version", PREFLIGHT_TIMEOUT)));
        }
        _ => {}
    }
    if !outcome.success() {
        let stderr = match stderr_file {
            Some(file) => read_back(file),
            None => outcome.stderr.clone(),
        };
        let stderr = String::from_utf8_lossy(&stderr);
        let ended = outcome.ended.describe("it", PREFLIGHT_TIMEOUT);
        return Err(failed(cause(cli, &env.path(), &stderr, &ended)));
    }
    let printed = String::from_utf8_lossy(&outcome.stdout);
    run.seal
        .check_cli_version(cli, &printed)
        .map_err(|source| RunError::Bundle { path: run.bundle.clone(), source })?;
    tracing::info!(cli = %cli.display(), version = %printed.trim(), "preflight: a turn starts in its sandbox");
    Ok(true)
}

/// The first [`MAX_OUTPUT`] bytes of `file`, from its start.
fn read_back(mut file: std::fs::File) -> Vec<u8> {
    use std::io::{Read, Seek};
    let mut bytes = Vec::new();
    if file.seek(std::io::SeekFrom::Start(0)).is_ok() {
        let _ = file.take(MAX_OUTPUT as u64).read_to_end(&mut bytes);
    }
    bytes
}

/// Why the CLI could not start, from what it printed: the last lines of its stderr, and for a
/// program the sandbox refused, which one.
fn cause(cli: &Path, path: &std::ffi::OsStr, stderr: &str, ended: &str) -> String {
    let tail: Vec<&str> = stderr.lines().filter(|line| !line.trim().is_empty()).collect();
    let tail = tail[tail.len().saturating_sub(3)..].join(" | ");
    let refused = interpreter(cli, path)
        .filter(|_| stderr.contains("Permission denied"))
        .map(|program| {
            format!(
                "the CLI's interpreter {} is outside what the turn may run (docs/runner.md, \
                 \"Confinement\"); ",
                program.display()
            )
        })
        .unwrap_or_default();
    format!(
        "{refused}a turn cannot start: the CLI's --version failed inside the turn's sandbox ({ended}): {tail}"
    )
}

/// The program a script CLI names to run it: the first absolute path its `exec` line starts (a
/// wrapper), else its `#!` line's (`#!/usr/bin/env node`: `node` as found on `path`).
fn interpreter(cli: &Path, path: &std::ffi::OsStr) -> Option<PathBuf> {
    let text = crate::files::read_capped(cli, 64 * 1024).ok()??;
    let text = String::from_utf8_lossy(&text);
    let mut lines = text.lines();
    let shebang = lines.next()?.strip_prefix("#!")?.trim().to_owned();
    let exec = lines.map(str::trim).find(|line| line.starts_with("exec "));
    let named = exec.and_then(|line| {
        line.split(['\'', '"', ' ']).find(|word| word.starts_with('/')).map(PathBuf::from)
    });
    named.or_else(|| {
        let mut words = shebang.split_whitespace();
        let program = words.next()?;
        match (program.ends_with("/env"), words.next()) {
            (true, Some(name)) => std::env::split_paths(path)
                .map(|dir| dir.join(name))
                .find(|candidate| candidate.is_file())
                .or_else(|| Some(PathBuf::from(name))),
            _ => Some(PathBuf::from(program)),
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails loudly")]

    use super::*;

    /// The version comes from the package only when the CLI is the package's own bin entry: a
    /// wrapper, another package or an entry the package does not list gets none (the preflight
    /// then reads what the CLI prints).
    #[test]
    fn the_version_is_read_only_from_the_clis_own_package_entry() {
        let root = tempfile::tempdir().unwrap();
        let package = root.path().join("node_modules/@earendil-works/pi-coding-agent");
        std::fs::create_dir_all(package.join("dist/bundle")).unwrap();
        std::fs::write(package.join("dist/bundle/cli.js"), "#!/usr/bin/env node\n").unwrap();
        std::fs::write(package.join("dist/other.js"), "").unwrap();
        std::fs::write(
            package.join("package.json"),
            r#"{"name": "@earendil-works/pi-coding-agent", "version": "0.85.1", "bin": {"pi": "dist/bundle/cli.js"}}"#,
        )
        .unwrap();
        let bin = root.path().join("node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(package.join("dist/bundle/cli.js"), bin.join("pi")).unwrap();
        let pi = harness_adapters::module("pi").unwrap();
        let claude = harness_adapters::module("claude-code").unwrap();
        assert_eq!(packaged_version(&bin.join("pi"), pi).as_deref(), Some("0.85.1"));
        assert_eq!(packaged_version(&package.join("dist/other.js"), pi), None);
        assert_eq!(packaged_version(&bin.join("pi"), claude), None, "another CLI's package");
        let wrapper = root.path().join("pi-wrapper");
        std::fs::write(&wrapper, "#!/bin/sh\nexec '/opt/node' 'cli.js' \"$@\"\n").unwrap();
        assert_eq!(packaged_version(&wrapper, pi), None);
        let path = root.path().join("path");
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("node"), "").unwrap();
        assert_eq!(interpreter(&wrapper, path.as_os_str()), Some(PathBuf::from("/opt/node")));
        let entry = package.join("dist/bundle/cli.js");
        assert_eq!(interpreter(&entry, path.as_os_str()), Some(path.join("node")));
    }
}
