//! The gate inside the real CLIs (issue 2, item 8): Claude Code 2.1.296 with a PreToolUse hook
//! (matcher `*`) running `harness-gate claude-hook`, and Pi 0.85.1 with an `-e` extension calling
//! `harness-gate check` (harness-testkit's `GateScenario`). Each is scripted to read a secret
//! outside its workspace, then a file inside, then answer. The block reason must reach the
//! model's next request, the secret must never reach it, and the inside read must go through.
//! The issue 11 tests below drive the same CLIs with their own scripted calls: a `file://` URL
//! climbing over a drive-letter segment and writes into `.git` through Pi, and Glob bases that
//! Claude Code trims or takes literally through Claude Code's hook.

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

/// Runs `check` once per real CLI, each as its own test (`…::pi`, `…::claude_code`): the same
/// S0 line, proven on both.
macro_rules! on_both_clis {
    ($name:ident, $check:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn pi() {
                ($check)(Cli::Pi);
            }

            #[test]
            fn claude_code() {
                ($check)(Cli::Claude);
            }
        }
    };
}

/// Runs the scenario with the outside read spelled `how` on `cli` and checks the block, the
/// inside read and the answer; on Claude Code also the SessionStart canary (settings read).
fn blocks_outside_and_allows_inside(cli: Cli, how: OutsideRead) {
    let Some(paths) = require_cli(cli) else { return };
    let scenario = GateScenario::with_outside_read(cli, gate_binary(), how).unwrap();
    let output = scenario.run(&paths, DEADLINE).unwrap();
    output.assert_success();
    assert_blocked_then_allowed(&scenario);
    match cli {
        Cli::Claude => {
            assert!(scenario.canary_ran(), "the SessionStart canary did not run: {output}");
            let result: serde_json::Value = serde_json::from_str(&output.stdout).unwrap();
            assert_eq!(result["result"], FINAL_TEXT, "{output}");
            let denials = result["permission_denials"].as_array();
            assert!(denials.is_some_and(|d| d.len() == 1), "the block is a denial: {output}");
        }
        Cli::Pi => assert_eq!(output.stdout.trim_end(), FINAL_TEXT, "{output}"),
    }
}

on_both_clis!(the_gate_blocks_outside_and_allows_inside, |cli| {
    blocks_outside_and_allows_inside(cli, OutsideRead::Direct)
});

on_both_clis!(the_gate_blocks_a_symlink_inside_that_leads_outside, |cli| {
    blocks_outside_and_allows_inside(cli, OutsideRead::ThroughSymlink)
});

#[test]
fn claude_code_wrapper_blocks_when_the_gate_is_missing() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let missing = workspace_root().join("target/no-such-gate");
    let scenario = GateScenario::new(Cli::Claude, missing.as_std_path()).unwrap();
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
    let scenario = GateScenario::new(Cli::Pi, missing.as_std_path()).unwrap();
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

/// A workspace, a policy and the scripted calls for the real Pi 0.85.1 with the gate's
/// extension; `run` returns the requests the model received.
struct PiRun {
    model: harness_testkit::ScriptedModel,
    sandbox: harness_testkit::CliSandbox,
    work: std::path::PathBuf,
    bundle: std::path::PathBuf,
}

impl PiRun {
    fn new(tools: &[&str]) -> Self {
        let model =
            harness_testkit::ScriptedModel::start(harness_testkit::Script::default()).unwrap();
        let sandbox = harness_testkit::CliSandbox::new(&model).unwrap();
        let work = sandbox.work_dir().canonicalize().unwrap();
        let bundle = sandbox.root().join("bundle");
        std::fs::create_dir_all(&bundle).unwrap();
        std::fs::write(bundle.join("tools.json"), r#"{"tools": []}"#).unwrap();
        let policy =
            serde_json::json!({"harness": "pi", "workspace": work, "tools": tools, "typed": []});
        std::fs::write(bundle.join("policy.json"), policy.to_string()).unwrap();
        Self { model, sandbox, work, bundle }
    }

    fn run(
        &self,
        pi: &harness_testkit::CliPaths,
        tools: &[&str],
        calls: &[(&str, &str, serde_json::Value)],
    ) -> Vec<harness_testkit::RecordedRequest> {
        let mut replies: Vec<harness_testkit::Reply> = calls
            .iter()
            .map(|(id, tool, input)| harness_testkit::Reply::tool_use(*id, *tool, input.clone()))
            .collect();
        replies.push(harness_testkit::Reply::text(FINAL_TEXT));
        self.model.push_replies(replies);
        let root = self.sandbox.root();
        let extension = workspace_root().join("crates/harness-adapters/assets/pi/extension.mjs");
        let mut command = self.sandbox.command(pi);
        command
            .env("MOSAIC_GATE", gate_binary())
            .env("MOSAIC_BUNDLE", &self.bundle)
            .env("MOSAIC_TOOLS_SOCK", root.join("tools.sock"))
            .env("MOSAIC_TURN_MARKER", root.join("turn.marker"))
            .args(["-p", "--model", harness_testkit::PI_MODEL_ARG, "--thinking", "off"])
            .args(["--no-skills", "--no-extensions", "--no-context-files"])
            .args(["--no-prompt-templates", "--no-themes", "-e"])
            .arg(extension)
            .args(["--tools", &tools.join(","), "--no-session", "--system-prompt", "Gate test."])
            .arg("Do the calls");
        run_with_deadline(command, DEADLINE).unwrap().assert_success();
        self.model.assert_finished();
        self.model.messages_calls()
    }
}

/// Asserts that the call `id` came back as the gate's block with `rule`.
fn assert_gate_blocked(requests: &[harness_testkit::RecordedRequest], id: &str, rule: &str) {
    let results: Vec<_> = requests.iter().flat_map(|call| call.tool_results()).collect();
    let result = results.iter().find(|result| result.tool_use_id == id);
    let result = result.unwrap_or_else(|| panic!("no result for {id}: {results:#?}"));
    assert!(
        result.is_error
            && result.text.contains("harness-gate: blocked")
            && result.text.contains(rule),
        "{id} must be blocked by the gate with {rule}: {result:#?}"
    );
}

/// Issue 11's headline escape, end to end through the real Pi 0.85.1 and its extension: a
/// `file://` URL with a drive-letter-shaped segment (`C|`) after the first, then `..`. Node's
/// `fileURLToPath` lets `..` remove that segment, so the URL names the secret beside the
/// workspace, a new file there, and the directory that holds them. Each call must be blocked
/// with the gate's reason, the secret and its directory listing must never reach the model, no
/// file may appear outside, and a read inside still goes through.
#[test]
fn pi_extension_blocks_a_file_url_that_climbs_over_a_drive_letter() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let tools = ["read", "write", "ls"];
    let run = PiRun::new(&tools);
    let outside = run.work.parent().unwrap().to_path_buf();
    std::fs::write(outside.join("secret.txt"), SECRET_TEXT).unwrap();
    std::fs::write(run.work.join("notes.txt"), INSIDE_TEXT).unwrap();
    let url = |tail: &str| format!("file://{}/C|/../..{tail}", run.work.display());
    let calls = [
        ("toolu_read", "read", serde_json::json!({"path": url("/secret.txt")})),
        ("toolu_write", "write", serde_json::json!({"path": url("/planted.txt"), "content": "x"})),
        ("toolu_ls", "ls", serde_json::json!({"path": url("")})),
        ("toolu_inside", "read", serde_json::json!({"path": "notes.txt"})),
    ];
    let requests = run.run(&pi, &tools, &calls);
    for (id, _, _) in &calls[..3] {
        assert_gate_blocked(&requests, id, "outside-workspace");
    }
    let results: Vec<_> = requests.iter().flat_map(|call| call.tool_results()).collect();
    let inside = results.iter().find(|result| result.tool_use_id == "toolu_inside").unwrap();
    assert!(!inside.is_error && inside.text.contains(INSIDE_TEXT), "{inside:#?}");
    for request in &requests {
        assert!(!request.raw_body.contains(SECRET_TEXT), "the secret reached the model");
        assert!(!request.raw_body.contains("secret.txt\\n"), "the listing reached the model");
    }
    assert!(!outside.join("planted.txt").exists(), "a file was written outside the workspace");
}

/// Issue 11, item 8, through the real Pi: write and edit of git metadata inside the workspace,
/// by name, through `..`, through a link to `.git`, and through a `file://` URL, are blocked
/// with `git-metadata` and leave `.git/config` as it was; a write beside it passes.
#[test]
fn pi_extension_blocks_writes_into_git_metadata() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let tools = ["write", "edit"];
    let run = PiRun::new(&tools);
    std::fs::create_dir_all(run.work.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(run.work.join("sub")).unwrap();
    std::fs::write(run.work.join(".git/config"), "[core]\n").unwrap();
    std::os::unix::fs::symlink(".git", run.work.join("g")).unwrap();
    let edit = |path: &str| serde_json::json!({"path": path, "edits": [{"oldText": "[core]", "newText": "[core]\n\tfsmonitor = x"}]});
    let url = format!("file://{}/sub/%2e%2e/.git/hooks/pre-commit", run.work.display());
    let calls = [
        ("toolu_config", "write", serde_json::json!({"path": ".git/config", "content": "x"})),
        ("toolu_dotdot", "edit", edit("./sub/../.git/config")),
        (
            "toolu_link",
            "write",
            serde_json::json!({"path": "g/hooks/post-checkout", "content": "x"}),
        ),
        ("toolu_url", "write", serde_json::json!({"path": url, "content": "x"})),
        ("toolu_beside", "write", serde_json::json!({"path": ".gitignore", "content": "x"})),
    ];
    let requests = run.run(&pi, &tools, &calls);
    for (id, _, _) in &calls[..4] {
        assert_gate_blocked(&requests, id, "git-metadata");
    }
    assert_eq!(std::fs::read_to_string(run.work.join(".git/config")).unwrap(), "[core]\n");
    assert!(!run.work.join(".git/hooks/post-checkout").exists());
    assert!(!run.work.join(".git/hooks/pre-commit").exists());
    assert_eq!(std::fs::read_to_string(run.work.join(".gitignore")).unwrap(), "x");
}

/// Issue 11's Glob escape, end to end through the real Claude Code 2.1.296 and its PreToolUse
/// hook (no `--restricted`): absolute Glob patterns whose search base, as Claude Code cuts and
/// trims it, is the directory holding the secret: `WORK/..<U+00A0>/*` (trimmed to `WORK/..`) and
/// `WORK/l!nk/*` with `l!nk` a link to it (`!` is literal to Claude Code). The gate must block
/// both with its own reason, so the secret's name never reaches the model; a Glob inside passes.
#[test]
fn claude_code_hook_blocks_glob_bases_that_claude_code_trims_or_takes_literally() {
    use harness_testkit::{CliSandbox, Reply, Script, ScriptedModel};

    let Some(claude) = require_cli(Cli::Claude) else { return };
    let model = ScriptedModel::start(Script::default()).unwrap();
    let sandbox = CliSandbox::new(&model).unwrap();
    let work = sandbox.work_dir().canonicalize().unwrap();
    let root = sandbox.root().canonicalize().unwrap();
    let outside = work.parent().unwrap().to_path_buf();
    let secret_name = "secret-name-4417.txt";
    std::fs::write(outside.join(secret_name), SECRET_TEXT).unwrap();
    std::fs::write(work.join("notes.txt"), INSIDE_TEXT).unwrap();
    std::os::unix::fs::symlink(&outside, work.join("l!nk")).unwrap();
    let policy = root.join("policy.json");
    let text = serde_json::json!({"harness": "claude-code", "workspace": work, "tools": ["Glob"], "typed": []});
    std::fs::write(&policy, text.to_string()).unwrap();
    let quote =
        |path: &std::path::Path| format!("'{}'", path.display().to_string().replace('\'', r"'\''"));
    let hook = format!(
        "timeout -k 2 10 {} claude-hook --policy {} || exit 2",
        quote(gate_binary()),
        quote(&policy)
    );
    let settings = serde_json::json!({"hooks": {"PreToolUse": [
        {"matcher": "*", "hooks": [{"type": "command", "command": hook, "timeout": 20}]}
    ]}});
    let settings_path = root.join("settings.json");
    std::fs::write(&settings_path, settings.to_string()).unwrap();

    let work_text = work.display().to_string();
    let calls = [
        ("toolu_trimmed", serde_json::json!({"pattern": format!("{work_text}/..\u{a0}/*")})),
        ("toolu_literal", serde_json::json!({"pattern": format!("{work_text}/l!nk/*")})),
        ("toolu_inside", serde_json::json!({"pattern": format!("{work_text}/*.txt")})),
    ];
    let mut replies: Vec<Reply> =
        calls.iter().map(|(id, input)| Reply::tool_use(*id, "Glob", input.clone())).collect();
    replies.push(Reply::text(FINAL_TEXT));
    model.push_replies(replies);

    let mut command = sandbox.command(&claude);
    command
        .args(["-p", "List the files", "--output-format", "json", "--disable-slash-commands"])
        .args(["--tools", "Glob", "--permission-mode", "dontAsk"])
        .arg("--settings")
        .arg(&settings_path)
        .args(["--no-session-persistence", "--system-prompt", "Gate test."]);
    let output = run_with_deadline(command, DEADLINE).unwrap();
    output.assert_success();

    let requests = model.messages_calls();
    let results: Vec<_> = requests.iter().flat_map(|call| call.tool_results()).collect();
    for (id, input) in &calls[..2] {
        let result = results.iter().find(|result| result.tool_use_id == *id);
        let result = result.unwrap_or_else(|| panic!("no result for {input}: {results:#?}"));
        assert!(
            result.is_error
                && result.text.contains("harness-gate: blocked")
                && result.text.contains("outside-workspace"),
            "Glob {input} must be blocked by the gate: {result:#?}"
        );
    }
    let inside = results.iter().find(|result| result.tool_use_id == "toolu_inside").unwrap();
    assert!(!inside.is_error && inside.text.contains("notes.txt"), "{inside:#?}");
    for request in &requests {
        assert!(!request.raw_body.contains(secret_name), "the secret's name reached the model");
    }
    model.assert_finished();
}
