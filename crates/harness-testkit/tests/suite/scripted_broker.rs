//! The scripted broker on its own: one-shot answers before the sticky one, unscripted verbs
//! refused, malformed lines answered, every call recorded.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use harness_testkit::{BrokerAnswer, ScriptedBroker};
use serde_json::{Value, json};

fn exchange(broker: &ScriptedBroker, lines: &[&str]) -> Vec<Value> {
    let mut stream = UnixStream::connect(broker.socket()).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    lines
        .iter()
        .map(|line| {
            stream.write_all(format!("{line}\n").as_bytes()).unwrap();
            let mut reply = String::new();
            reader.read_line(&mut reply).unwrap();
            serde_json::from_str(&reply).unwrap()
        })
        .collect()
}

#[test]
fn answers_from_the_script_and_records_every_call() {
    let broker = ScriptedBroker::start().unwrap();
    broker.answer("state", BrokerAnswer::result(json!({"tasks": []})));
    broker.answer_once("state", BrokerAnswer::refuse("capability-expired"));
    let replies = exchange(
        &broker,
        &[
            r#"{"id": 1, "cap": "c", "verb": "state", "args": {"cap": 5}}"#,
            r#"{"id": 2, "cap": "c", "verb": "state", "args": {}}"#,
            r#"{"id": 3, "cap": "c", "verb": "role.claim", "args": {}}"#,
            r#"{"id": 4, "verb": "state"}"#,
        ],
    );
    assert_eq!(replies[0]["code"], "capability-expired");
    assert_eq!(replies[1], json!({"id": 2, "ok": true, "result": {"tasks": []}}));
    assert_eq!(
        (replies[2]["ok"].clone(), replies[2]["code"].clone()),
        (json!(false), json!("unscripted"))
    );
    assert_eq!(
        (replies[3]["id"].clone(), replies[3]["code"].clone()),
        (json!(4), json!("bad-request"))
    );
    let calls = broker.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0].args, json!({"cap": 5}));
    assert_eq!(broker.calls_of("role.claim").len(), 1);
    assert_eq!(broker.malformed(), [r#"{"id": 4, "verb": "state"}"#]);
}
