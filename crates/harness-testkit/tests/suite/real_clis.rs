//! The real CLIs against the scripted model: each is scripted to read a file in its work
//! directory, then answer with text. This proves the SSE shape, the sandbox environment and the
//! request helpers against the programs the project actually drives.
//!
//! These tests skip loudly when the CLIs are not installed, and fail with `HARNESS_REQUIRE_CLIS=1`.

use std::process::Command;
use std::time::{Duration, Instant};

use harness_testkit::{
    Cli, CliPaths, CliSandbox, Outcome, PI_MODEL_ARG, RecordedRequest, Reply, Script,
    ScriptedModel, require_cli, run_with_deadline,
};
use serde_json::{Value, json};

/// docs/clis.md: a scenario takes 2 to 4 s on a busy 2-core box; 60 s means something hung.
const DEADLINE: Duration = Duration::from_secs(60);
const FILE_NAME: &str = "hello.txt";
const FILE_TEXT: &str = "hello from the sandboxed work dir";
const FINAL_TEXT: &str = "The file greets the work dir.";
const SYSTEM_PROMPT: &str = "You are the harness-testkit test agent.";

/// Starts an empty model and a sandbox around it, with the file to read in the work directory.
fn setup() -> (ScriptedModel, CliSandbox) {
    let model = ScriptedModel::start(Script::default()).unwrap();
    let sandbox = CliSandbox::new(&model).unwrap();
    std::fs::write(sandbox.work_dir().join(FILE_NAME), format!("{FILE_TEXT}\n")).unwrap();
    (model, sandbox)
}

/// Asserts the conversation: two calls, the first offering `tool` and our system prompt, the
/// second carrying the file's content as the result of `toolu_read_1`.
fn assert_conversation(calls: &[RecordedRequest], tool: &str) {
    assert_eq!(calls.len(), 2, "expected 2 Messages API calls: {calls:#?}");
    assert!(calls[0].tool_names().iter().any(|name| name == tool), "{:?}", calls[0].tool_names());
    assert!(calls[0].system_text().contains(SYSTEM_PROMPT), "{}", calls[0].system_text());
    assert!(calls[0].all_text().contains("Read hello.txt"), "{}", calls[0].all_text());
    let results = calls[1].tool_results();
    assert_eq!(results.len(), 1, "{results:#?}");
    assert_eq!(results[0].tool_use_id, "toolu_read_1");
    assert!(!results[0].is_error, "{results:#?}");
    assert!(results[0].text.contains(FILE_TEXT), "{results:#?}");
}

fn claude_command(sandbox: &CliSandbox, claude: &CliPaths) -> Command {
    let mut command = sandbox.command(claude);
    command.args([
        "-p",
        "Read hello.txt",
        "--output-format",
        "json",
        "--restricted",
        "--disable-slash-commands",
        "--tools",
        "Read",
        "--permission-mode",
        "dontAsk",
        "--system-prompt",
        SYSTEM_PROMPT,
        "--no-session-persistence",
    ]);
    command
}

fn pi_command(sandbox: &CliSandbox, pi: &CliPaths) -> Command {
    let mut command = sandbox.command(pi);
    command.args([
        "-p",
        "--model",
        PI_MODEL_ARG,
        "--thinking",
        "off",
        "--no-skills",
        "--no-extensions",
        "--no-context-files",
        "--no-prompt-templates",
        "--no-themes",
        "--tools",
        "read",
        "--no-session",
        "--system-prompt",
        SYSTEM_PROMPT,
        "Read hello.txt",
    ]);
    command
}

#[test]
fn claude_reads_a_file_and_answers() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let (model, sandbox) = setup();
    let file = sandbox.work_dir().canonicalize().unwrap().join(FILE_NAME);
    model.push_replies([
        Reply::tool_use("toolu_read_1", "Read", json!({"file_path": file})),
        Reply::text(FINAL_TEXT),
    ]);

    let command = claude_command(&sandbox, &claude);
    let output = run_with_deadline(command, DEADLINE).unwrap();
    output.assert_success();

    let result: Value = serde_json::from_str(&output.stdout)
        .unwrap_or_else(|error| panic!("stdout is not one JSON object ({error}): {output}"));
    assert_eq!(result["result"], FINAL_TEXT, "{output}");
    assert_eq!(result["is_error"], false, "{output}");
    assert_conversation(&model.messages_calls(), "Read");
    assert_eq!(model.requests().len(), 2, "a request other than the two Messages API calls");
    assert!(
        model.messages_calls()[0].header("x-api-key") == Some("sk-ant-fake"),
        "the sandbox's fake key must be the one sent"
    );
    // The config dir really was the sandbox's: Claude Code writes its state file there on first run.
    assert!(sandbox.claude_config_dir().join(".claude.json").is_file());
    model.assert_finished();
}

#[test]
fn pi_reads_a_file_and_answers() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let (model, sandbox) = setup();
    model.push_replies([
        Reply::tool_use("toolu_read_1", "read", json!({"path": FILE_NAME})),
        Reply::text(FINAL_TEXT),
    ]);

    let command = pi_command(&sandbox, &pi);
    let output = run_with_deadline(command, DEADLINE).unwrap();
    output.assert_success();

    assert_eq!(output.stdout.trim_end(), FINAL_TEXT, "{output}");
    assert_conversation(&model.messages_calls(), "read");
    assert_eq!(model.requests().len(), 2, "a request other than the two Messages API calls");
    model.assert_finished();
}

/// With nothing scripted, the first request gets the model's 400 and the CLI must give up at once
/// (retries are off in the sandbox), not hang or retry until the deadline.
fn assert_fails_fast(cli: &CliPaths, command: Command, model: &ScriptedModel) {
    let started = Instant::now();
    let output = run_with_deadline(command, DEADLINE).unwrap();
    let took = started.elapsed();
    assert!(!output.status.success(), "{output}");
    assert!(took < Duration::from_secs(20), "{} took {took:?} to give up: {output}", cli.cli());
    let requests = model.requests();
    assert_eq!(requests.len(), 1, "{} retried: {requests:#?}", cli.cli());
    assert!(matches!(requests[0].outcome, Outcome::Unscripted(_)));
    assert!(
        format!("{}{}", output.stdout, output.stderr).contains("was not scripted"),
        "the CLI should show the model's error: {output}"
    );
}

#[test]
fn claude_fails_fast_on_an_unscripted_request() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let (model, sandbox) = setup();
    assert_fails_fast(&claude, claude_command(&sandbox, &claude), &model);
}

#[test]
fn pi_fails_fast_on_an_unscripted_request() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let (model, sandbox) = setup();
    assert_fails_fast(&pi, pi_command(&sandbox, &pi), &model);
}
