//! Garbage for two parsers (issue 8, docs/reliability.md "Garbage in"): the broker client
//! (`UnixBroker`) against replies that are not contract 4, and the tool socket against lines that
//! are not tool requests. Each case is one line: what goes in, what must come out.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use harness_bus::{
    Backends, Broker, BrokerConfig, Capability, RunningToolSocket, ToolSocket, ToolSocketConfig,
    UnixBroker,
};
use harness_testkit::{BrokerAnswer, ScriptedBroker};
use harness_tools::{ToolEntry, ToolErrorKind, ToolReply, ToolsFile, Verb, tool};
use serde_json::{Value, json};

const CAP: &str = "cap-garbage-31c7";

fn cap() -> Capability {
    Capability::new(CAP).unwrap()
}

fn client(socket: &Path) -> UnixBroker {
    UnixBroker::new(BrokerConfig { socket: socket.to_owned(), timeout: Duration::from_secs(10) })
}

/// What a broker reply must become: a result, or an error with this `code()` and these words.
enum Expect {
    Ok(Value),
    Err(&'static str, &'static str),
}

#[track_caller]
fn check(what: &str, got: Result<Value, harness_bus::BrokerError>, expect: &Expect) {
    match (got, expect) {
        (Ok(value), Expect::Ok(want)) => assert_eq!(&value, want, "{what}"),
        (Err(error), Expect::Err(code, words)) => {
            let text = error.to_string();
            assert_eq!(error.code(), *code, "{what}: {text}");
            assert!(text.contains(words), "{what}: expected {words:?} in {text}");
            assert!(!format!("{text} {error:?}").contains(CAP), "{what}: the capability: {text}");
            assert!(text.len() < 400, "{what}: the error is {} bytes: {text:.400}", text.len());
        }
        (got, _) => panic!("{what}: got {got:?}"),
    }
}

#[test]
fn broker_replies_that_are_not_contract_4_are_typed_errors() {
    let deep = "[".repeat(100_000);
    let long_code = "a".repeat(65);
    #[rustfmt::skip]
    let cases: Vec<(&str, String, Expect)> = vec![
        ("not json", "not json".into(), Expect::Err("broker-protocol", "not a reply object")),
        ("empty line", String::new(), Expect::Err("broker-protocol", "not a reply object")),
        ("truncated object", r#"{"id": 1, "ok": tr"#.into(), Expect::Err("broker-protocol", "not a reply object")),
        ("an array", "[]".into(), Expect::Err("broker-protocol", "not a reply object")),
        ("a number", "17".into(), Expect::Err("broker-protocol", "not a reply object")),
        ("100k open brackets", deep.clone(), Expect::Err("broker-protocol", "recursion limit")),
        ("deep result", format!(r#"{{"id": 1, "ok": true, "result": {deep}"#), Expect::Err("broker-protocol", "recursion limit")),
        ("wrong id", r#"{"id": 2, "ok": true, "result": 1}"#.into(), Expect::Err("broker-protocol", "instead of 1")),
        ("id as a string", r#"{"id": "1", "ok": true, "result": 1}"#.into(), Expect::Err("broker-protocol", "instead of 1")),
        ("no id", r#"{"ok": true, "result": 1}"#.into(), Expect::Err("broker-protocol", "missing field `id`")),
        ("no ok", r#"{"id": 1, "result": 1}"#.into(), Expect::Err("broker-protocol", "missing field `ok`")),
        ("ok not a bool", r#"{"id": 1, "ok": "yes"}"#.into(), Expect::Err("broker-protocol", "not a reply object")),
        ("ok without result", r#"{"id": 1, "ok": true}"#.into(), Expect::Ok(Value::Null)),
        ("extra keys ignored", r#"{"id": 1, "ok": true, "result": 3, "x": [1]}"#.into(), Expect::Ok(json!(3))),
        ("refusal without code", r#"{"id": 1, "ok": false}"#.into(), Expect::Err("broker-protocol", "is not a code")),
        ("refusal, empty code", r#"{"id": 1, "ok": false, "code": ""}"#.into(), Expect::Err("broker-protocol", "is not a code")),
        ("refusal, bad code", r#"{"id": 1, "ok": false, "code": "Bad Code!"}"#.into(), Expect::Err("broker-protocol", "is not a code")),
        ("refusal, code of 65", format!(r#"{{"id": 1, "ok": false, "code": "{long_code}"}}"#), Expect::Err("broker-protocol", "is not a code")),
        ("refusal, code not ASCII", r#"{"id": 1, "ok": false, "code": "réfusé"}"#.into(), Expect::Err("broker-protocol", "is not a code")),
        ("refusal, code a number", r#"{"id": 1, "ok": false, "code": 7}"#.into(), Expect::Err("broker-protocol", "not a reply object")),
        ("refusal, message a number", r#"{"id": 1, "ok": false, "code": "run-ended", "message": 5}"#.into(), Expect::Err("broker-protocol", "not a reply object")),
        ("refusal, good", r#"{"id": 1, "ok": false, "code": "run-ended"}"#.into(), Expect::Err("run-ended", "refused: run-ended")),
        ("a lone surrogate", r#"{"id": 1, "ok": true, "result": "\ud800"}"#.into(), Expect::Err("broker-protocol", "not a reply object")),
    ];
    let broker = ScriptedBroker::start().unwrap();
    for (what, line, expect) in &cases {
        broker.answer_once("state", BrokerAnswer::Raw(line.clone()));
        // A fresh client per case, so the id of the first call is 1.
        check(what, client(broker.socket()).call(&cap(), Verb::State, &json!({})), expect);
    }
    assert_eq!(broker.calls_of("state").len(), cases.len());
}

/// A broker that answers the one request it gets with `bytes` as they are and hangs up.
fn raw_broker(bytes: Vec<u8>) -> (tempfile::TempDir, std::thread::JoinHandle<()>) {
    let dir = tempfile::tempdir().unwrap();
    let listener = UnixListener::bind(dir.path().join("b.sock")).unwrap();
    let thread = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut request = String::new();
        BufReader::new(&stream).read_line(&mut request).unwrap();
        // The client may hang up before reading it all (a reply over the cap).
        let _ = (&stream).write_all(&bytes);
    });
    (dir, thread)
}

#[test]
fn broker_replies_that_are_not_text_or_not_whole_are_typed_errors() {
    let mut huge = br#"{"id": 1, "ok": true, "result": ""#.to_vec();
    huge.extend(std::iter::repeat_n(b'x', 8 << 20));
    huge.extend(b"\"}\n");
    let mut over_cap = br#"{"id": 1, "ok": true, "result": ""#.to_vec();
    over_cap.extend(std::iter::repeat_n(b'x', 64 << 20));
    over_cap.extend(b"\"}\n");
    #[rustfmt::skip]
    let cases: Vec<(&str, Vec<u8>, Expect)> = vec![
        ("not UTF-8", b"\xff\xfe\xfd\n".to_vec(), Expect::Err("broker-protocol", "not a reply object")),
        ("not UTF-8 in a string", b"{\"id\": 1, \"ok\": true, \"result\": \"\xff\"}\n".to_vec(), Expect::Err("broker-protocol", "not a reply object")),
        ("a NUL byte", b"{\"id\": 1, \0}\n".to_vec(), Expect::Err("broker-protocol", "not a reply object")),
        ("truncated, no newline", br#"{"id": 1, "ok": tr"#.to_vec(), Expect::Err("broker-protocol", "without a newline")),
        ("closed at once", Vec::new(), Expect::Err("broker-protocol", "without a reply")),
        ("8 MiB result", huge, Expect::Ok(json!("x".repeat(8 << 20)))),
        ("over 64 MiB", over_cap, Expect::Err("broker-protocol", "without a newline")),
    ];
    for (what, bytes, expect) in &cases {
        let (dir, thread) = raw_broker(bytes.clone());
        let got = client(&dir.path().join("b.sock")).call(&cap(), Verb::State, &json!({}));
        check(what, got, expect);
        thread.join().unwrap();
    }
}

/// Fields drop in order: the socket first, then the broker, then the directory.
struct Socket {
    socket: RunningToolSocket,
    broker: ScriptedBroker,
    _dir: tempfile::TempDir,
}

fn start_socket() -> Socket {
    let broker = ScriptedBroker::start().unwrap();
    broker.answer("tasks", BrokerAnswer::result(json!({"tasks": [], "total": 0})));
    let dir = tempfile::tempdir().unwrap();
    let tools = ToolsFile {
        tools: ["list_tasks", "get_task"]
            .iter()
            .map(|name| ToolEntry::from_def(tool(name).unwrap()))
            .collect(),
        projects: vec!["web".into()],
    };
    let socket = ToolSocket::bind(ToolSocketConfig {
        path: dir.path().join("tools.sock"),
        tools,
        capability: cap(),
        backends: Backends::broker_only(Arc::new(client(broker.socket()))),
    })
    .unwrap()
    .spawn()
    .unwrap();
    Socket { socket, broker, _dir: dir }
}

fn connect(path: &Path) -> (UnixStream, BufReader<UnixStream>) {
    let stream = UnixStream::connect(path).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let reader = BufReader::new(stream.try_clone().unwrap());
    (stream, reader)
}

fn reply_to(stream: &mut UnixStream, reader: &mut BufReader<UnixStream>, line: &[u8]) -> ToolReply {
    stream.write_all(line).unwrap();
    stream.write_all(b"\n").unwrap();
    let mut reply = String::new();
    reader.read_line(&mut reply).unwrap();
    assert!(!reply.contains(CAP), "a reply carries the capability: {reply}");
    serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply:?}"))
}

const GOOD: &[u8] = br#"{"tool": "list_tasks", "args": {}}"#;

#[test]
fn tool_socket_lines_that_are_not_requests_get_an_error_and_the_connection_keeps_serving() {
    let fixture = start_socket();
    let deep = "[".repeat(100_000);
    let deep_args = format!(r#"{{"tool": "list_tasks", "args": {deep}"#);
    #[rustfmt::skip]
    let cases: Vec<(&str, Vec<u8>, ToolErrorKind, &str)> = vec![
        ("not json", b"not json".to_vec(), ToolErrorKind::BadRequest, "bad-request: not a tool request"),
        ("an empty line", Vec::new(), ToolErrorKind::BadRequest, "EOF while parsing"),
        ("a carriage return", b"\r".to_vec(), ToolErrorKind::BadRequest, "EOF while parsing"),
        ("truncated", br#"{"tool": "list_ta"#.to_vec(), ToolErrorKind::BadRequest, "control character"),
        ("not UTF-8", b"\xff\xfe\xfd".to_vec(), ToolErrorKind::BadRequest, "bad-request"),
        ("not UTF-8 in the name", b"{\"tool\": \"list_\xff\"}".to_vec(), ToolErrorKind::BadRequest, "bad-request"),
        ("a NUL byte", b"{\"tool\": \0}".to_vec(), ToolErrorKind::BadRequest, "bad-request"),
        ("100k open brackets", deep.clone().into_bytes(), ToolErrorKind::BadRequest, "bad-request"),
        ("deep args", deep_args.into_bytes(), ToolErrorKind::BadRequest, "recursion limit"),
        ("an array", b"[]".to_vec(), ToolErrorKind::BadRequest, "bad-request"),
        ("null", b"null".to_vec(), ToolErrorKind::BadRequest, "bad-request"),
        ("tool a number", br#"{"tool": 5}"#.to_vec(), ToolErrorKind::BadRequest, "invalid type"),
        ("a smuggled cap", br#"{"tool": "list_tasks", "cap": "x"}"#.to_vec(), ToolErrorKind::BadRequest, "unknown field `cap`"),
        ("two objects", br#"{"tool": "list_tasks"} {"tool": "get_task"}"#.to_vec(), ToolErrorKind::BadRequest, "trailing characters"),
        ("a lone surrogate", br#"{"tool": "\ud800"}"#.to_vec(), ToolErrorKind::BadRequest, "bad-request"),
        ("unknown tool", br#"{"tool": "rm -rf /"}"#.to_vec(), ToolErrorKind::UnknownTool, "unknown-tool: this session has no tool \"rm -rf /\""),
        ("args an array", br#"{"tool": "list_tasks", "args": [1]}"#.to_vec(), ToolErrorKind::BadArguments, "bad-arguments: list_tasks"),
        ("args a string", br#"{"tool": "get_task", "args": "T-1"}"#.to_vec(), ToolErrorKind::BadArguments, "bad-arguments: get_task"),
        ("a nested arg", format!( r#"{{"tool": "list_tasks", "args": {{"label": {}1{}}}}}"#, "[".repeat(120), "]".repeat(120) ) .into_bytes(), ToolErrorKind::BadArguments, "bad-arguments: list_tasks"),
        ("a 580 KiB arg", format!( r#"{{"tool": "get_task", "args": {{"task_ref": "{}"}}}}"#, "x".repeat(580 << 10) ) .into_bytes(), ToolErrorKind::BadArguments, "bad-arguments: get_task"),
    ];
    let (mut stream, mut reader) = connect(fixture.socket.path());
    for (what, line, kind, words) in &cases {
        let reply = reply_to(&mut stream, &mut reader, line);
        assert_eq!((reply.ok, reply.error), (false, Some(*kind)), "{what}: {reply:?}");
        assert!(reply.text.contains(words), "{what}: expected {words:?} in {:?}", reply.text);
        assert!(reply.text.len() < 2000, "{what}: the error is {} bytes", reply.text.len());
        // The same connection still answers a good call after each bad line.
        let good = reply_to(&mut stream, &mut reader, GOOD);
        assert!(good.ok, "{what}: then {good:?}");
    }
    assert_eq!(fixture.broker.calls_of("tasks").len(), cases.len(), "only the good calls went out");
    assert!(fixture.broker.calls().iter().all(|call| call.verb == "tasks"));
}

#[test]
fn tool_socket_oversized_and_abandoned_lines_cost_one_connection_each() {
    let fixture = start_socket();
    let path = fixture.socket.path();
    // A 2 MiB line: request-too-large, then the connection is closed.
    let (mut big, mut big_reader) = connect(path);
    let line = vec![b'['; 2 << 20];
    // The socket may close before it has read the whole line.
    let _ = big.write_all(&line);
    let mut reply = String::new();
    big_reader.read_line(&mut reply).unwrap();
    let reply: ToolReply = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply.error, Some(ToolErrorKind::RequestTooLarge), "{reply:?}");
    let most = format!("at most {} bytes", harness_tools::MAX_REQUEST_BYTES);
    assert!(reply.text.contains(&most), "{reply:?}");
    let mut rest = Vec::new();
    assert_eq!(big_reader.read_to_end(&mut rest).unwrap(), 0, "closed after the reply: {rest:?}");
    // Clients that hang up mid-line, mid-UTF-8 sequence, and after a whole bad line unread.
    for partial in [&br#"{"tool": "list_"#[..], b"{\"tool\": \"\xe2\x82", b"garbage\ngarbage"] {
        let mut stream = UnixStream::connect(path).unwrap();
        stream.write_all(partial).unwrap();
        drop(stream);
    }
    // A client that sends half a line and then waits: it holds its own connection only.
    let (mut waiting, mut waiting_reader) = connect(path);
    waiting.write_all(br#"{"tool": "list_tasks", "ar"#).unwrap();
    // Another client is still served at once.
    let (mut stream, mut reader) = connect(path);
    let good = reply_to(&mut stream, &mut reader, GOOD);
    assert!(good.ok, "{good:?}");
    assert_eq!(good.text, r#"{"tasks":[],"total":0}"#);
    // The waiting client finishes its line and is answered too.
    waiting.write_all(b"gs\": {}}\n").unwrap();
    let mut late = String::new();
    waiting_reader.read_line(&mut late).unwrap();
    let late: ToolReply = serde_json::from_str(&late).unwrap();
    assert!(late.ok, "{late:?}");
    assert_eq!(fixture.broker.calls_of("tasks").len(), 2, "nothing was sent for the garbage");
}
