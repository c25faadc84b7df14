//! The gate inside the real CLIs (issue 2, item 8): Claude Code 2.1.296 with a PreToolUse hook
//! (matcher `*`) running `harness-gate claude-hook`, and Pi 0.85.1 with an `-e` extension calling
//! `harness-gate check`. Each is scripted to read a secret outside its workspace, then a file
//! inside, then answer. The block reason must reach the model's next request, the secret must
//! never reach it, and the inside read must go through.
//!
//! Claude Code runs without `--restricted` here, so the gate is the only thing between the model
//! and the secret. A SessionStart canary proves the settings file was read (an invalid one is
//! silently ignored and then no hook runs at all).

use std::path::{Path, PathBuf};
use std::time::Duration;

use harness_testkit::{
    Cli, CliSandbox, PI_MODEL_ARG, Reply, Script, ScriptedModel, require_cli, run_with_deadline,
    workspace_root,
};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(60);
const SECRET: &str = "the founder's secret, never for the model";
const INSIDE: &str = "inside the workspace, fine to read";
const FINAL: &str = "One read was blocked, one went through.";

struct Session {
    model: ScriptedModel,
    sandbox: CliSandbox,
    policy: PathBuf,
    secret: PathBuf,
    inside: PathBuf,
}

fn session(harness: &str, tools: &[&str]) -> Session {
    let model = ScriptedModel::start(Script::default()).unwrap();
    let sandbox = CliSandbox::new(&model).unwrap();
    let work = sandbox.work_dir().canonicalize().unwrap();
    let secret = sandbox.root().join("secret.txt");
    std::fs::write(&secret, SECRET).unwrap();
    let inside = work.join("notes.txt");
    std::fs::write(&inside, INSIDE).unwrap();
    let policy = sandbox.root().join("policy.json");
    let text = json!({"harness": harness, "workspace": work, "tools": tools, "typed": []});
    std::fs::write(&policy, text.to_string()).unwrap();
    Session { model, sandbox, policy, secret, inside }
}

fn gate_binary() -> &'static str {
    env!("CARGO_BIN_EXE_harness-gate")
}

/// Quotes `path` for `/bin/sh`.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// Asserts the three requests: the first read blocked by the gate with its reason in the next
/// request, the second read's content in the third, and the secret nowhere.
fn assert_blocked_then_allowed(model: &ScriptedModel) {
    let calls = model.messages_calls();
    assert_eq!(calls.len(), 3, "expected 3 Messages API calls: {calls:#?}");
    let blocked = calls[1].tool_results();
    assert_eq!(blocked.len(), 1, "{blocked:#?}");
    assert!(blocked[0].is_error, "the outside read must be an error: {blocked:#?}");
    assert!(
        blocked[0].text.contains("harness-gate: blocked")
            && blocked[0].text.contains("outside-workspace"),
        "the gate's reason must reach the model: {blocked:#?}"
    );
    let allowed = calls[2].tool_results();
    assert_eq!(allowed.len(), 1, "{allowed:#?}");
    assert!(!allowed[0].is_error && allowed[0].text.contains(INSIDE), "{allowed:#?}");
    for call in &calls {
        assert!(!call.raw_body.contains(SECRET), "the secret reached the model: {call:#?}");
    }
    model.assert_finished();
}

#[test]
fn claude_code_hook_blocks_outside_and_allows_inside() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let s = session("claude-code", &["Read"]);
    let canary = s.sandbox.root().join("session-start.canary");
    let hook = format!(
        "timeout -k 2 10 {} claude-hook --policy {} || exit 2",
        quoted(Path::new(gate_binary())),
        quoted(&s.policy)
    );
    let settings = json!({
        "hooks": {
            "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": hook, "timeout": 20}]}],
            "SessionStart": [{"hooks": [{"type": "command", "command": format!("echo ran > {}", quoted(&canary))}]}],
        }
    });
    let settings_path = s.sandbox.root().join("settings.json");
    std::fs::write(&settings_path, serde_json::to_string_pretty(&settings).unwrap()).unwrap();
    s.model.push_replies([
        Reply::tool_use("toolu_out", "Read", json!({"file_path": s.secret})),
        Reply::tool_use("toolu_in", "Read", json!({"file_path": s.inside})),
        Reply::text(FINAL),
    ]);

    let mut command = s.sandbox.command(&claude);
    command.args(["-p", "Read the two files", "--output-format", "json"]);
    command.args(["--disable-slash-commands", "--tools", "Read", "--permission-mode", "dontAsk"]);
    command.args(["--settings", settings_path.to_str().unwrap(), "--no-session-persistence"]);
    command.args(["--system-prompt", "You are the gate test agent."]);
    let output = run_with_deadline(command, DEADLINE).unwrap();
    output.assert_success();

    assert!(canary.is_file(), "the SessionStart canary did not run: settings ignored? {output}");
    assert_blocked_then_allowed(&s.model);
    let result: serde_json::Value = serde_json::from_str(&output.stdout).unwrap();
    assert_eq!(result["result"], FINAL, "{output}");
    let denials = result["permission_denials"].to_string();
    assert!(denials.contains("secret.txt"), "the block is listed as a denial: {denials}");
}

#[test]
fn pi_extension_blocks_outside_and_allows_inside() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let s = session("pi", &["read"]);
    let extension = workspace_root().join("fixtures/pi/gate-extension.mjs");
    s.model.push_replies([
        Reply::tool_use("toolu_out", "read", json!({"path": "../secret.txt"})),
        Reply::tool_use("toolu_in", "read", json!({"path": "notes.txt"})),
        Reply::text(FINAL),
    ]);

    let mut command = s.sandbox.command(&pi);
    command.env("MOSAIC_GATE", gate_binary()).env("MOSAIC_POLICY", &s.policy);
    command.args(["-p", "--model", PI_MODEL_ARG, "--thinking", "off", "--no-skills"]);
    command.args(["--no-extensions", "--no-context-files", "--no-prompt-templates", "--no-themes"]);
    command.args(["-e", extension.to_str().unwrap(), "--tools", "read", "--no-session"]);
    command.args(["--system-prompt", "You are the gate test agent.", "Read the two files"]);
    let output = run_with_deadline(command, DEADLINE).unwrap();
    output.assert_success();

    assert_eq!(output.stdout.trim_end(), FINAL, "{output}");
    assert_blocked_then_allowed(&s.model);
}

#[test]
fn pi_refuses_to_start_without_the_gate_settings() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let s = session("pi", &["read"]);
    let extension = workspace_root().join("fixtures/pi/gate-extension.mjs");
    let mut command = s.sandbox.command(&pi);
    command.args(["-p", "--model", PI_MODEL_ARG, "--no-extensions", "-e"]);
    command.args([extension.to_str().unwrap(), "--no-session", "hello"]);
    let output = run_with_deadline(command, DEADLINE).unwrap();
    assert!(!output.status.success(), "Pi must refuse to start: {output}");
    assert!(output.stderr.contains("MOSAIC_GATE"), "{output}");
    assert!(s.model.requests().is_empty(), "no request may be sent: {:#?}", s.model.requests());
}
