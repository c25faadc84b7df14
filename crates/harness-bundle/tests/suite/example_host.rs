//! `cargo run -p harness-bundle --example host` runs a whole launch through the library with each
//! real CLI: the bundle built by `build_bundle`, the runner started on it, one message in, its
//! RESULT out, the runner stopped. The example checks each step itself and exits non-zero when
//! one fails; this test runs the binary cargo built for it and reads what it printed. Run it with
//! `cargo test --workspace`, which builds the example and the binaries it starts
//! (`cargo test -p harness-bundle` does too once `cargo build --workspace` has run).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use harness_testkit::{Cli, require_cli, run_with_deadline, workspace_binary};

/// The example's own limit is 240 s for the RESULT and 20 s for the stop.
const DEADLINE: Duration = Duration::from_secs(300);

/// The example binary `cargo test` built: target/debug/deps/all-HASH -> target/debug/examples/host.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = debug.join("examples/host");
    assert!(path.is_file(), "{} is not built (cargo test builds examples)", path.display());
    // `cargo test --test all` builds no examples: a binary older than its source is stale and
    // would test old code.
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/host.rs");
    let modified = |path: &std::path::Path| std::fs::metadata(path).unwrap().modified().unwrap();
    assert!(
        modified(&path) >= modified(&source),
        "{} is older than examples/host.rs: run `cargo test -p harness-bundle` (which builds \
         examples) or `cargo build -p harness-bundle --example host` first",
        path.display()
    );
    path
}

#[expect(clippy::disallowed_methods, reason = "the test runs the example host it checks")]
fn example_host(cli: Cli, flag: &str) {
    let Some(_paths) = require_cli(cli) else { return };
    // The binaries the bundle points at and the runner the example starts; a missing one fails here
    // with what to build rather than inside the example.
    for binary in ["harness-gate", "harness-mcp", "harness-unslop", "harness-runner", "harness"] {
        workspace_binary(binary);
    }
    let mut command = Command::new(example());
    command.args(["--cli", flag]).stdin(std::process::Stdio::null());
    let output = run_with_deadline(command, DEADLINE).unwrap();
    assert!(output.status.success(), "{output}");
    let digest = output
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("digest: "))
        .unwrap_or_else(|| panic!("no digest printed: {output}"));
    assert!(
        digest.len() == 64
            && digest.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{output}"
    );
    assert!(
        output.stdout.contains("RESULT to acme-cos: Ship the login page, then fix the footer.\n"),
        "{output}"
    );
    assert!(output.stdout.contains("runner: stopped, exit status: 0\n"), "{output}");
    assert!(output.stdout.ends_with("host: done\n"), "{output}");
}

#[test]
fn the_example_host_runs_a_pi_session_through_the_library() {
    example_host(Cli::Pi, "pi");
}

#[test]
fn the_example_host_runs_a_claude_code_session_through_the_library() {
    example_host(Cli::Claude, "claude");
}
