//! The example host (issue 14, item 4): `node examples/host/host.mjs`, a Node 24 host written
//! against docs/host.md alone, runs one whole session with each real CLI: it builds the bundle
//! with `harness bundle build`, plays the broker and the scripted model, starts harness-runner,
//! sends one message, takes the RESULT and stops the runner with SIGTERM. The host exits 0 only
//! when the runner exited 0 and the RESULT holds the scripted text, so the guide cannot drift
//! from the code unnoticed.
//!
//! The host starts from an install prefix, as a real host does. The test lays one out from this
//! build (what `cargo xtask dist` would install): every file `InstallLayout::files()` names,
//! binaries hard-linked from the target directory (a copy where a link cannot be made), assets
//! copied from the crates' sources.
//! The host's own run directory goes under the system's temporary directory, not the target
//! directory, so that `RUN/tools.sock` stays within a Unix socket path's 108 bytes wherever the
//! checkout is.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use harness_adapters::InstallLayout;
use harness_testkit::{
    Cli, require_cli, require_node, run_with_deadline, tools_bin_dir, workspace_binary,
    workspace_root,
};

/// The host's own deadline for the RESULT; the test's is above it, so the host reports first.
const HOST_TIMEOUT_SECS: u64 = 180;
const DEADLINE: Duration = Duration::from_secs(HOST_TIMEOUT_SECS + 60);

/// Lays out an install under `prefix` from this build and the checkout's assets.
fn install(prefix: &Path) {
    let runner = PathBuf::from(env!("CARGO_BIN_EXE_harness-runner"));
    let bin_dir = runner.parent().unwrap();
    // Every binary of the layout must be built; workspace_binary fails naming the missing one.
    for name in ["harness-gate", "harness-mcp", "harness-unslop", "harness"] {
        workspace_binary(name);
    }
    let from =
        InstallLayout::from_checkout(&workspace_root(), &harness_testkit::utf8(bin_dir).unwrap())
            .files();
    let to = InstallLayout::under(&harness_testkit::utf8(prefix).unwrap()).files();
    assert_eq!(from.len(), to.len());
    for ((source, _), (target, mode)) in from.iter().zip(&to) {
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        if *mode == 0o755 && std::fs::hard_link(source, target).is_ok() {
            continue;
        }
        std::fs::copy(source, target)
            .unwrap_or_else(|error| panic!("install {} -> {}: {error}", source, target));
    }
}

fn example_host(cli: Cli) {
    let Some(paths) = require_cli(cli) else { return };
    let Some(node) = require_node() else { return };
    let dir = tempfile::Builder::new()
        .prefix("example-host-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let prefix = dir.path().join("prefix");
    install(&prefix);
    let host = workspace_root().join("examples/host/host.mjs");
    #[expect(clippy::disallowed_methods, reason = "the test runs the example host under Node")]
    let mut command = Command::new(&node);
    command
        .arg(&host)
        .arg("--prefix")
        .arg(&prefix)
        .arg("--cli")
        .arg(paths.program())
        .arg("--timeout")
        .arg(HOST_TIMEOUT_SECS.to_string())
        .env_clear()
        .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", tools_bin_dir().display()))
        .stdin(std::process::Stdio::null());
    let output = run_with_deadline(command, DEADLINE)
        .unwrap_or_else(|error| panic!("the example host with {cli} did not finish: {error}"));
    assert!(output.status.success(), "the example host failed with {cli}: {output}");
    assert!(
        output.stdout.contains("host: ok: one message in, one RESULT out"),
        "the example host did not report its session with {cli}: {output}"
    );
}

#[test]
fn the_example_host_runs_a_session_with_pi() {
    example_host(Cli::Pi);
}

#[test]
fn the_example_host_runs_a_session_with_claude_code() {
    example_host(Cli::Claude);
}
