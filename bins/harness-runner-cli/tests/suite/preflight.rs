//! The launch preflight (docs/runner.md, "Start"): before any message is read, the runner starts
//! the CLI's `--version` through the adapter, inside the turn's sandbox, so a CLI or interpreter
//! a turn may not run fails the launch (exit 2, the cause named) instead of every message.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use harness_testkit::{
    BrokerAnswer, Cli, SessionOptions, SessionScenario, require_cli, tools_bin_dir,
    workspace_binary,
};
use serde_json::json;

use super::fixture::{FAKE_CLI_VERSION, Fixture, finish, message, stderr};

const LIMIT: Duration = Duration::from_secs(120);

/// The integrator's mistake, through the real Pi: a launcher that runs Pi on a Node the turn's
/// sandbox does not let it run (here a copy of Node 24 outside every grant). Before the
/// preflight, the runner claimed and answered every message `The turn failed: the adapter exited
/// with status 126`; now it exits 2 naming that Node, having read no message.
#[test]
fn a_pi_on_a_node_the_sandbox_refuses_exits_2_before_reading_a_message() {
    let Some(paths) = require_cli(Cli::Pi) else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let node = root.join("elsewhere/node");
    std::fs::create_dir_all(node.parent().unwrap()).unwrap();
    std::fs::copy(tools_bin_dir().join("node").canonicalize().unwrap(), &node).unwrap();
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tools = tools_bin_dir().parent().unwrap().canonicalize().unwrap();
    let entry = tools.join("node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js");
    assert!(entry.is_file(), "{} is missing", entry.display());
    let launcher = root.join("launcher/pi");
    std::fs::create_dir_all(launcher.parent().unwrap()).unwrap();
    let script = format!("#!/bin/sh\nexec '{}' '{}' \"$@\"\n", node.display(), entry.display());
    std::fs::write(&launcher, script).unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();

    let bin_dir = workspace_binary("harness-gate").parent().unwrap().to_path_buf();
    let mut options = SessionOptions::from_checkout(&bin_dir).unwrap();
    options.run_json = json!({"cli": launcher}).as_object().unwrap().clone();
    let scenario = SessionScenario::with_options(&paths, options).unwrap();
    scenario.send_message("m1", "acme-cos", "Hello");
    let runner = std::path::PathBuf::from(env!("CARGO_BIN_EXE_harness-runner"));
    let started = Instant::now();
    let output = finish(scenario.spawn_runner(&runner).unwrap(), LIMIT);
    let log = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{log}");
    assert!(log.contains("preflight"), "{log}");
    let named =
        format!("the CLI's interpreter {} is outside what the turn may run", node.display());
    assert!(log.contains(&named), "the cause is named: {log}");
    assert!(scenario.broker().calls_of("message.read").is_empty(), "a message was read: {log}");
    assert!(scenario.broker().calls_of("message.send").is_empty(), "{log}");
    assert!(started.elapsed() < LIMIT);
}

/// Writes a fake Pi package whose bin entry is `script`: its package.json names the fixture's
/// CLI version, so the runner reads the version from it and claims without waiting for the CLI.
fn packaged_cli(root: &std::path::Path, script: &str) -> std::path::PathBuf {
    let package = root.join("prefix/node_modules/@earendil-works/pi-coding-agent");
    std::fs::create_dir_all(package.join("bin")).unwrap();
    let manifest = json!({
        "name": "@earendil-works/pi-coding-agent",
        "version": FAKE_CLI_VERSION,
        "bin": {"pi": "bin/pi"},
    });
    std::fs::write(package.join("package.json"), manifest.to_string()).unwrap();
    let entry = package.join("bin/pi");
    std::fs::write(&entry, script).unwrap();
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).unwrap();
    entry
}

/// A CLI whose version its package names: the claim does not wait for it, but the first
/// `message.read` waits for the preflight, and a CLI that cannot start still ends the launch
/// with exit 2, the role released, no message read.
#[test]
fn a_packaged_cli_that_cannot_start_is_claimed_released_and_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\necho 'exec: /nowhere/node: Permission denied' >&2\nexit 126\n";
    let cli = packaged_cli(dir.path(), script);
    let fx = Fixture::with_run_json(|run_json| run_json["cli"] = json!(cli));
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let output = finish(fx.spawn(&[]), Duration::from_secs(30));
    let log = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{log}");
    assert!(log.contains("preflight") && log.contains("Permission denied"), "{log}");
    assert!(fx.broker.calls_of("message.read").is_empty(), "a message was read: {log}");
    assert_eq!(fx.broker.calls_of("role.release").len(), fx.broker.calls_of("role.claim").len());
}

/// A packaged CLI that starts and prints its version: the run goes on and answers.
#[test]
fn a_packaged_cli_that_starts_answers_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("#!/bin/sh\necho '{FAKE_CLI_VERSION}'\n");
    let cli = packaged_cli(dir.path(), &script);
    let fx = Fixture::with_run_json(|run_json| run_json["cli"] = json!(cli));
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let child = fx.spawn(&[]);
    super::fixture::wait_until(Duration::from_secs(30), "the RESULT", || {
        !fx.broker.calls_of("message.send").is_empty()
    });
    super::fixture::terminate(&child);
    let output = finish(child, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}
