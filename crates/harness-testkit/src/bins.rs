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
