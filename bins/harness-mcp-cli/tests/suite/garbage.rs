//! Garbage on harness-mcp's stdin (issue 8, docs/reliability.md "Garbage in"): every line that is
//! not a usable JSON-RPC message gets its error (or, where JSON-RPC wants none, nothing) and the
//! server keeps serving: a good `tools/list` after all of it is still answered. And a panic
//! anywhere ends the server with exit 1, so Claude Code sees it gone instead of waiting on it.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::protocol::{INITIALIZED, Mcp};
use super::session::Session;

/// One line in, and the error code of the reply (with its id), or no reply at all.
enum Answer {
    Error(i64, Value),
    /// A tool result with `isError` and this text start, for the request with this id.
    ToolError(Value, &'static str),
    Nothing,
}

fn send_bytes(mcp: &mut Mcp, line: &[u8]) {
    let stdin = mcp.stdin.as_mut().unwrap();
    stdin.write_all(line).unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.flush().unwrap();
}

#[test]
fn every_garbage_line_is_answered_and_tools_list_still_works() {
    use Answer::{Error, Nothing, ToolError};
    let deep = "[".repeat(100_000);
    let deep_params = format!(r#"{{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{deep}"#);
    let deep_id = format!(r#"{{"jsonrpc":"2.0","id":{deep},"method":"tools/list"}}"#);
    let nested_args = format!(
        r#"{{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{{"name":"read_spec","arguments":{{"project":{}1{}}}}}}}"#,
        "[".repeat(100),
        "]".repeat(100)
    );
    #[rustfmt::skip]
    let cases: Vec<(&str, Vec<u8>, Answer)> = vec![
        ("not json", b"garbage".to_vec(), Error(-32700, Value::Null)),
        ("truncated request", br#"{"jsonrpc":"2.0","id":1,"method":"tools/li"#.to_vec(), Error(-32700, Value::Null)),
        ("not UTF-8", b"\xff\xfe\xfd".to_vec(), Error(-32700, Value::Null)),
        ("not UTF-8 in a string", b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/\xff\"}".to_vec(), Error(-32700, Value::Null)),
        ("a NUL byte", b"{\"jsonrpc\":\0}".to_vec(), Error(-32700, Value::Null)),
        ("100k open brackets", deep.clone().into_bytes(), Error(-32700, Value::Null)),
        ("deep params", deep_params.into_bytes(), Error(-32700, Value::Null)),
        ("deep id", deep_id.into_bytes(), Error(-32700, Value::Null)),
        ("two messages on a line", br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"} {}"#.to_vec(), Error(-32700, Value::Null)),
        ("a lone surrogate", br#"{"jsonrpc":"2.0","id":4,"method":"\ud800"}"#.to_vec(), Error(-32700, Value::Null)),
        ("a number", b"17".to_vec(), Error(-32600, Value::Null)),
        ("null", b"null".to_vec(), Error(-32600, Value::Null)),
        ("an empty batch", b"[]".to_vec(), Error(-32600, Value::Null)),
        ("an empty object", b"{}".to_vec(), Error(-32600, Value::Null)),
        ("id only", br#"{"jsonrpc":"2.0","id":5}"#.to_vec(), Error(-32600, json!(5))),
        ("method a number", br#"{"jsonrpc":"2.0","id":6,"method":7}"#.to_vec(), Error(-32600, json!(6))),
        ("unknown method", br#"{"jsonrpc":"2.0","id":7,"method":"no/such"}"#.to_vec(), Error(-32601, json!(7))),
        ("params a number", br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":5}"#.to_vec(), Error(-32602, json!(8))),
        ("call without a name", br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{}}"#.to_vec(), Error(-32602, json!(9))),
        ("name a number", br#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":5}}"#.to_vec(), Error(-32602, json!(10))),
        ("arguments an array", br#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"read_spec","arguments":[1]}}"#.to_vec(), Error(-32602, json!(11))),
        ("an unknown notification", br#"{"jsonrpc":"2.0","method":"notifications/nonsense"}"#.to_vec(), Nothing),
        ("a bad notification", br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":7}"#.to_vec(), Nothing),
        ("a stray response", br#"{"jsonrpc":"2.0","id":99,"result":{}}"#.to_vec(), Nothing),
        ("an empty line", Vec::new(), Nothing),
        ("blanks", b" \t\r".to_vec(), Nothing),
        ("nested arguments", nested_args.into_bytes(), ToolError(json!(42), "bad-arguments: read_spec: `project` must be a string")),
    ];
    let session = Session::start("assistant");
    let mut mcp = Mcp::start(&session);
    mcp.handshake();
    for (what, line, answer) in &cases {
        send_bytes(&mut mcp, line);
        match answer {
            Error(code, id) => {
                let reply = mcp.next(Duration::from_secs(10));
                assert_eq!(reply["error"]["code"], *code, "{what}: {reply}");
                assert_eq!(reply["id"], *id, "{what}: {reply}");
                let message = reply["error"]["message"].as_str().unwrap_or_default();
                assert!(!message.is_empty() && message.len() < 2000, "{what}: {reply}");
            }
            ToolError(id, text) => {
                let reply = mcp.until(id).pop().unwrap();
                assert_eq!(reply["result"]["isError"], true, "{what}: {reply}");
                assert_eq!(reply["result"]["content"][0]["text"], *text, "{what}: {reply}");
            }
            Nothing => {}
        }
        // After each line the server answers a good request, and nothing else came first.
        mcp.send(r#"{"method":"tools/list","jsonrpc":"2.0","id":"after"}"#);
        let seen = mcp.until(&json!("after"));
        let (last, before) = seen.split_last().unwrap();
        assert!(before.is_empty(), "{what}: unexpected replies {before:?}");
        let names: Vec<&str> = last["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{what}: {last}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["read_spec", "raise_decision"], "{what}");
    }
    mcp.send(INITIALIZED);
    mcp.finish();
    assert!(session.broker.calls().is_empty(), "garbage reached the broker");
}

#[test]
fn a_tool_socket_that_answers_garbage_is_a_clear_failed_call() {
    use std::os::unix::net::UnixListener;
    let session = Session::start("assistant");
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("fake.sock");
    let listener = UnixListener::bind(&fake).unwrap();
    let replies: Vec<&[u8]> =
        vec![b"not json\n", b"\xff\xfe\n", br#"{"ok": true, "te"#, b"", br#"{"ok": 1}"#];
    let count = replies.len();
    let server = std::thread::spawn(move || {
        for reply in replies {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(&stream), &mut request)
                .unwrap();
            let _ = stream.write_all(reply);
        }
    });
    let mut mcp = Mcp::start_with(&session, &[("MOSAIC_TOOLS_SOCK", fake.to_str().unwrap())]);
    mcp.handshake();
    for id in 0..count {
        mcp.send(
            &json!({"jsonrpc": "2.0", "id": id + 100, "method": "tools/call",
                "params": {"name": "read_spec", "arguments": {"project": "web"}}})
            .to_string(),
        );
        let reply = mcp.until(&json!(id + 100)).pop().unwrap();
        assert_eq!(reply["result"]["isError"], true, "{reply}");
        let text = reply["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("failed: the tool socket at "), "{text}");
        assert!(text.contains("did not answer"), "{text}");
    }
    server.join().unwrap();
    mcp.finish();
}

#[test]
fn a_panic_anywhere_ends_the_server_with_exit_1() {
    let session = Session::start("assistant");
    let mut mcp = Mcp::start_with(&session, &[("HARNESS_MCP_PANIC_FOR_TEST", "1")]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = mcp.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the server outlived its panic");
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(mcp.stdin.take());
    std::thread::sleep(Duration::from_millis(50));
    let stderr = mcp.stderr.lock().unwrap().clone();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(" panicked: "), "{stderr}");
}
