//! The binary's contract: Claude Code 2.1.296's handshake (docs/clis.md) answered at once, the
//! bundle's tools listed, calls forwarded, and malformed input answered with a JSON-RPC error
//! while the server keeps serving. stdout carries nothing but JSON-RPC.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness_testkit::BrokerAnswer;
use serde_json::{Value, json};

use super::session::{CAP, Session, mcp_binary};

const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"claude-code","title":"Claude Code","version":"2.1.296"},"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}}}}}"#;
const INITIALIZE: &str = r#"{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}},"clientInfo":{"name":"claude-code","version":"2.1.296"}},"jsonrpc":"2.0","id":0}"#;
pub(crate) const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// The server as a child process, with its stdout lines on a channel and its stderr kept.
pub(crate) struct Mcp {
    pub(crate) child: Child,
    pub(crate) stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    pub(crate) stderr: Arc<Mutex<String>>,
}

impl Mcp {
    pub(crate) fn start(session: &Session) -> Self {
        Self::start_with(session, &[])
    }

    #[expect(clippy::disallowed_methods, reason = "the test drives the real binary")]
    pub(crate) fn start_with(session: &Session, env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(mcp_binary())
            .env_clear()
            .env("MOSAIC_BUNDLE", session.bundle())
            .env("MOSAIC_TOOLS_SOCK", session.tools_sock())
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let kept = stderr.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            kept.lock().unwrap().push_str(&text);
        });
        let stdin = child.stdin.take();
        Self { child, stdin, lines, stderr }
    }

    pub(crate) fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Returns the next message; every stdout line must be a JSON-RPC 2.0 message.
    pub(crate) fn next(&self, within: Duration) -> Value {
        let line = self.lines.recv_timeout(within).unwrap_or_else(|error| {
            panic!(
                "no message within {within:?} ({error}); stderr: {}",
                self.stderr.lock().unwrap()
            )
        });
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a line that is not JSON ({e}): {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        message
    }

    /// Returns the replies until one has `id`, that one last.
    pub(crate) fn until(&self, id: &Value) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let message = self.next(Duration::from_secs(10));
            let done = &message["id"] == id;
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    pub(crate) fn handshake(&mut self) {
        self.send(DISCOVER);
        // An answer, not silence: Claude Code waits 2.5 s for one that never comes.
        let reply = self.next(Duration::from_secs(2));
        assert_eq!(reply["id"], "server-discover-probe-1", "{reply}");
        assert!(reply["error"]["code"].is_i64(), "server/discover must get an error: {reply}");
        self.send(INITIALIZE);
        let init = self.until(&json!(0)).pop().unwrap();
        assert_eq!(init["result"]["serverInfo"]["name"], "mosaic", "{init}");
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        assert!(init["result"]["capabilities"]["tools"].is_object(), "{init}");
        self.send(INITIALIZED);
    }

    pub(crate) fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status}; stderr: {}", self.stderr.lock().unwrap());
                break;
            }
            assert!(Instant::now() < deadline, "the server did not exit when stdin closed");
            std::thread::sleep(Duration::from_millis(10));
        }
        let extra: Vec<String> = self.lines.try_iter().collect();
        assert!(extra.is_empty(), "stdout after the last reply: {extra:?}");
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_handshake_lists_the_bundles_tools_with_their_schemas() {
    let session = Session::start("pm");
    let mut mcp = Mcp::start(&session);
    mcp.handshake();
    mcp.send(r#"{"method":"tools/list","jsonrpc":"2.0","id":1}"#);
    let list = mcp.until(&json!(1)).pop().unwrap();
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let expected: Vec<String> =
        harness_tools::ToolsFile::load(&session.bundle().join("tools.json"))
            .unwrap()
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect();
    assert_eq!(names, expected);
    let list_tasks = &tools[0];
    assert_eq!(
        list_tasks["inputSchema"],
        harness_tools::tool("list_tasks").unwrap().input_schema()
    );
    assert_eq!(list_tasks["description"], harness_tools::tool("list_tasks").unwrap().description);
    mcp.finish();
}

#[test]
fn a_call_goes_through_the_tool_socket_and_errors_are_is_error() {
    let session = Session::start("pm");
    session.broker.answer_once("tasks", BrokerAnswer::result(json!({"tasks": [], "total": 0})));
    session.broker.answer_once("tasks", BrokerAnswer::refuse("tracker-unavailable"));
    let mut mcp = Mcp::start(&session);
    mcp.handshake();
    let call = |id: u32, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "list_tasks", "arguments": args, "_meta": {"claudecode/toolUseId": "toolu_1", "progressToken": id}}})
        .to_string()
    };
    mcp.send(&call(2, json!({})));
    let ok = mcp.until(&json!(2)).pop().unwrap();
    assert_eq!(
        ok["result"],
        json!({"content": [{"type": "text", "text": r#"{"tasks":[],"total":0}"#}], "isError": false})
    );
    mcp.send(&call(3, json!({"label": "bug"})));
    let refused = mcp.until(&json!(3)).pop().unwrap();
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(refused["result"]["content"][0]["text"], "refused: tracker-unavailable");
    mcp.send(&call(4, json!({"limit": 500})));
    let bad = mcp.until(&json!(4)).pop().unwrap();
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    assert_eq!(
        bad["result"]["content"][0]["text"],
        "bad-arguments: list_tasks: `limit` must be 1 to 50, got 500"
    );
    mcp.finish();
    let calls = session.broker.calls_of("tasks");
    assert_eq!(calls.len(), 2, "the bad call sent nothing");
    assert_eq!(calls[0].args, json!({"done": false, "limit": 50, "descriptions": false}));
    assert_eq!(calls[0].cap, CAP);
}

#[test]
fn malformed_input_gets_an_error_and_the_server_keeps_serving() {
    let session = Session::start("assistant");
    let mut mcp = Mcp::start(&session);
    // Before initialize: garbage and a stray notification must not end the session.
    mcp.send("{not json");
    let parse = mcp.next(Duration::from_secs(5));
    assert_eq!(
        (parse["id"].clone(), parse["error"]["code"].clone()),
        (Value::Null, json!(-32700)),
        "{parse}"
    );
    mcp.send(INITIALIZED);
    mcp.handshake();
    for (line, code) in [
        ("garbage", -32700),
        (r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":5}"#, -32602),
        (r#"{"jsonrpc":"2.0","id":6,"method":"no/such/method"}"#, -32601),
        (r#"{"jsonrpc":"2.0","id":7}"#, -32600),
    ] {
        mcp.send(line);
        let reply = mcp.next(Duration::from_secs(5));
        assert_eq!(reply["error"]["code"], code, "{line}: {reply}");
    }
    mcp.send(&"x".repeat(17 * 1024 * 1024));
    let too_long = mcp.next(Duration::from_secs(10));
    assert_eq!(too_long["error"]["code"], -32600, "{too_long}");
    mcp.send(r#"{"method":"tools/list","jsonrpc":"2.0","id":8}"#);
    let list = mcp.until(&json!(8)).pop().unwrap();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read_spec", "raise_decision"]);
    mcp.finish();
}

#[test]
fn a_bad_tools_json_exits_2_naming_it() {
    let session = Session::start("assistant");
    std::fs::write(session.bundle().join("tools.json"), r#"{"tools": [{"name": "rm"}]}"#).unwrap();
    let mut mcp = Mcp::start(&session);
    drop(mcp.stdin.take());
    let status = mcp.child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let stderr = mcp.stderr.lock().unwrap().clone();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("tools.json"), "{stderr}");
}
