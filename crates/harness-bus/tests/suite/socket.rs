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
    start_with(&["list_tasks", "get_task", "end_run", "push_working", "launch"])
}

fn start_with(names: &[&str]) -> Fixture {
    let broker = ScriptedBroker::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let client = UnixBroker::new(BrokerConfig {
        socket: broker.socket().to_owned(),
        timeout: Duration::from_secs(5),
    });
    let config = ToolSocketConfig {
        path: dir.path().join("tools.sock"),
        tools: tools(names),
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

/// write_record at its longest, every UTF-16 code unit of every string escaped (`\u0001`): the
/// largest call the catalogue bounds fits under the request cap and reaches the broker whole.
#[test]
fn the_largest_legal_call_reaches_the_broker() {
    let fixture = start_with(&["write_record"]);
    fixture.broker.answer("record.write", BrokerAnswer::result(json!({"commit": "c1"})));
    let control = |n: usize| "\u{1}".repeat(n);
    let path = format!("docs/requirements/{}", control(300 - "docs/requirements/".len()));
    let request = json!({"tool": "write_record", "args": {
        "project": control(200), "path": path, "record": control(100_000), "decision": control(200),
    }});
    let line = request.to_string();
    assert!(line.len() > MAX_REQUEST_BYTES - 4096, "the call is {} bytes", line.len());
    let (mut stream, mut reader) = connect(fixture.socket.path());
    let reply = call_on(&mut stream, &mut reader, &line);
    assert!(reply.ok, "{reply:?}");
    let sent = fixture.broker.calls_of("record.write");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].args["record"].as_str().map(str::len), Some(100_000));
}

/// A line that starts and never ends is answered `bad-request` and closed within seconds, not
/// after the minutes an idle connection may wait.
#[test]
fn a_request_line_that_does_not_end_within_10_s_is_answered_and_closed() {
    let fixture = start();
    let (mut stream, mut reader) = connect(fixture.socket.path());
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.write_all(br#"{"tool": "list_tasks", "args": {"#).unwrap();
    let started = std::time::Instant::now();
    let mut reply = String::new();
    reader.read_line(&mut reply).unwrap();
    let reply: ToolReply = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply.error, Some(ToolErrorKind::BadRequest), "{reply:?}");
    assert!(reply.text.contains("did not end within 10 s"), "{reply:?}");
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    let mut rest = Vec::new();
    assert_eq!(reader.read_to_end(&mut rest).unwrap_or(0), 0, "the connection is closed");
}

/// Four clients hold every slot for a line over 16 KiB and stop sending: a fifth large call
/// takes the slot of the one that started first, and is answered.
#[test]
fn slow_large_lines_give_their_slot_to_a_newer_one() {
    let fixture = start();
    fixture.broker.answer("task.get", BrokerAnswer::result(json!({"ref": "T-1"})));
    let slow: Vec<_> = (0..4)
        .map(|_| {
            let (mut stream, reader) = connect(fixture.socket.path());
            stream.write_all(br#"{"tool": "get_task", "args": {"task_ref": ""#).unwrap();
            stream.write_all(&[b' '; 40 * 1024]).unwrap();
            // One after the other, so the first is the oldest.
            std::thread::sleep(Duration::from_millis(50));
            (stream, reader)
        })
        .collect();
    // 40 KiB of white space before the object: a large line, and a legal call.
    let line = format!(
        r#"{}{{"tool": "get_task", "args": {{"task_ref": "T-1"}}}}"#,
        " ".repeat(40 * 1024)
    );
    let (mut stream, mut reader) = connect(fixture.socket.path());
    let reply = call_on(&mut stream, &mut reader, &line);
    assert!(reply.ok, "{reply:?}");
    let answered: Vec<Option<ToolReply>> = slow
        .into_iter()
        .map(|(_, mut reader)| {
            reader.get_ref().set_read_timeout(Some(Duration::from_millis(500))).unwrap();
            let mut reply = String::new();
            match reader.read_line(&mut reply) {
                Ok(read) if read > 0 => Some(serde_json::from_str(&reply).unwrap()),
                _ => None,
            }
        })
        .collect();
    assert_eq!(answered[0].as_ref().and_then(|reply| reply.error), Some(ToolErrorKind::Busy));
    assert!(answered[1..].iter().all(Option::is_none), "{answered:?}");
}

/// A call's thread has a small stack: a broker result nested as deep as the parser allows is
/// parsed, shaped, written and dropped on it all the same (in the debug build, whose frames are
/// the largest).
#[test]
fn a_result_nested_as_deep_as_the_parser_allows_is_answered() {
    let fixture = start();
    let mut deep = json!(1);
    for _ in 0..126 {
        deep = json!([deep]);
    }
    fixture.broker.answer("tasks", BrokerAnswer::result(deep.clone()));
    let reply = call(fixture.socket.path(), json!({"tool": "list_tasks"}));
    assert_eq!(reply, ToolReply::success(deep.to_string()));
}
