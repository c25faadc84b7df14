//! The tool socket: mode 0600, the call reaching the scripted broker with the capability, every
//! kind of error reply, and bad clients that never stop it serving the others.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use harness_bus::{
    Backends, BrokerConfig, Capability, RunningToolSocket, ToolSocket, ToolSocketConfig, UnixBroker,
};
use harness_testkit::{BrokerAnswer, ScriptedBroker};
use harness_tools::{
    MAX_REQUEST_BYTES, REPLY_CAP, ToolEntry, ToolErrorKind, ToolReply, ToolsFile, tool,
};
use serde_json::{Value, json};

const CAP: &str = "cap-tool-socket-9";

/// Fields drop in order: the socket first, then its directory.
struct Fixture {
    socket: RunningToolSocket,
    broker: ScriptedBroker,
    _dir: tempfile::TempDir,
}

fn tools(names: &[&str]) -> ToolsFile {
    ToolsFile {
        tools: names.iter().map(|name| ToolEntry::from_def(tool(name).unwrap())).collect(),
        projects: vec!["web".into()],
    }
}

fn start() -> Fixture {
    let broker = ScriptedBroker::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let client = UnixBroker::new(BrokerConfig {
        socket: broker.socket().to_owned(),
        timeout: Duration::from_secs(5),
    });
    let config = ToolSocketConfig {
        path: dir.path().join("tools.sock"),
        tools: tools(&["list_tasks", "get_task", "end_run", "push_working", "launch"]),
        capability: Capability::new(CAP).unwrap(),
        backends: Backends::broker_only(Arc::new(client)),
    };
    assert!(!format!("{config:?}").contains(CAP), "the config's Debug shows the capability");
    let socket = ToolSocket::bind(config).unwrap().spawn().unwrap();
    Fixture { socket, broker, _dir: dir }
}

fn connect(path: &Path) -> (UnixStream, BufReader<UnixStream>) {
    let stream = UnixStream::connect(path).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let reader = BufReader::new(stream.try_clone().unwrap());
    (stream, reader)
}

fn call_on(stream: &mut UnixStream, reader: &mut BufReader<UnixStream>, line: &str) -> ToolReply {
    stream.write_all(line.as_bytes()).unwrap();
    stream.write_all(b"\n").unwrap();
    let mut reply = String::new();
    reader.read_line(&mut reply).unwrap();
    serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply:?}"))
}

fn call(path: &Path, request: Value) -> ToolReply {
    let (mut stream, mut reader) = connect(path);
    call_on(&mut stream, &mut reader, &request.to_string())
}

#[test]
fn the_socket_is_0600_and_replaces_only_a_stale_socket() {
    let fixture = start();
    let meta = std::fs::symlink_metadata(fixture.socket.path()).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    let parent = fixture.socket.path().parent().unwrap();
    let leftovers: Vec<_> =
        std::fs::read_dir(parent).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, ["tools.sock"], "the private bind directory is gone");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tools.sock");
    std::fs::write(&path, "a file").unwrap();
    let broker = ScriptedBroker::start().unwrap();
    let config = ToolSocketConfig {
        path: path.clone(),
        tools: tools(&[]),
        capability: Capability::new(CAP).unwrap(),
        backends: Backends::broker_only(Arc::new(UnixBroker::new(BrokerConfig {
            socket: broker.socket().to_owned(),
            timeout: Duration::from_secs(1),
        }))),
    };
    let error = ToolSocket::bind(config).unwrap_err().to_string();
    assert!(error.contains("is not a socket"), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "a file");
}

#[test]
fn list_tasks_reaches_the_broker_with_the_capability_and_the_reply_is_compact_json() {
    let fixture = start();
    fixture.broker.answer(
        "tasks",
        BrokerAnswer::result(json!({"tasks": [{"ref": "T-1", "title": "Fix it"}], "total": 1})),
    );
    let reply = call(fixture.socket.path(), json!({"tool": "list_tasks"}));
    assert_eq!(
        reply,
        ToolReply::success(r#"{"tasks":[{"ref":"T-1","title":"Fix it"}],"total":1}"#.into())
    );
    let calls = fixture.broker.calls_of("tasks");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].cap, CAP);
    assert_eq!(calls[0].args, json!({"done": false, "limit": 50, "descriptions": false}));
}

#[test]
fn errors_the_model_reads() {
    let fixture = start();
    let path = fixture.socket.path();
    fixture.broker.answer_once("role.revoke", BrokerAnswer::refuse("role-end-refused"));
    fixture.broker.answer_once(
        "task.get",
        BrokerAnswer::result(json!({"description": "x".repeat(REPLY_CAP)})),
    );
    let cases: &[(Value, ToolErrorKind, &str)] = &[
        (
            json!({"tool": "end_run", "args": {"role": "pm", "reason": "done"}}),
            ToolErrorKind::Refused,
            "refused: role-end-refused",
        ),
        (
            json!({"tool": "get_task", "args": {"task_ref": "T-1"}}),
            ToolErrorKind::ReplyTooLarge,
            "reply-too-large: the reply is 40018 characters, over the cap of 40000",
        ),
        (
            json!({"tool": "set_name", "args": {}}),
            ToolErrorKind::UnknownTool,
            "unknown-tool: this session has no tool \"set_name\"; its tools are list_tasks, get_task, end_run, push_working, launch",
        ),
        (
            json!({"tool": "end_run", "args": {"role": "pm", "reason": ""}}),
            ToolErrorKind::BadArguments,
            "bad-arguments: end_run: `reason` must have 1 to 500 characters, got 0",
        ),
        (
            json!({"tool": "push_working", "args": {"task_ref": "T-1", "project": "web", "branch": "b"}}),
            ToolErrorKind::NotAvailable,
            "refused: not-available (push_working goes to the host's git socket",
        ),
        (
            json!({"tool": "launch", "args": {"instance": "i"}}),
            ToolErrorKind::NotAvailable,
            "refused: not-available (launch goes to the host's launch socket",
        ),
        (
            json!({"tool": "list_tasks", "args": {}, "cap": "mine"}),
            ToolErrorKind::BadRequest,
            "bad-request: not a tool request",
        ),
    ];
    for (request, kind, text) in cases {
        let reply = call(path, request.clone());
        assert!(!reply.ok, "{request}: {reply:?}");
        assert_eq!(reply.error, Some(*kind), "{request}: {reply:?}");
        assert!(reply.text.starts_with(text), "{request}: {:?}", reply.text);
        assert!(!reply.text.contains(CAP));
    }
    let verbs: Vec<String> = fixture.broker.calls().into_iter().map(|c| c.verb).collect();
    assert_eq!(verbs, ["role.revoke", "task.get"], "bad calls must send nothing");
}

#[test]
fn malformed_lines_get_an_error_and_the_connection_keeps_serving() {
    let fixture = start();
    fixture.broker.answer("tasks", BrokerAnswer::result(json!([])));
    let (mut stream, mut reader) = connect(fixture.socket.path());
    for bad in ["{not json", "42", r#"{"args": {}}"#, ""] {
        let reply = call_on(&mut stream, &mut reader, bad);
        assert_eq!(reply.error, Some(ToolErrorKind::BadRequest), "{bad:?}: {reply:?}");
    }
    let reply = call_on(&mut stream, &mut reader, r#"{"tool": "list_tasks"}"#);
    assert_eq!(reply, ToolReply::success("[]".into()));
}

#[test]
fn an_oversized_request_is_refused_and_closed_and_others_are_still_served() {
    let fixture = start();
    fixture.broker.answer("tasks", BrokerAnswer::result(json!([])));
    let (mut stream, mut reader) = connect(fixture.socket.path());
    let huge = vec![b'x'; MAX_REQUEST_BYTES + 10];
    // The server may close before reading it all; a broken pipe is fine.
    let _ = stream.write_all(&huge);
    let mut reply = String::new();
    reader.read_line(&mut reply).unwrap();
    let reply: ToolReply = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply.error, Some(ToolErrorKind::RequestTooLarge));
    let mut rest = Vec::new();
    assert_eq!(reader.read_to_end(&mut rest).unwrap_or(0), 0, "the connection is closed");

    // A client that hangs up mid-request.
    let (mut quitter, _) = connect(fixture.socket.path());
    quitter.write_all(br#"{"tool": "list_"#).unwrap();
    drop(quitter);
    assert!(call(fixture.socket.path(), json!({"tool": "list_tasks"})).ok);
}

#[test]
fn sixty_four_concurrent_clients_are_all_served() {
    let fixture = start();
    fixture.broker.answer("tasks", BrokerAnswer::result(json!({"total": 0})));
    let path = fixture.socket.path().to_owned();
    let threads: Vec<_> = (0..64)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                let (mut stream, mut reader) = connect(&path);
                (0..5)
                    .map(|_| call_on(&mut stream, &mut reader, r#"{"tool": "list_tasks"}"#))
                    .filter(|reply| !reply.ok)
                    .count()
            })
        })
        .collect();
    let failures: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(failures, 0);
    assert_eq!(fixture.broker.calls_of("tasks").len(), 64 * 5);
}

#[test]
fn stopping_removes_the_socket() {
    let fixture = start();
    let path = fixture.socket.path().to_owned();
    fixture.socket.stop();
    assert!(!path.exists());
}
