//! Where the real CLIs live, and the rule for a test that needs one that is missing.
//!
//! `cargo xtask setup` installs Node 24, Pi and Claude Code into the git-ignored
//! `<workspace>/.tools/`, with the entry points in `.tools/bin/`. A test that needs a CLI asks
//! [`require_cli`]: on a machine without it the test is skipped loudly, and with
//! `HARNESS_REQUIRE_CLIS=1` (CI) it fails instead, so a missing install never passes as green.

use std::fmt;
use std::io;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use camino::{Utf8Path, Utf8PathBuf};

/// The environment variable that turns a missing CLI from a skip into a failure.
pub const REQUIRE_CLIS_ENV: &str = "HARNESS_REQUIRE_CLIS";

/// A real agent CLI the tests drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cli {
    /// Claude Code 2.1.296, a native binary.
    Claude,
    /// Pi 0.85.1, a Node script that needs Node 24 first on `PATH`.
    Pi,
}

impl Cli {
    /// Returns the command name, as found in `.tools/bin/`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Pi => "pi",
        }
    }

    /// Returns the `.tools/bin/` entries the CLI cannot run without.
    fn needs(self) -> &'static [&'static str] {
        match self {
            Self::Claude => &["claude"],
            // Pi's `#!/usr/bin/env node` must find Node 24; the system Node 20 crashes it.
            Self::Pi => &["pi", "node"],
        }
    }
}

impl fmt::Display for Cli {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An installed CLI: which one, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliPaths {
    cli: Cli,
    program: PathBuf,
    bin_dir: PathBuf,
}

impl CliPaths {
    /// Returns which CLI this is.
    pub fn cli(&self) -> Cli {
        self.cli
    }

    /// Returns the executable to run (`.tools/bin/claude` or `.tools/bin/pi`).
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Returns `.tools/bin/`, which goes first on the child's `PATH`.
    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }
}

/// Returns the workspace root, found from this crate's manifest directory (`crates/harness-testkit`).
pub fn workspace_root() -> Utf8PathBuf {
    let manifest_dir = Utf8Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.ancestors().nth(2).unwrap_or(manifest_dir).to_path_buf()
}

/// `path` as UTF-8, as a [`harness_bundle::BundleRequest`] takes it; an error names a path that
/// is not (test directories are made under the system's temporary directory, which is ASCII).
pub fn utf8(path: impl Into<PathBuf>) -> io::Result<Utf8PathBuf> {
    harness_bundle::utf8_path("a test path", path.into()).map_err(io::Error::other)
}

/// Returns `<workspace root>/.tools/bin`, where `cargo xtask setup` puts the CLIs' entry points.
pub fn tools_bin_dir() -> PathBuf {
    workspace_root().join(".tools").join("bin").into()
}

/// Returns the CLI's paths if it is installed. If it is not: panics when `HARNESS_REQUIRE_CLIS=1`,
/// otherwise writes `SKIPPED: <test>: <cli> not installed …` to stderr and returns `None`, and the
/// caller returns early.
///
/// The skip line is written to the process's stderr directly rather than through `eprintln!`, so
/// the test harness's output capture cannot hide it.
pub fn require_cli(cli: Cli) -> Option<CliPaths> {
    let required = std::env::var_os(REQUIRE_CLIS_ENV).is_some_and(|v| v == "1");
    require_cli_in(cli, tools_bin_dir(), required, &mut std::io::stderr())
}

/// Returns `.tools/bin/node` (Node 24) if it is installed, under the same rule as [`require_cli`]:
/// a panic when `HARNESS_REQUIRE_CLIS=1`, otherwise a `SKIPPED: …` line on stderr and `None`.
/// For tests that run JavaScript themselves, such as the unslop list's portability check.
pub fn require_node() -> Option<PathBuf> {
    let required = std::env::var_os(REQUIRE_CLIS_ENV).is_some_and(|v| v == "1");
    let bin_dir = tools_bin_dir();
    require_in("node", &["node"], &bin_dir, required, &mut std::io::stderr())
        .then(|| bin_dir.join("node"))
}

/// [`require_cli`] with the directory, the policy and the skip line's destination as arguments, so
/// every outcome is testable without printing a false skip.
fn require_cli_in(
    cli: Cli,
    bin_dir: PathBuf,
    required: bool,
    skip_log: &mut dyn Write,
) -> Option<CliPaths> {
    require_in(cli.name(), cli.needs(), &bin_dir, required, skip_log).then(|| CliPaths {
        cli,
        program: bin_dir.join(cli.name()),
        bin_dir,
    })
}

/// Returns true if and only if every one of `needs` is an executable in `bin_dir`; otherwise
/// panics when `required`, or writes the skip line for `what` and returns false.
fn require_in(
    what: &str,
    needs: &[&str],
    bin_dir: &Path,
    required: bool,
    skip_log: &mut dyn Write,
) -> bool {
    let missing: Vec<String> = needs
        .iter()
        .map(|name| bin_dir.join(name))
        .filter(|path| !is_executable_file(path))
        .map(|path| path.display().to_string())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let what =
        format!("{what} not installed (missing {}); run `cargo xtask setup`", missing.join(", "));
    if required {
        panic!("{REQUIRE_CLIS_ENV}=1 but {what}");
    }
    let test = std::thread::current().name().unwrap_or("<unnamed test>").to_owned();
    // A failed write to stderr leaves nothing better to report to.
    let _ = writeln!(
        skip_log,
        "SKIPPED: {test}: {what} (set {REQUIRE_CLIS_ENV}=1 to make this a failure)"
    );
    false
}

/// Returns true if and only if `path` (following symlinks) is a regular file with an execute bit.
fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    fn install(dir: &Path, name: &str, mode: u32) {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(dir.join(name))
            .unwrap();
    }

    #[test]
    fn a_missing_cli_is_skipped_or_fails_by_policy() {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), "pi", 0o755);
        // Node is there but not executable, which is as good as missing.
        install(dir.path(), "node", 0o644);
        let mut skip_log = Vec::new();
        assert_eq!(require_cli_in(Cli::Pi, dir.path().to_path_buf(), false, &mut skip_log), None);
        let skip_line = String::from_utf8(skip_log).unwrap();
        assert!(
            skip_line.starts_with(
                "SKIPPED: clis::tests::a_missing_cli_is_skipped_or_fails_by_policy: pi not installed"
            ),
            "{skip_line}"
        );

        let mut skip_log = Vec::new();
        let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            require_cli_in(Cli::Pi, dir.path().to_path_buf(), true, &mut skip_log)
        }))
        .unwrap_err();
        assert!(skip_log.is_empty(), "a required CLI fails, it does not skip");
        let message = payload.downcast_ref::<String>().unwrap();
        assert!(message.contains("pi not installed"), "{message}");
        assert!(message.contains(&dir.path().join("node").display().to_string()), "{message}");
        assert!(message.contains("cargo xtask setup"), "{message}");
    }

    #[test]
    fn an_installed_cli_is_found() {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), "claude", 0o755);
        let paths =
            require_cli_in(Cli::Claude, dir.path().to_path_buf(), true, &mut Vec::new()).unwrap();
        assert_eq!(paths.program(), dir.path().join("claude"));
        assert_eq!(paths.bin_dir(), dir.path());
    }
}
