//! The scripted Messages API on its own, driven by a raw HTTP/1.1 client so the bytes on the wire
//! are what the test sees.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use harness_testkit::{Block, Outcome, Reply, Script, ScriptedModel};
use serde_json::{Value, json};

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Parses an SSE body into (event, data) pairs.
    fn events(&self) -> Vec<(String, Value)> {
        self.body
            .split("\n\n")
            .filter(|chunk| !chunk.is_empty())
            .map(|chunk| {
                let (event, data) = chunk.split_once('\n').unwrap();
                (
                    event.strip_prefix("event: ").unwrap().to_owned(),
                    serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap(),
                )
            })
            .collect()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

/// Sends one request and reads one response by its `Content-Length`; the connection stays
/// keep-alive from the client's side, so the server's `Connection: close` is what ends it.
fn http(model: &ScriptedModel, method: &str, target: &str, body: &str) -> Response {
    let addr = model.base_url().strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        stream,
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nx-api-key: fake\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(": ").unwrap();
        headers.push((name.to_owned(), value.to_owned()));
    }
    let mut response = Response { status, headers, body: String::new() };
    if method != "HEAD" {
        let length: usize = response.header("Content-Length").unwrap().parse().unwrap();
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        response.body = String::from_utf8(body).unwrap();
    }
    response
}

fn post_messages(model: &ScriptedModel, body: &Value) -> Response {
    http(model, "POST", "/v1/messages?beta=true", &body.to_string())
}

/// Returns the panic message of `f`, or `None` if it returned normally.
fn panic_message(f: impl FnOnce()) -> Option<String> {
    let payload = catch_unwind(AssertUnwindSafe(f)).err()?;
    Some(
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default(),
    )
}

#[test]
fn replies_stream_as_the_clis_expect() {
    let model = ScriptedModel::start(Script::new([
        Reply::new([
            Block::text("Let me look."),
            Block::tool_use("toolu_1", "Read", json!({"file_path": "/w/a.txt"})),
        ]),
        Reply::text("Done."),
    ]))
    .unwrap();
    assert!(model.base_url().starts_with("http://127.0.0.1:"), "{}", model.base_url());

    let first = post_messages(&model, &json!({"model": "echo-me", "stream": true, "messages": []}));
    assert_eq!(first.status, 200);
    assert_eq!(first.header("Content-Type"), Some("text/event-stream"));
    assert_eq!(first.header("Connection"), Some("close"));
    let events = first.events();
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    assert_eq!(events[0].1["message"]["model"], "echo-me");
    assert_eq!(events[1].1["content_block"], json!({"type": "text", "text": ""}));
    assert_eq!(events[2].1["delta"], json!({"type": "text_delta", "text": "Let me look."}));
    assert_eq!(
        events[4].1["content_block"],
        json!({"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}})
    );
    assert_eq!(
        events[5].1["delta"],
        json!({"type": "input_json_delta", "partial_json": r#"{"file_path":"/w/a.txt"}"#})
    );
    assert_eq!(events[7].1["delta"]["stop_reason"], "tool_use");

    let second = post_messages(&model, &json!({"model": "echo-me", "messages": []}));
    let events = second.events();
    assert_eq!(events.len(), 6);
    assert_eq!(events[4].1["delta"]["stop_reason"], "end_turn");

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].url, "/v1/messages?beta=true");
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].header("X-API-KEY"), Some("fake"));
    assert_eq!(requests[0].model(), Some("echo-me"));
    assert_eq!(requests[1].outcome, Outcome::Reply(1));
    assert_eq!(model.replies_left(), 0);
    model.assert_finished();
}

#[test]
fn a_request_past_the_script_gets_400_and_is_recorded() {
    let model = ScriptedModel::start(Script::new([Reply::text("only one")])).unwrap();
    assert_eq!(post_messages(&model, &json!({"messages": []})).status, 200);

    let extra = post_messages(&model, &json!({"messages": []}));
    assert_eq!(extra.status, 400);
    assert_eq!(extra.header("Content-Type"), Some("application/json"));
    let error = extra.json();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("scripted model: request #2 was not scripted (the script has 1 replies)"),
        "{message}"
    );

    assert!(matches!(model.requests()[1].outcome, Outcome::Unscripted(_)));
    let failure = panic_message(|| model.assert_finished()).expect("assert_finished must fail");
    assert!(
        failure.contains("request #2 (POST /v1/messages?beta=true) was not scripted"),
        "{failure}"
    );
}

#[test]
fn unknown_paths_and_non_json_bodies_are_unscripted_but_the_probe_is_not() {
    let model = ScriptedModel::start(Script::new([Reply::text("hi")])).unwrap();
    assert_eq!(http(&model, "HEAD", "/api/hello", "").status, 200);
    assert_eq!(http(&model, "GET", "/api/hello", "").status, 200);
    assert_eq!(http(&model, "GET", "/v1/models", "").status, 400);
    assert_eq!(http(&model, "POST", "/v1/messages", "not json").status, 400);
    // The non-JSON body did not use up the reply.
    assert_eq!(post_messages(&model, &json!({"messages": []})).status, 200);

    let outcomes: Vec<Outcome> = model.requests().into_iter().map(|r| r.outcome).collect();
    assert_eq!(outcomes[..2], [Outcome::Probe, Outcome::Probe]);
    assert_eq!(outcomes[4], Outcome::Reply(0));
    assert_eq!(model.messages_calls().len(), 2);
    let failure = panic_message(|| model.assert_finished()).expect("assert_finished must fail");
    assert!(failure.contains("no such endpoint: GET /v1/models"), "{failure}");
    assert!(failure.contains("the body is not JSON"), "{failure}");
    assert!(!failure.contains("never requested"), "{failure}");
}

#[test]
fn replies_never_requested_fail_assert_finished() {
    let model =
        ScriptedModel::start(Script::new([Reply::text("one"), Reply::text("two")])).unwrap();
    post_messages(&model, &json!({"messages": []}));
    assert_eq!(model.replies_left(), 1);
    let failure = panic_message(|| model.assert_finished()).expect("assert_finished must fail");
    assert!(failure.contains("1 of the script's 2 replies were never requested"), "{failure}");
}

#[test]
fn a_scripted_api_error_is_answered_with_its_status() {
    let model = ScriptedModel::start(Script::new([Reply::api_error(529, "overloaded")])).unwrap();
    let response = post_messages(&model, &json!({"messages": []}));
    assert_eq!(response.status, 529);
    assert_eq!(response.json()["error"]["message"], "overloaded");
    model.assert_finished();
}

#[test]
fn dropping_the_model_does_not_wait_for_idle_connections() {
    let model = ScriptedModel::start(Script::default()).unwrap();
    let addr = model.base_url().strip_prefix("http://").unwrap().to_owned();
    // A client that connected and never sent anything must not keep the server alive.
    let _idle = TcpStream::connect(&addr).unwrap();
    let started = Instant::now();
    drop(model);
    assert!(started.elapsed() < Duration::from_secs(2), "drop took {:?}", started.elapsed());
}
