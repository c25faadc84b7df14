//! The typed tools inside the real Claude Code 2.1.296 (issue 3, item 6): Claude Code starts
//! harness-mcp from an `--mcp-config` naming one stdio server, `mosaic`; the scripted model calls
//! `mcp__mosaic__list_tasks` three times, and each call travels MCP → tool socket → scripted
//! broker. The broker's log shows the verb, the arguments with `done: false`, and the
//! capability; the model's next request carries the compact JSON reply, then `refused: <code>`,
//! then the reply-cap error. It runs twice: with the paths in mcp.json's `env`, and with
//! `--tools` in mcp.json and `MOSAIC_TOOLS_SOCK` only in Claude Code's own environment (as the
//! runner sets it), which proves Claude Code passes its environment on to the server.

use std::time::Duration;

use harness_testkit::{
    BrokerAnswer, Cli, CliSandbox, Reply, Script, ScriptedModel, require_cli, run_with_deadline,
};
use harness_tools::REPLY_CAP;
use serde_json::json;

use super::session::{CAP, Session, mcp_binary};

const DEADLINE: Duration = Duration::from_secs(90);
const FINAL_TEXT: &str = "Three calls made.";

/// How harness-mcp learns where tools.json and the tool socket are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wiring {
    /// mcp.json's `env` sets `MOSAIC_BUNDLE` and `MOSAIC_TOOLS_SOCK`.
    ConfigEnv,
    /// mcp.json passes `--tools`; `MOSAIC_TOOLS_SOCK` is in Claude Code's own environment, as
    /// the runner sets it for the adapter, and reaches the server only if Claude Code passes
    /// its environment on.
    InheritedSocket,
}

#[test]
fn claude_code_calls_a_typed_tool_through_harness_mcp_and_the_tool_socket() {
    scenario(Wiring::ConfigEnv);
}

#[test]
fn the_tool_socket_variable_reaches_harness_mcp_from_claude_codes_environment() {
    scenario(Wiring::InheritedSocket);
}

fn scenario(wiring: Wiring) {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let session = Session::start("pm");
    let tasks = json!({"tasks": [{"ref": "T-7", "title": "Fix the login"}], "total": 1});
    session.broker.answer_once("tasks", BrokerAnswer::result(tasks));
    session.broker.answer_once("tasks", BrokerAnswer::refuse("tracker-unavailable"));
    session
        .broker
        .answer_once("tasks", BrokerAnswer::result(json!({"blob": "x".repeat(REPLY_CAP)})));

    let model = ScriptedModel::start(Script::new([
        Reply::tool_use("toolu_ok", "mcp__mosaic__list_tasks", json!({})),
        Reply::tool_use("toolu_refused", "mcp__mosaic__list_tasks", json!({"label": "bug"})),
        Reply::tool_use("toolu_big", "mcp__mosaic__list_tasks", json!({"done": true})),
        Reply::text(FINAL_TEXT),
    ]))
    .unwrap();
    let sandbox = CliSandbox::new(&model).unwrap();
    let mcp_config = match wiring {
        Wiring::ConfigEnv => json!({"mcpServers": {"mosaic": {
            "type": "stdio",
            "command": mcp_binary(),
            "args": [],
            "env": {"MOSAIC_BUNDLE": session.bundle(), "MOSAIC_TOOLS_SOCK": session.tools_sock()},
        }}}),
        Wiring::InheritedSocket => json!({"mcpServers": {"mosaic": {
            "type": "stdio",
            "command": mcp_binary(),
            "args": ["--tools", session.bundle().join("tools.json")],
        }}}),
    };
    let mcp_path = sandbox.root().join("mcp.json");
    std::fs::write(&mcp_path, serde_json::to_string_pretty(&mcp_config).unwrap()).unwrap();
    let settings_path = sandbox.root().join("settings.json");
    let settings = json!({"permissions": {"allow": ["mcp__mosaic"]}});
    std::fs::write(&settings_path, serde_json::to_string_pretty(&settings).unwrap()).unwrap();

    let mut command = sandbox.command(&claude);
    if wiring == Wiring::InheritedSocket {
        command.env("MOSAIC_TOOLS_SOCK", session.tools_sock());
    }
    command.args(["-p", "List the open tasks", "--output-format", "json"]);
    command.args(["--restricted", "--disable-slash-commands", "--tools", ""]);
    command.arg("--settings").arg(&settings_path);
    command.arg("--mcp-config").arg(&mcp_path).arg("--strict-mcp-config");
    command.args(["--permission-mode", "dontAsk", "--no-session-persistence"]);
    command.args(["--system-prompt", "You are the typed-tools scenario's agent."]);
    let output = run_with_deadline(command, DEADLINE).unwrap();
    output.assert_success();

    let calls = model.messages_calls();
    assert_eq!(calls.len(), 4, "{output}\n{calls:#?}");
    let listed = calls[0].tool_names();
    for tool in ["mcp__mosaic__list_tasks", "mcp__mosaic__get_task", "mcp__mosaic__read_spec"] {
        assert!(listed.iter().any(|name| name == tool), "{tool} not listed: {listed:?}");
    }
    assert!(!listed.iter().any(|name| name == "mcp__mosaic__end_run"), "{listed:?}");

    let broker_calls = session.broker.calls();
    let verbs: Vec<&str> = broker_calls.iter().map(|call| call.verb.as_str()).collect();
    assert_eq!(verbs, ["tasks", "tasks", "tasks"], "{broker_calls:#?}");
    assert_eq!(broker_calls[0].args, json!({"done": false, "limit": 50, "descriptions": false}));
    assert_eq!(broker_calls[1].args["label"], "bug");
    assert_eq!(broker_calls[2].args["done"], true);
    assert!(broker_calls.iter().all(|call| call.cap == CAP));

    let result = |index: usize, id: &str| {
        let results = calls[index].tool_results();
        results.into_iter().find(|r| r.tool_use_id == id).unwrap_or_else(|| {
            panic!("request {index} has no result for {id}: {:#?}", calls[index].messages())
        })
    };
    let ok = result(1, "toolu_ok");
    assert!(!ok.is_error, "{ok:#?}");
    assert_eq!(ok.text, r#"{"tasks":[{"ref":"T-7","title":"Fix the login"}],"total":1}"#);
    let refused = result(2, "toolu_refused");
    assert!(refused.is_error, "{refused:#?}");
    assert!(refused.text.contains("refused: tracker-unavailable"), "{refused:#?}");
    let big = result(3, "toolu_big");
    assert!(big.is_error, "{big:#?}");
    assert!(
        big.text.contains("reply-too-large: the reply is 40011 characters, over the cap of 40000"),
        "{big:#?}"
    );
    for call in &calls {
        assert!(!call.raw_body.contains(CAP), "the capability reached the model");
    }
    let reply: serde_json::Value = serde_json::from_str(&output.stdout).unwrap();
    assert_eq!(reply["result"], FINAL_TEXT, "{output}");
    model.assert_finished();
}
