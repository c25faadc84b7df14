//! The workspace's own binaries, for tests of one package that drive another package's binary.
//!
//! Cargo gives a test `CARGO_BIN_EXE_*` only for its own package's binaries. `cargo test
//! --workspace` (what `cargo xtask ci` runs) builds every binary before any test runs, so a test
//! finds the others beside its own executable's directory.

use std::path::PathBuf;

/// The path of the workspace binary `name` (`harness-gate`, `harness-mcp`, ...), built by the
/// same `cargo test` run. Panics, naming what to build, when it is not there: a test that needs
/// it must fail, never skip.
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/debug/deps/all-HASH -> target/debug
    let dir = exe.parent().and_then(|deps| deps.parent()).map(PathBuf::from).unwrap_or_default();
    let path = dir.join(name);
    if !path.is_file() {
        panic!(
            "{} is not built; run the tests with `cargo test --workspace` (as `cargo xtask ci` does) \
             or build it first with `cargo build --workspace`",
            path.display()
        );
    }
    path
}

/// Checks that the binary at `path` is a good command-line citizen: `--help`, `-h` and
/// `--version` exit 0 with stdin left open (so a binary that started serving instead fails on the
/// deadline), print on stdout and nothing on stderr; the help names `name`, its usage and its
/// exit status, and the version line is `name VERSION`. Panics with the binary's output
/// otherwise.
pub fn assert_help_and_version(path: &std::path::Path, name: &str, version: &str) {
    for flag in ["--help", "-h", "--version"] {
        let mut command = crate::process::new_command(path);
        command.arg(flag).env_clear().stdin(std::process::Stdio::piped());
        let output = crate::process::run_with_deadline(command, std::time::Duration::from_secs(20))
            .unwrap_or_else(|error| panic!("{name} {flag}: {error}"));
        let context = format!("{name} {flag}: {output}");
        assert!(output.status.success(), "{context}");
        assert!(output.stderr.is_empty(), "{context}");
        if flag == "--version" {
            assert_eq!(output.stdout.trim(), format!("{name} {version}"), "{context}");
        } else {
            assert!(output.stdout.contains("usage:"), "{context}");
            assert!(output.stdout.contains(name), "{context}");
            assert!(output.stdout.contains("exit"), "the help gives the exit status: {context}");
        }
    }
}
