//! The runner's logs (docs/runner.md, "Logs"): a whole session through the binary, in both
//! formats, says what it does on stderr (start, claim, each turn, each RESULT, retries,
//! refusals, the stop and the exit code) and never says the capability or a message's text.

use std::process::Output;
use std::time::Duration;

use harness_testkit::BrokerAnswer;
use serde_json::{Value, json};

use super::fixture::{Fixture, finish, message, stderr, terminate, wait_until};

const LIMIT: Duration = Duration::from_secs(30);
/// A capability no other test uses, so a hit can only come from this run.
const LOG_CAP: &str = "cap-logcheck-5e1d0c7a9b24f863";
/// The text of every message: it reaches the adapter, the request file and the RESULTs only.
const TEXT: &str = "orchid-vellum-7731 is what the sender wrote";

/// Runs a session with `env`: a garbage broker reply (a retry), a message answered, a malformed
/// message answered, a message whose RESULT the broker refuses, then SIGTERM.
fn session(env: &[(&str, &str)]) -> (Output, Fixture) {
    let fx = Fixture::new();
    let with_text = |id: &str, kind: &str| {
        let mut message = message(id, kind, TEXT);
        message["message"]["text"] = json!(format!("{TEXT} ({id})"));
        message
    };
    fx.broker
        .answer_once("message.read", BrokerAnswer::Raw("not json".to_owned()))
        .answer_once("message.read", BrokerAnswer::result(with_text("m1", "message")))
        .answer_once("message.read", BrokerAnswer::result(with_text("m2", "nonsense")))
        .answer_once("message.read", BrokerAnswer::result(with_text("m3", "message")))
        .answer_once("message.send", BrokerAnswer::result(json!({"id": "r1"})))
        .answer_once("message.send", BrokerAnswer::result(json!({"id": "r2"})))
        .answer_once("message.send", BrokerAnswer::refuse("recipient-gone"));
    let child = fx.spawn_with(env, &format!("{{\"cap\": \"{LOG_CAP}\"}}\n"));
    wait_until(LIMIT, "m3 marked read", || {
        fx.broker.calls_of("message.read").iter().any(|call| call.args == json!({"after": "m3"}))
    });
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // The session did what the logs must tell: three sends, the first two delivered.
    let sends = fx.broker.calls_of("message.send");
    assert_eq!(sends.len(), 3, "{sends:?}");
    assert!(sends[0].args["text"].as_str().unwrap().contains(TEXT), "the answer holds the text");
    (output, fx)
}

/// Every line of stderr, checked to hold neither the capability nor the message text.
fn lines_without_secrets(output: &Output) -> Vec<String> {
    let err = stderr(output);
    let lines: Vec<String> = err.lines().map(str::to_owned).collect();
    assert!(!lines.is_empty(), "the runner logged nothing");
    for line in &lines {
        assert!(!line.contains(LOG_CAP), "the capability in a log line: {line}");
        assert!(!line.contains("orchid-vellum"), "a message's text in a log line: {line}");
        assert!(!line.contains("cap-logcheck"), "part of the capability: {line}");
    }
    lines
}

#[test]
fn human_logs_tell_the_session_and_never_its_secrets() {
    let (output, fx) = session(&[]);
    let lines = lines_without_secrets(&output);
    let find = |what: &str| {
        lines
            .iter()
            .find(|line| line.contains(what))
            .unwrap_or_else(|| panic!("no line with {what:?} in {lines:#?}"))
            .clone()
    };
    let digest = std::fs::read_to_string(fx.run.join("run.json")).unwrap();
    let digest: Value = serde_json::from_str(&digest).unwrap();
    let started = find("runner started");
    assert!(started.contains(" INFO "), "{started}");
    assert!(started.contains(digest["bundleDigest"].as_str().unwrap()), "{started}");
    assert!(started.contains("cli_version=fake-cli 1.0"), "{started}");
    assert!(started.contains("confine="), "{started}");
    assert!(started.contains("landlock_abi="), "{started}");
    assert!(find("role claimed").contains("run=run-test-1"), "the claim");
    assert!(find("the broker did not answer (1/3)").contains(" WARN "), "the retry");
    let turn = find("turn ended message_id=m1");
    for field in ["sender=acme-cos", "turn=1", "duration_ms=", "outcome=\"answered\""] {
        assert!(turn.contains(field), "{field} in {turn}");
    }
    assert!(find("RESULT sent message_id=m1").contains("to=acme-cos"), "the RESULT");
    assert!(find("malformed message m2").contains(" WARN "), "the malformed message");
    assert!(find("message.send refused (recipient-gone)").contains("message_id=m3"), "refusal");
    find("stop signal received");
    assert!(find("runner stopped").contains("exit_code=0"), "the exit code");
}

#[test]
fn json_logs_are_one_object_a_line_and_never_hold_secrets() {
    let (output, _fx) = session(&[("HARNESS_LOG_FORMAT", "json")]);
    let events: Vec<Value> = lines_without_secrets(&output)
        .iter()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|error| panic!("not JSON ({error}): {line}"))
        })
        .collect();
    for event in &events {
        assert!(event["timestamp"].is_string(), "{event}");
        assert!(event["level"].is_string(), "{event}");
        assert!(event["message"].is_string(), "{event}");
    }
    let find = |text: &str| {
        events
            .iter()
            .find(|event| event["message"].as_str().unwrap().starts_with(text))
            .unwrap_or_else(|| panic!("no event {text:?} in {events:#?}"))
    };
    let started = find("runner started");
    assert_eq!(started["level"], "INFO");
    assert_eq!(started["cli_version"], "fake-cli 1.0");
    assert!(started["bundle_digest"].as_str().unwrap().len() == 64, "{started}");
    assert!(started["landlock_abi"].is_u64(), "{started}");
    assert_eq!(find("role claimed")["run"], "run-test-1");
    let retry = find("the broker did not answer");
    assert_eq!((retry["level"].as_str(), retry["failures"].as_u64()), (Some("WARN"), Some(1)));
    let turns: Vec<&Value> =
        events.iter().filter(|event| event["message"] == "turn ended").collect();
    assert_eq!(turns.len(), 2, "m1 and m3: {turns:#?}");
    assert_eq!(turns[0]["message_id"], "m1");
    assert_eq!(turns[0]["sender"], "acme-cos");
    assert_eq!(turns[0]["turn"], 1);
    assert_eq!(turns[0]["outcome"], "answered");
    assert!(turns[0]["duration_ms"].is_u64(), "{}", turns[0]);
    assert_eq!(turns[1]["message_id"], "m3");
    let sent: Vec<&Value> =
        events.iter().filter(|event| event["message"] == "RESULT sent").collect();
    let ids: Vec<&Value> = sent.iter().map(|event| &event["message_id"]).collect();
    assert_eq!(ids, [&json!("m1"), &json!("m2")], "the refused one is not sent");
    assert_eq!(find("malformed message m2")["message_id"], "m2");
    assert_eq!(find("the RESULT to message m3 was not delivered")["level"], "WARN");
    let stopped = find("runner stopped");
    assert_eq!(stopped["exit_code"], 0);
}

#[test]
fn the_level_comes_from_harness_log() {
    let (output, _fx) = session(&[("HARNESS_LOG", "warn")]);
    let lines = lines_without_secrets(&output);
    assert!(lines.iter().all(|line| line.contains(" WARN ")), "{lines:#?}");
    assert!(lines.iter().any(|line| line.contains("the broker did not answer")), "{lines:#?}");
    let (output, _fx) = session(&[("HARNESS_LOG", "off")]);
    assert_eq!(stderr(&output), "", "off says nothing");
    // The most verbose level, in both formats, still holds no secret in any line.
    for format in ["human", "json"] {
        let (output, _fx) = session(&[("HARNESS_LOG", "trace"), ("HARNESS_LOG_FORMAT", format)]);
        let lines = lines_without_secrets(&output);
        assert!(lines.iter().any(|line| line.contains("runner started")), "{format}: {lines:#?}");
    }
}

#[test]
fn an_error_exit_is_logged_with_its_code_in_both_formats() {
    for format in ["human", "json"] {
        let fx = Fixture::new();
        fx.broker.answer("role.claim", BrokerAnswer::refuse("claim-refused"));
        let output = finish(fx.spawn(&[("HARNESS_LOG_FORMAT", format)]), LIMIT);
        assert_eq!(output.status.code(), Some(21), "{}", stderr(&output));
        let last = stderr(&output).lines().last().unwrap_or_default().to_owned();
        if format == "json" {
            let event: Value = serde_json::from_str(&last).unwrap();
            assert_eq!(
                (event["level"].as_str(), event["exit_code"].as_u64()),
                (Some("ERROR"), Some(21))
            );
        } else {
            assert!(last.contains(" ERROR ") && last.contains("exit_code=21"), "{last}");
        }
    }
}
