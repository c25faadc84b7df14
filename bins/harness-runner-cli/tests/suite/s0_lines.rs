//! The spec's "What S6 relies on", each line proven for real through harness-runner, for each
//! harness (issue 7, item 2), and the `--restricted` test (item 3).
//!
//! Every test runs one message through the runner with the real CLI, the scripted broker and
//! the scripted model; the gate is swapped for a crashing, hanging or missing one where the line
//! is about that. The reads target a file inside the workspace, which the gate would allow, so a
//! block proves the failure blocked it, not the policy.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use harness_testkit::{
    Cli, CliPaths, RecordedRequest, Reply, SessionOptions, SessionScenario, ToolResult,
    require_cli, workspace_binary,
};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(120);
const README: &str = "# The sample project";

struct Outcome {
    result: String,
    calls: Vec<RecordedRequest>,
    _scenario: SessionScenario,
    _dir: tempfile::TempDir,
}

impl Outcome {
    fn tool_result(&self, id: &str) -> Option<ToolResult> {
        self.calls
            .iter()
            .flat_map(|call| call.tool_results())
            .find(|result| result.tool_use_id == id)
    }
}

fn bin_dir() -> PathBuf {
    workspace_binary("harness-gate").parent().unwrap().to_path_buf()
}

/// Writes an executable script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn kill_term(child: &Child) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
}

/// Runs one message ("Go") through the runner; `prepare` edits the options (with a scratch
/// directory for replacement files), `after_start` runs once the runner polls.
fn one_turn(
    cli: &CliPaths,
    replies: impl FnOnce(&SessionScenario) -> Vec<Reply>,
    prepare: impl FnOnce(&mut SessionOptions, &Path),
    after_start: impl FnOnce(&SessionScenario),
) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let mut options = SessionOptions::from_checkout(&bin_dir()).unwrap();
    prepare(&mut options, dir.path());
    let scenario = SessionScenario::with_options(cli, options).unwrap();
    scenario.model().push_replies(replies(&scenario));
    let runner = PathBuf::from(env!("CARGO_BIN_EXE_harness-runner"));
    let mut child = scenario.spawn_runner(&runner).unwrap();
    let start = Instant::now();
    while scenario.broker().calls_of("message.read").is_empty() {
        assert!(
            start.elapsed() < LIMIT && child.try_wait().unwrap().is_none(),
            "the runner did not start polling"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    after_start(&scenario);
    scenario.send_message("m1", "acme-cos", "Go");
    while scenario.broker().calls_of("message.send").is_empty() {
        if start.elapsed() > LIMIT || child.try_wait().unwrap().is_some() {
            kill_term(&child);
            let output = child.wait_with_output().unwrap();
            panic!("no RESULT: {}", String::from_utf8_lossy(&output.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_term(&child);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let result =
        scenario.broker().calls_of("message.send")[0].args["text"].as_str().unwrap().to_owned();
    let calls = scenario.model().messages_calls();
    Outcome { result, calls, _scenario: scenario, _dir: dir }
}

/// The model reads the workspace's README, then says "done".
fn read_readme(s: &SessionScenario) -> Vec<Reply> {
    let (tool, input) = s.read_call(&s.workspace().join("README.md"));
    vec![Reply::tool_use("toolu_read", tool, input), Reply::text("done")]
}

/// A private copy of an installed asset, so a test can remove it without touching the checkout.
fn copy_asset(asset: &Path, dir: &Path) -> PathBuf {
    let copy = dir.join(asset.file_name().unwrap());
    std::fs::copy(asset, &copy).unwrap();
    copy
}

/// Removes the asset the bundle's manifest names for `role`, once the runner has verified it.
fn remove_asset(s: &SessionScenario, role: &str) {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.run_dir().join("bundle/manifest.json")).unwrap())
            .unwrap();
    std::fs::remove_file(manifest["assets"][role]["path"].as_str().unwrap()).unwrap();
}

#[track_caller]
fn assert_blocked(outcome: &Outcome) {
    let result = outcome.tool_result("toolu_read").expect("the read's result reached the model");
    assert!(result.is_error, "the read must be blocked: {result:?}");
    assert!(!result.text.contains(README), "the file was read: {result:?}");
    assert_eq!(outcome.result, "done");
}

fn cli(cli: Cli) -> Option<CliPaths> {
    require_cli(cli)
}

// Line 1: block a tool.

#[test]
fn s0_1_pi_the_handler_returns_a_block() {
    let Some(pi) = cli(Cli::Pi) else { return };
    let outcome = one_turn(
        &pi,
        |s| {
            let (tool, input) = s.read_call(s.secret());
            vec![Reply::tool_use("toolu_read", tool, input), Reply::text("done")]
        },
        |_, _| {},
        |_| {},
    );
    let result = outcome.tool_result("toolu_read").unwrap();
    assert!(result.is_error && result.text.contains("harness-gate: blocked"), "{result:?}");
}

#[test]
fn s0_1_claude_code_the_hook_exits_2() {
    let Some(claude) = cli(Cli::Claude) else { return };
    let outcome = one_turn(
        &claude,
        |s| {
            let (tool, input) = s.read_call(s.secret());
            vec![Reply::tool_use("toolu_read", tool, input), Reply::text("done")]
        },
        |_, _| {},
        |_| {},
    );
    let result = outcome.tool_result("toolu_read").unwrap();
    assert!(result.is_error && result.text.contains("harness-gate: blocked"), "{result:?}");
}

// Line 2: gate crash.

#[test]
fn s0_2_pi_a_crashing_gate_blocks() {
    let Some(pi) = cli(Cli::Pi) else { return };
    let outcome = one_turn(
        &pi,
        read_readme,
        |options, dir| {
            options.layout.gate =
                harness_testkit::utf8(script(dir, "crashing-gate", "kill -SEGV $$")).unwrap();
        },
        |_| {},
    );
    assert_blocked(&outcome);
}

#[test]
fn s0_2_claude_code_a_crashing_gate_blocks_through_or_exit_2() {
    let Some(claude) = cli(Cli::Claude) else { return };
    let outcome = one_turn(
        &claude,
        read_readme,
        |options, dir| {
            options.layout.gate =
                harness_testkit::utf8(script(dir, "crashing-gate", "kill -SEGV $$")).unwrap();
        },
        |_| {},
    );
    assert_blocked(&outcome);
}

// Line 3: gate missing.

#[test]
fn s0_3_pi_a_missing_extension_refuses_to_start() {
    let Some(pi) = cli(Cli::Pi) else { return };
    let outcome = one_turn(
        &pi,
        read_readme,
        |options, dir| {
            options.layout.pi_extension =
                harness_testkit::utf8(copy_asset(options.layout.pi_extension.as_std_path(), dir))
                    .unwrap()
        },
        // Gone after the runner checked the bundle: Pi itself must refuse.
        |s| remove_asset(s, "extension"),
    );
    assert_eq!(outcome.result, "The turn failed: the adapter exited with status 1");
    assert!(outcome.calls.is_empty(), "Pi sent a request without its extension");
}

#[test]
fn s0_3_pi_a_missing_gate_blocks() {
    let Some(pi) = cli(Cli::Pi) else { return };
    let outcome = one_turn(
        &pi,
        read_readme,
        |options, dir| {
            options.layout.gate =
                harness_testkit::utf8(copy_asset(options.layout.gate.as_std_path(), dir)).unwrap()
        },
        |s| remove_asset(s, "gate"),
    );
    assert_blocked(&outcome);
}

#[test]
fn s0_3_claude_code_the_wrapper_blocks_a_missing_gate() {
    let Some(claude) = cli(Cli::Claude) else { return };
    let outcome = one_turn(
        &claude,
        read_readme,
        |options, dir| {
            options.layout.gate =
                harness_testkit::utf8(copy_asset(options.layout.gate.as_std_path(), dir)).unwrap()
        },
        |s| remove_asset(s, "gate"),
    );
    assert_blocked(&outcome);
}

// Line 4: gate hang.

#[test]
fn s0_4_pi_the_wall_clock_and_the_missing_marker_fail_the_turn() {
    let Some(pi) = cli(Cli::Pi) else { return };
    let started = Instant::now();
    let outcome = one_turn(
        &pi,
        read_readme,
        |options, dir| {
            options.layout.gate =
                harness_testkit::utf8(script(dir, "hanging-gate", "exec sleep 120")).unwrap();
            options.turn_timeout = 4;
        },
        |_| {},
    );
    assert_eq!(
        outcome.result,
        "The turn failed: the turn ran past its wall clock of 4 s and was stopped"
    );
    assert!(outcome.tool_result("toolu_read").is_none(), "the read never got a result");
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn s0_4_claude_code_the_timeout_wrapper_blocks_within_the_hook_timeout() {
    let Some(claude) = cli(Cli::Claude) else { return };
    let started = Instant::now();
    let outcome = one_turn(
        &claude,
        read_readme,
        |options, dir| {
            options.layout.gate =
                harness_testkit::utf8(script(dir, "hanging-gate", "exec sleep 120")).unwrap();
        },
        |_| {},
    );
    assert_blocked(&outcome);
    // timeout -k 2 10 ends the gate after 10 s, before the hook's own 20.
    assert!(started.elapsed() < Duration::from_secs(40), "took {:?}", started.elapsed());
}

// Line 5: bash, limited only by the tool limit.

#[test]
fn s0_5_pi_bash_runs_when_the_limit_grants_it_and_not_otherwise() {
    let Some(pi) = cli(Cli::Pi) else { return };
    let bash = |s: &SessionScenario| {
        let _ = s;
        vec![
            Reply::tool_use("toolu_bash", "bash", json!({"command": "echo bash-ran-$((6*7))"})),
            Reply::text("done"),
        ]
    };
    let granted = one_turn(
        &pi,
        bash,
        |options, _| {
            options.limits = Some(vec!["read".into(), "bash".into()]);
        },
        |_| {},
    );
    let result = granted.tool_result("toolu_bash").unwrap();
    assert!(!result.is_error && result.text.contains("bash-ran-42"), "{result:?}");
    let refused = one_turn(
        &pi,
        bash,
        |options, _| {
            options.limits = Some(vec!["read".into()]);
        },
        |_| {},
    );
    let result = refused.tool_result("toolu_bash").unwrap();
    assert!(result.is_error && !result.text.contains("bash-ran-42"), "{result:?}");
}

#[test]
fn s0_5_claude_code_bash_is_not_in_the_tool_limit() {
    let Some(claude) = cli(Cli::Claude) else { return };
    let outcome = one_turn(
        &claude,
        |_| {
            vec![
                Reply::tool_use("toolu_bash", "Bash", json!({"command": "echo bash-ran-$((6*7))"})),
                Reply::text("done"),
            ]
        },
        |options, _| {
            options.limits = Some(vec!["read".into(), "bash".into()]);
        },
        |_| {},
    );
    let result = outcome.tool_result("toolu_bash").unwrap();
    assert!(result.is_error && !result.text.contains("bash-ran-42"), "{result:?}");
}

// --restricted: no CLAUDE.md, user or workspace, reaches the model; without it and without the
// adapter's `--setting-sources ""`, one does.

#[test]
fn restricted_keeps_claude_md_out_of_the_prompt_and_without_it_the_memory_reaches_the_model() {
    let Some(claude) = cli(Cli::Claude) else { return };
    const CANARY: &str = "CLAUDE-MD-CANARY-7731";
    let plant = |s: &SessionScenario| {
        std::fs::write(s.workspace().join("CLAUDE.md"), format!("Project memory: {CANARY}\n"))
            .unwrap();
        let user = s.run_dir().join("session/claude-config");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::write(user.join("CLAUDE.md"), format!("User memory: {CANARY}\n")).unwrap();
    };
    let text = |_: &SessionScenario| vec![Reply::text("done")];
    let restricted = one_turn(&claude, text, |_, _| {}, plant);
    assert!(!restricted.calls.is_empty());
    for call in &restricted.calls {
        assert!(!call.raw_body.contains(CANARY), "CLAUDE.md reached the model with --restricted");
    }
    // The control: the same adapter without --restricted lets the memory in.
    let unrestricted = one_turn(
        &claude,
        text,
        |options, dir| {
            let adapters = dir.join("adapters");
            std::fs::create_dir_all(&adapters).unwrap();
            for name in ["pi.sh", "claude-code.sh"] {
                let original = std::fs::read_to_string(options.layout.adapters.join(name)).unwrap();
                // Both layers off: --restricted, and the adapter's `--setting-sources ""`.
                let open =
                    original.replace("--restricted ", "").replace("--setting-sources \"\" ", "");
                std::fs::write(adapters.join(name), open).unwrap();
            }
            options.layout.adapters = harness_testkit::utf8(adapters).unwrap();
        },
        plant,
    );
    assert!(
        unrestricted.calls.iter().any(|call| call.raw_body.contains(CANARY)),
        "without --restricted the memory should reach the model; the test would prove nothing"
    );
}
