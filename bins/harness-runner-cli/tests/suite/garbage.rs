//! Garbage for the runner's parsers (issue 8, docs/reliability.md "Garbage in"): run.json (exit 2
//! naming the file or the field, nothing claimed, nothing written), the broker's replies during a
//! run (the runner keeps going, or exits 23 past brokerRetries, as docs/runner.md says), and a
//! panic on another thread than the main one (exit 101, the turn's group killed, the role
//! released).

use std::time::Duration;

use harness_testkit::BrokerAnswer;
use serde_json::{Value, json};

use super::fixture::{CAP, Fixture, finish, message, stderr, terminate, wait_until};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn garbage_run_json_exits_2_naming_what_was_wrong() {
    let fx = Fixture::new();
    let good: Value =
        serde_json::from_slice(&std::fs::read(fx.run.join("run.json")).unwrap()).unwrap();
    let with = |key: &str, value: Value| {
        let mut run = good.clone();
        run[key] = value;
        run.to_string().into_bytes()
    };
    let without = |key: &str| {
        let mut run = good.clone();
        run.as_object_mut().unwrap().remove(key);
        run.to_string().into_bytes()
    };
    let text = good.to_string();
    let deep = "[".repeat(100_000);
    #[rustfmt::skip]
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "run.json is not valid: EOF while parsing"),
        ("not json", b"broker=/x".to_vec(), "run.json is not valid: expected value"),
        ("truncated", text.as_bytes()[..text.len() / 2].to_vec(), "run.json is not valid: EOF while parsing"),
        ("not UTF-8", b"\xff\xfe".to_vec(), "run.json is not valid"),
        ("not UTF-8 in a path", [&text.as_bytes()[..text.len() - 1], b",\"bundle\":\"\xff\"}"].concat(), "run.json is not valid: invalid unicode code point"),
        ("100k open brackets", deep.clone().into_bytes(), "run.json is not valid"),
        ("deep passEnv", format!(r#"{{"passEnv": {deep}"#).into_bytes(), "invalid type: sequence, expected a string"),
        ("oversized", [b"{\"broker\": \"".to_vec(), vec![b'x'; 20 << 20], b"\"".to_vec()].concat(), "run.json: is over 4194304 bytes"),
        ("an array", b"[]".to_vec(), "run.json is not valid"),
        ("two objects", format!("{text} {text}").into_bytes(), "trailing characters"),
        ("an unknown field", with("cap", json!(CAP)), "unknown field `cap`"),
        ("no broker", without("broker"), "missing field `broker`"),
        ("no workspace", without("workspace"), "missing field `workspace`"),
        ("broker relative", with("broker", json!("broker.sock")), "run.json: broker \"broker.sock\" is not absolute"),
        ("cli relative", with("cli", json!("pi")), "run.json: cli \"pi\" is not absolute"),
        ("workspace a file", with("workspace", json!("/etc/hostname")), "the workspace \"/etc/hostname\" is not a directory"),
        ("workspace with NUL", with("workspace", json!("/tmp/a\u{0}b")), "is not a directory"),
        ("turnTimeout 0", with("turnTimeout", json!(0)), "turnTimeout and brokerRetries must be above 0"),
        ("turnTimeout negative", with("turnTimeout", json!(-1)), "run.json is not valid: turnTimeout: invalid value: integer `-1`, expected u64"),
        ("turnTimeout a string", with("turnTimeout", json!("900")), "run.json is not valid: turnTimeout: invalid type: string \"900\", expected u64"),
        ("turnTimeout 1e400", text.replacen("\"turnTimeout\":20", "\"turnTimeout\":1e400", 1).into_bytes(), "number out of range"),
        ("brokerRetries over u32", with("brokerRetries", json!(1u64 << 32)), "brokerRetries: invalid value: integer `4294967296`, expected u32"),
        ("pollInterval a string", with("pollInterval", json!("fast")), "pollInterval: invalid type: string \"fast\", expected f64"),
        ("pollInterval 0", with("pollInterval", json!(0)), "run.json: pollInterval 0 is outside 0.01 to 60 seconds"),
        ("pollInterval 61", with("pollInterval", json!(61)), "run.json: pollInterval 61 is outside 0.01 to 60 seconds"),
        ("pollInterval negative", with("pollInterval", json!(-1.5)), "pollInterval -1.5 is outside"),
        ("passEnv a string", with("passEnv", json!("HOME")), "passEnv: invalid type: string \"HOME\", expected a sequence"),
        ("sessionFiles escaping", with("sessionFiles", json!({"../../x": "y"})), "the session file \"../../x\" is not a plain relative path"),
        ("sessionFiles absolute", with("sessionFiles", json!({"/etc/x": "y"})), "is not a plain relative path"),
        ("sessionFiles empty name", with("sessionFiles", json!({"": "y"})), "is not a plain relative path"),
        ("bundle missing", with("bundle", json!("/nonexistent/bundle")), "/nonexistent/bundle/manifest.json"),
    ];
    for (what, bytes, reason) in &cases {
        std::fs::write(fx.run.join("run.json"), bytes).unwrap();
        let output = finish(fx.spawn(&[]), LIMIT);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains(reason), "{what}: expected {reason:?} in {err}");
        assert!(err.contains("bad run directory or stdin"), "{what}: {err}");
        assert!(!err.contains(CAP), "{what}: the capability: {err}");
        assert!(!err.contains("panicked"), "{what}: {err}");
        assert!(err.len() < 2000, "{what}: {} bytes on stderr", err.len());
    }
    assert!(fx.broker.calls().is_empty(), "nothing was claimed: {:?}", fx.broker.calls());
    let mut left: Vec<String> = std::fs::read_dir(&fx.run)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["bundle", "run.json"], "nothing written in the run directory");
}

/// Issue 14, item 8: the paths under the run directory are text (run.json's relative bundle, the
/// CLI's environment), so a run directory whose path is not UTF-8 is a bad run directory: exit 2
/// naming it, nothing claimed.
#[test]
fn a_run_directory_that_is_not_utf8_exits_2_naming_it() {
    use std::os::unix::ffi::OsStrExt as _;
    let fx = Fixture::new();
    let odd = fx.run.with_file_name(std::ffi::OsStr::from_bytes(b"run-\xff"));
    std::fs::rename(&fx.run, &odd).unwrap();
    let child = fx.spawn_from(None, odd.as_os_str(), &[], &format!("{{\"cap\": \"{CAP}\"}}\n"));
    let output = finish(child, LIMIT);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains(r#"run-\xFF" is not UTF-8"#), "names the directory: {err}");
    assert!(err.contains("bad run directory or stdin"), "{err}");
    assert!(fx.broker.calls().is_empty(), "nothing was claimed: {:?}", fx.broker.calls());
}

#[test]
fn garbage_broker_replies_are_retried_and_the_next_message_is_still_answered() {
    // passEnv names no variable can have are looked up and passed as absent.
    let fx = Fixture::with_run_json(|run| {
        run["passEnv"] = json!(["TEST_MODE", "", "A=B", "NUL\u{0}X", "\u{e9}"]);
    });
    // brokerRetries is 3: two bad replies in a row are waited out, whatever they are.
    let garbage: &[&str] = &[
        "not json",
        r#"{"id": 424242, "ok": true, "result": {"message": null}}"#,
        r#"{"id": 1, "ok": tr"#,
        r#"{"ok": true}"#,
        r#"{"id": "x", "ok": false, "code": "Bad Code!"}"#,
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    ];
    let shapes: &[Value] = &[
        json!({"message": 5}),
        json!({"message": "m"}),
        json!({"message": []}),
        json!({"message": {"text": "no id"}}),
    ];
    let mut answers: Vec<BrokerAnswer> = Vec::new();
    for pair in garbage.chunks(2) {
        answers.extend(pair.iter().map(|line| BrokerAnswer::Raw((*line).to_owned())));
        answers.push(BrokerAnswer::result(json!({"message": null})));
    }
    for pair in shapes.chunks(2) {
        answers.extend(pair.iter().map(|shape| BrokerAnswer::result(shape.clone())));
        answers.push(BrokerAnswer::result(json!({"message": null})));
    }
    // A reply for another id (a failure), then results the runner reads as "no message".
    answers.push(BrokerAnswer::Raw("{\"id\": 0, \"ok\": true}".to_owned()));
    answers.push(BrokerAnswer::result(json!([])));
    answers.push(BrokerAnswer::result(json!({})));
    // A malformed message with an id is skipped and marked read.
    answers.push(BrokerAnswer::result(json!({"message": {"id": "bad-7", "kind": "nonsense"}})));
    answers.push(BrokerAnswer::result(message("m1", "message", "Hello after the garbage")));
    for answer in answers {
        fx.broker.answer_once("message.read", answer);
    }
    // The state read for m1 is garbage too: the turn fails without running the adapter.
    fx.broker.answer_once("state", BrokerAnswer::result(json!({"launch": "running", "tasks": 7})));
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m2", "message", "Again")));
    let child = fx.spawn(&[]);
    wait_until(LIMIT, "both replies", || fx.broker.calls_of("message.send").len() >= 2);
    terminate(&child);
    let output = finish(child, LIMIT);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(err.contains("is not valid"), "{err}");
    assert!(!err.contains(CAP), "the capability: {err}");
    let sends = fx.broker.calls_of("message.send");
    assert_eq!(sends[0].args["replyTo"], "m1");
    assert_eq!(
        sends[0].args["text"],
        "The turn failed: could not read the current state: malformed-state"
    );
    assert_eq!(sends[1].args["replyTo"], "m2");
    assert_eq!(sends[1].args["text"], "answered: Again");
    let reads = fx.broker.calls_of("message.read");
    assert!(reads.iter().any(|call| call.args == json!({"after": "bad-7"})), "{reads:?}");
}

#[test]
fn every_kind_of_garbage_kept_up_past_broker_retries_exits_23() {
    for line in [
        r#"{"id": 424242, "ok": true, "result": {"message": null}}"#,
        r#"{"ok": true}"#,
        r#"{"id": 2, "ok": false, "code": "NOT A CODE"}"#,
        r#"{"id": 2, "ok": tr"#,
    ] {
        let fx = Fixture::new();
        fx.broker.answer("message.read", BrokerAnswer::Raw(line.to_owned()));
        let output = finish(fx.spawn(&[]), LIMIT);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(23), "{line}: {err}");
        assert!(err.contains("3 broker polls in a row failed"), "{line}: {err}");
        assert!(err.contains("broker-unreachable"), "{line}: {err}");
        assert_eq!(fx.broker.calls_of("role.release").len(), 1, "{line}: released on the way out");
    }
}

#[test]
fn a_panic_on_another_thread_stops_the_session_and_exits_101() {
    let fx = Fixture::new();
    fx.broker
        .answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hang on")));
    let trigger = fx.run.join("session/bg.pid");
    let mark = format!("harness-garbage-panic-{}", std::process::id());
    let child = fx.spawn(&[
        ("TEST_MODE", "hang"),
        ("TEST_MARK", &mark),
        ("HARNESS_RUNNER_PANIC_FOR_TEST", trigger.to_str().unwrap()),
    ]);
    // The adapter writes bg.pid mid-turn; the runner's test thread panics when it appears.
    let output = finish(child, LIMIT);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(101), "{err}");
    assert!(err.contains(" panicked: "), "{err}");
    assert!(err.contains("HARNESS_RUNNER_PANIC_FOR_TEST"), "{err}");
    // The background child (its pid is the turn's PID namespace's) carries the mark.
    assert!(std::fs::read_to_string(&trigger).unwrap().trim().parse::<u32>().is_ok());
    wait_until(Duration::from_secs(5), "the turn's group killed", || {
        harness_testkit::marked_processes(&mark).is_empty()
    });
    assert_eq!(fx.broker.calls_of("role.release").len(), 1, "the role is released");
    assert!(fx.broker.calls_of("message.send").is_empty(), "no reply for the killed turn");
    assert!(!fx.run.join("tools.sock").exists(), "the tool socket is removed");
}
