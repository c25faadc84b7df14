//! The gate inside the real CLIs (issue 2, item 8): Claude Code 2.1.296 with a PreToolUse hook
//! (matcher `*`) running `harness-gate claude-hook`, and Pi 0.85.1 with an `-e` extension calling
//! `harness-gate check` (harness-testkit's `GateScenario`). Each is scripted to read a secret
//! outside its workspace, then a file inside, then answer. The block reason must reach the
//! model's next request, the secret must never reach it, and the inside read must go through.

use std::time::Duration;

use harness_testkit::{
    Cli, FINAL_TEXT, GateScenario, INSIDE_TEXT, OutsideRead, SECRET_TEXT, require_cli,
    run_with_deadline, workspace_root,
};

const DEADLINE: Duration = Duration::from_secs(60);

fn gate_binary() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_harness-gate"))
}

/// Asserts the three requests: the first read blocked by the gate with its reason in the next
/// request, the second read's content in the third, and the secret nowhere.
fn assert_blocked_then_allowed(scenario: &GateScenario) {
    let calls = scenario.model().messages_calls();
    assert_eq!(calls.len(), 3, "expected 3 Messages API calls: {calls:#?}");
    let steps = scenario.steps();
    let blocked = steps[0].result.as_ref().expect("the outside read has a result");
    assert!(blocked.is_error, "the outside read must be an error: {blocked:#?}");
    assert!(
        blocked.text.contains("harness-gate: blocked")
            && blocked.text.contains("outside-workspace"),
        "the gate's reason must reach the model: {blocked:#?}"
    );
    let allowed = steps[1].result.as_ref().expect("the inside read has a result");
    assert!(!allowed.is_error && allowed.text.contains(INSIDE_TEXT), "{allowed:#?}");
    for call in &calls {
        assert!(!call.raw_body.contains(SECRET_TEXT), "the secret reached the model: {call:#?}");
    }
    scenario.model().assert_finished();
}

#[test]
fn claude_code_hook_blocks_outside_and_allows_inside() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let scenario = GateScenario::new(Cli::Claude, gate_binary()).unwrap();
    let output = scenario.run(&claude, DEADLINE).unwrap();
    output.assert_success();

    assert!(
        scenario.canary_ran(),
        "the SessionStart canary did not run: settings ignored? {output}"
    );
    assert_blocked_then_allowed(&scenario);
    let result: serde_json::Value = serde_json::from_str(&output.stdout).unwrap();
    assert_eq!(result["result"], FINAL_TEXT, "{output}");
    let denials = result["permission_denials"].to_string();
    assert!(denials.contains("secret.txt"), "the block is listed as a denial: {denials}");
}

#[test]
fn pi_extension_blocks_outside_and_allows_inside() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let scenario = GateScenario::new(Cli::Pi, gate_binary()).unwrap();
    let output = scenario.run(&pi, DEADLINE).unwrap();
    output.assert_success();

    assert_eq!(output.stdout.trim_end(), FINAL_TEXT, "{output}");
    assert_blocked_then_allowed(&scenario);
}

#[test]
fn claude_code_hook_blocks_a_symlink_inside_that_leads_outside() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let scenario =
        GateScenario::with_outside_read(Cli::Claude, gate_binary(), OutsideRead::ThroughSymlink)
            .unwrap();
    scenario.run(&claude, DEADLINE).unwrap().assert_success();
    assert!(scenario.canary_ran());
    assert_blocked_then_allowed(&scenario);
}

#[test]
fn pi_extension_blocks_a_symlink_inside_that_leads_outside() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let scenario =
        GateScenario::with_outside_read(Cli::Pi, gate_binary(), OutsideRead::ThroughSymlink)
            .unwrap();
    scenario.run(&pi, DEADLINE).unwrap().assert_success();
    assert_blocked_then_allowed(&scenario);
}

#[test]
fn claude_code_wrapper_blocks_when_the_gate_is_missing() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let missing = workspace_root().join("target/no-such-gate");
    let scenario = GateScenario::new(Cli::Claude, &missing).unwrap();
    let output = scenario.run(&claude, DEADLINE).unwrap();
    output.assert_success();
    let steps = scenario.steps();
    for step in &steps {
        let result = step.result.as_ref().expect("a result");
        assert!(result.is_error && !result.text.contains(SECRET_TEXT), "{result:#?}");
    }
}

#[test]
fn pi_refuses_to_start_without_the_gate_settings() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let scenario = GateScenario::new(Cli::Pi, gate_binary()).unwrap();
    let mut command = scenario.command(&pi);
    command.env_remove("MOSAIC_GATE");
    let output = run_with_deadline(command, DEADLINE).unwrap();
    assert!(!output.status.success(), "Pi must refuse to start: {output}");
    assert!(output.stderr.contains("MOSAIC_GATE"), "{output}");
    let requests = scenario.model().requests();
    assert!(requests.is_empty(), "no request may be sent: {requests:#?}");
}

#[test]
fn pi_blocks_when_the_gate_binary_is_missing() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let missing = workspace_root().join("target/no-such-gate");
    let scenario = GateScenario::new(Cli::Pi, &missing).unwrap();
    let output = scenario.run(&pi, DEADLINE).unwrap();
    output.assert_success();
    for step in scenario.steps() {
        let result = step.result.expect("a result");
        assert!(
            result.is_error && result.text.contains("harness-gate could not run"),
            "{result:#?}"
        );
    }
}
