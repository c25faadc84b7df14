//! Issue 4's "done when": the Claude Code bundle's own settings.json and mcp.json, handed to the
//! real Claude Code 2.1.296 against the scripted model, block a scripted Read outside the
//! workspace and list the typed tools. The bundle points at the workspace's real binaries
//! (harness-gate, harness-mcp, harness-unslop), built by the same `cargo test --workspace`.

use std::time::Duration;

use harness_adapters::InstallLayout;
use harness_bundle::build_bundle;
use harness_testkit::{
    Cli, CliSandbox, Reply, RoleFixture, Script, ScriptedModel, require_cli, run_with_deadline,
    workspace_binary, workspace_root,
};
use serde_json::json;

const SECRET: &str = "a secret beside the workspace";

#[test]
fn the_claude_code_bundle_blocks_an_outside_read_and_lists_the_typed_tools() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let gate = workspace_binary("harness-gate");
    let bin_dir = gate.parent().unwrap().to_path_buf();
    let _ = workspace_binary("harness-mcp");
    let _ = workspace_binary("harness-unslop");
    let model = ScriptedModel::start(Script::default()).unwrap();
    let sandbox = CliSandbox::new(&model).unwrap();
    let work = sandbox.work_dir().canonicalize().unwrap();
    let secret = sandbox.root().join("secret.txt");
    std::fs::write(&secret, SECRET).unwrap();

    let root = workspace_root();
    // The pm fixture routes to Claude Code on its own.
    let fixture = RoleFixture::as_is("pm").unwrap();
    assert_eq!(fixture.harness.name(), "claude-code");
    let install = InstallLayout::from_checkout(&root, &harness_testkit::utf8(&bin_dir).unwrap());
    let bundle = build_bundle(
        &fixture.request(sandbox.root().join("bundle"), work.clone(), install).unwrap(),
    )
    .unwrap()
    .dir;
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    let typed: Vec<String> = manifest["typedTools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|name| format!("mcp__mosaic__{}", name.as_str().unwrap()))
        .collect();
    let cli_tools: Vec<&str> =
        manifest["cliTools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();

    model.push_replies([
        Reply::tool_use("toolu_out", "Read", json!({"file_path": secret})),
        Reply::text("Blocked, as it should be."),
    ]);
    let mut command = sandbox.command(&claude);
    command.env("MOSAIC_UNSLOP_LOG", sandbox.root().join("unslop.jsonl"));
    command.env("MOSAIC_TOOLS_SOCK", sandbox.root().join("tools.sock"));
    command.args([
        "-p",
        "Read the secret",
        "--output-format",
        "json",
        "--restricted",
        "--disable-slash-commands",
    ]);
    command.arg("--settings").arg(bundle.join("settings.json"));
    command.arg("--mcp-config").arg(bundle.join("mcp.json")).arg("--strict-mcp-config");
    command.args([
        "--tools",
        &cli_tools.join(","),
        "--permission-mode",
        "dontAsk",
        "--no-session-persistence",
    ]);
    command.arg("--system-prompt").arg(std::fs::read_to_string(bundle.join("prompt.md")).unwrap());
    let output = run_with_deadline(command, Duration::from_secs(90)).unwrap();
    output.assert_success();

    let calls = model.messages_calls();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    let offered = calls[0].tool_names();
    for name in &typed {
        assert!(offered.contains(name), "{name} is not offered: {offered:?}");
    }
    assert!(offered.iter().any(|name| name == "Read"), "{offered:?}");
    assert!(!offered.iter().any(|name| name == "Bash"), "--restricted removes Bash: {offered:?}");
    let blocked = calls[1].tool_results();
    assert_eq!(blocked.len(), 1, "{blocked:#?}");
    assert!(blocked[0].is_error, "{blocked:#?}");
    assert!(blocked[0].text.contains("harness-gate: blocked"), "the gate blocked it: {blocked:#?}");
    for call in &calls {
        assert!(!call.raw_body.contains(SECRET), "the secret reached the model");
    }
    // The unslop Stop hook ran on the last reply.
    let log = std::fs::read_to_string(sandbox.root().join("unslop.jsonl")).unwrap_or_default();
    assert!(
        log.contains("\"event\":\"checked\"") || log.contains("\"event\":\"flagged\""),
        "{log}"
    );
    model.assert_finished();
}
