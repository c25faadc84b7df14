//! harness-mcp's logs (docs/runner.md, "Logs"): its start and each call's tool and outcome on
//! stderr, in both formats, and never a call's arguments, its reply or an unlisted tool's name.

use std::time::{Duration, Instant};

use harness_testkit::BrokerAnswer;
use serde_json::{Value, json};

use super::protocol::Mcp;
use super::session::Session;

/// In the arguments, the broker's reply and an unlisted tool's name: never in a log line.
const SECRET: &str = "quince-lantern-4408";

/// A session of three calls, the server started with `env` (one answered, one refused, one to a tool not listed); its stderr.
fn logged(env: &[(&str, &str)]) -> String {
    let session = Session::start("pm");
    let reply = json!({"tasks": [{"ref": "t-1", "title": SECRET}], "total": 1});
    session.broker.answer_once("tasks", BrokerAnswer::result(reply));
    session.broker.answer_once("tasks", BrokerAnswer::refuse("tracker-unavailable"));
    let mut mcp = Mcp::start_with(&session, env);
    mcp.handshake();
    let call = |id: u32, name: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}})
        .to_string()
    };
    mcp.send(&call(2, "list_tasks", json!({})));
    let answered = mcp.until(&json!(2)).pop().unwrap();
    assert!(answered.to_string().contains(SECRET), "the reply reached the model: {answered}");
    mcp.send(&call(3, "list_tasks", json!({"label": SECRET})));
    mcp.until(&json!(3));
    mcp.send(&call(4, &format!("no_such_{SECRET}"), json!({"x": SECRET})));
    mcp.until(&json!(4));
    let stderr = mcp.stderr.clone();
    mcp.finish();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !stderr.lock().unwrap().contains("harness-mcp exits") {
        assert!(Instant::now() < deadline, "no exit line: {}", stderr.lock().unwrap());
        std::thread::sleep(Duration::from_millis(10));
    }
    let text = stderr.lock().unwrap().clone();
    for line in text.lines() {
        assert!(!line.contains(SECRET), "a call's arguments, reply or name in a log line: {line}");
    }
    text
}

#[test]
fn human_logs_name_each_calls_tool_and_outcome_only() {
    // At trace, the most there is: rmcp's own events (which carry requests) are filtered out.
    let text = logged(&[("HARNESS_LOG", "trace")]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("harness-mcp serving on stdio"), "{text}");
    assert!(lines[0].contains("tools="), "{text}");
    let calls: Vec<&&str> = lines.iter().filter(|line| line.contains("tool call")).collect();
    assert_eq!(calls.len(), 3, "{text}");
    assert!(calls[0].contains("tool=list_tasks outcome=\"ok\""), "{text}");
    assert!(calls[1].contains("tool=list_tasks outcome=\"error\""), "{text}");
    assert!(calls[2].contains("not listed") && calls[2].contains("name_bytes=27"), "{text}");
}

#[test]
fn json_logs_are_one_object_a_line() {
    let text = logged(&[("HARNESS_LOG_FORMAT", "json")]);
    let events: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    assert_eq!(events[0]["message"], "harness-mcp serving on stdio", "{text}");
    let calls: Vec<&Value> =
        events.iter().filter(|event| event["message"] == "tool call").collect();
    assert_eq!(calls.len(), 2, "{text}");
    assert_eq!((&calls[0]["tool"], &calls[0]["outcome"]), (&json!("list_tasks"), &json!("ok")));
    assert_eq!(calls[1]["outcome"], "error");
    assert!(calls[1]["duration_ms"].is_u64(), "{text}");
    assert!(calls.iter().all(|call| call.get("arguments").is_none()), "{text}");
}
