//! Turns: the reply, every failure path, the state block, incoming RESULTs, and secrecy.

use std::time::Duration;

use harness_testkit::BrokerAnswer;
use serde_json::json;

use super::fixture::{
    CAP, Fixture, alive, files_under, finish, host_pid, message, stderr, terminate, wait_until,
};

const LIMIT: Duration = Duration::from_secs(30);

/// Runs one message through a runner in `mode` and returns the text it sent back.
fn reply_in_mode(fx: &Fixture, mode: &str) -> String {
    fx.broker
        .answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hello there")));
    let child = fx.spawn(&[("TEST_MODE", mode)]);
    wait_until(LIMIT, "the reply", || !fx.broker.calls_of("message.send").is_empty());
    // The next poll marks the message read.
    wait_until(LIMIT, "the message marked read", || {
        fx.broker.calls_of("message.read").iter().any(|call| call.args == json!({"after": "m1"}))
    });
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let send = &fx.broker.calls_of("message.send")[0];
    assert_eq!(send.args["to"], "acme-cos");
    assert_eq!(send.args["replyTo"], "m1");
    assert_eq!(send.args["kind"], "result");
    send.args["text"].as_str().unwrap().to_owned()
}

#[test]
fn a_turn_answers_the_sender_with_the_adapters_stdout() {
    let fx = Fixture::new();
    let text = reply_in_mode(&fx, "ok");
    assert_eq!(text, "answered: Hello there");
    let request = std::fs::read_to_string(fx.run.join("turns/0001.request")).unwrap();
    assert!(request.starts_with("Current state, read at "), "{request}");
    assert!(
        request.contains("- Launch: running (set at 2026-11-30T02:59:00Z by event ev-7)"),
        "{request}"
    );
    assert!(request.contains("  - web-1: Ship it"), "{request}");
    assert!(
        request.contains("Message from acme-cos, sent at 2026-11-30T03:00:00Z:\nHello there"),
        "{request}"
    );
    assert_eq!(fx.broker.calls_of("state")[0].args, json!({"cap": 20}));
    for call in fx.broker.calls() {
        assert_eq!(call.cap, CAP, "every call carries the runner's capability");
    }
}

#[test]
fn a_failing_adapter_is_reported_with_its_status() {
    let fx = Fixture::new();
    assert_eq!(reply_in_mode(&fx, "fail"), "The turn failed: the adapter exited with status 3");
    let stderr = std::fs::read_to_string(fx.run.join("turns/0001.stderr")).unwrap();
    assert_eq!(stderr, "boom\n");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(fx.run.join("turns/0001.stderr")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_turn_without_the_agent_end_marker_does_not_count() {
    let fx = Fixture::new();
    assert_eq!(
        reply_in_mode(&fx, "nomarker"),
        "The turn failed: the harness ended without writing the turn marker at agent_end"
    );
}

/// The pid (as the test sees it) of the background child a `hang` turn of `runner` wrote.
fn background_pid(fx: &Fixture, runner: u32) -> u32 {
    wait_until(LIMIT, "the turn's background child", || fx.run.join("session/bg.pid").is_file());
    let inner: u32 = loop {
        if let Ok(pid) = std::fs::read_to_string(fx.run.join("session/bg.pid"))
            .unwrap_or_default()
            .trim()
            .parse()
        {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    host_pid(runner, inner)
}

#[test]
fn a_turn_past_its_wall_clock_is_killed_with_its_whole_group() {
    let fx = Fixture::with_run_json(|run| run["turnTimeout"] = json!(2));
    fx.broker
        .answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hello there")));
    let child = fx.spawn(&[("TEST_MODE", "hang")]);
    let pid = background_pid(&fx, child.id());
    wait_until(LIMIT, "the reply", || !fx.broker.calls_of("message.send").is_empty());
    let text = fx.broker.calls_of("message.send")[0].args["text"].as_str().unwrap().to_owned();
    assert_eq!(text, "The turn failed: the turn ran past its wall clock of 2 s and was stopped");
    wait_until(Duration::from_secs(5), "the background child gone", || !alive(pid));
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

#[test]
fn sigterm_mid_turn_kills_the_turn_and_exits_0() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hello")));
    let child = fx.spawn(&[("TEST_MODE", "hang")]);
    let pid = background_pid(&fx, child.id());
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    wait_until(Duration::from_secs(5), "the turn's group gone", || !alive(pid));
    assert!(fx.broker.calls_of("message.send").is_empty(), "a stopped turn sends nothing");
    assert_eq!(fx.broker.calls_of("role.release").len(), 1);
    // The message is not marked read: the next runner redoes it.
    assert!(
        !fx.broker.calls_of("message.read").iter().any(|call| call.args.get("after").is_some())
    );
}

#[test]
fn a_failed_state_read_fails_the_turn_without_running_the_adapter() {
    let fx = Fixture::new();
    fx.broker.answer("state", BrokerAnswer::refuse("state-unavailable"));
    assert_eq!(
        reply_in_mode(&fx, "ok"),
        "The turn failed: could not read the current state: state-unavailable"
    );
    assert!(!fx.run.join("turns/0001.request").exists(), "the adapter never ran");
}

#[test]
fn an_incoming_result_runs_a_turn_but_gets_no_reply() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("r9", "result", "Landed.")));
    let child = fx.spawn(&[]);
    wait_until(LIMIT, "the RESULT marked read", || {
        fx.broker.calls_of("message.read").iter().any(|call| call.args == json!({"after": "r9"}))
    });
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(fx.broker.calls_of("message.send").is_empty());
    let request = std::fs::read_to_string(fx.run.join("turns/0001.request")).unwrap();
    assert!(request.contains("RESULT from acme-cos, sent at"), "{request}");
}

#[test]
fn a_reply_that_cannot_be_sent_yet_is_retried_not_dropped() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.send", BrokerAnswer::Raw("garbage".to_owned()));
    let text = reply_in_mode(&fx, "ok");
    assert_eq!(text, "answered: Hello there");
    assert_eq!(fx.broker.calls_of("message.send").len(), 2, "sent again after the failed try");
}

#[test]
fn the_capability_is_in_no_environment_argv_or_file() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let child = fx.spawn(&[("TEST_MODE", "env")]);
    wait_until(LIMIT, "the reply", || !fx.broker.calls_of("message.send").is_empty());
    let pid = child.id();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    terminate(&child);
    let output = finish(child, LIMIT);
    let needle = CAP.as_bytes();
    let contains = |haystack: &[u8]| haystack.windows(needle.len()).any(|window| window == needle);
    assert!(!contains(&environ), "the runner's environment holds the capability");
    assert!(!contains(&cmdline), "the runner's argv holds the capability");
    assert!(!contains(&output.stderr) && !contains(&output.stdout), "the runner's output holds it");
    let adapter_env = std::fs::read(fx.run.join("session/adapter.env")).unwrap();
    assert!(!contains(&adapter_env), "the adapter's environment holds the capability");
    for file in files_under(&fx.run) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(!contains(&bytes), "{} holds the capability", file.display());
    }
}

#[test]
fn a_flagged_reply_is_named_in_the_note_of_the_next_result_once() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Plan?")));
    fx.broker
        .answer_once("message.read", BrokerAnswer::result(message("m2", "message", "And now?")));
    let child = fx.spawn(&[("TEST_MODE", "slop")]);
    wait_until(LIMIT, "two replies", || fx.broker.calls_of("message.send").len() >= 2);
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let sends = fx.broker.calls_of("message.send");
    let first = sends[0].args["text"].as_str().unwrap();
    assert!(first.starts_with("Let us delve into the plan."), "{first}");
    assert_eq!(
        first,
        "Let us delve into the plan.\n\nunslop: 1 reply flagged: reply 1 \"Let us delve into the plan\" (delve)"
    );
    assert!(std::fs::read_to_string(fx.run.join("unslop.jsonl")).unwrap().contains("\"flagged\""));
    // Each turn's reply is flagged anew; the second RESULT names the second reply, not the first.
    let second = sends[1].args["text"].as_str().unwrap();
    assert!(
        second.ends_with("unslop: 1 reply flagged: reply 2 \"Let us delve into the plan\" (delve)"),
        "{second}"
    );
}

/// A run directory given as a relative path is made absolute before anything is derived from
/// it: the adapter runs in the workspace, where `MOSAIC_REQUEST`, `MOSAIC_BUNDLE` and the tool
/// socket as relative paths would name nothing (every turn failed).
#[test]
fn a_relative_run_directory_runs_its_turns() {
    let fx = Fixture::new();
    fx.broker
        .answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hello there")));
    let parent = fx.run.parent().unwrap();
    let stdin = format!("{{\"cap\": \"{CAP}\"}}\n");
    let child =
        fx.spawn_from(Some(parent), fx.run.file_name().unwrap(), &[("TEST_MODE", "env")], &stdin);
    wait_until(LIMIT, "the reply", || !fx.broker.calls_of("message.send").is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let env = std::fs::read_to_string(fx.run.join("session/adapter.env")).unwrap();
    for name in ["MOSAIC_RUN", "MOSAIC_BUNDLE", "MOSAIC_REQUEST", "MOSAIC_TOOLS_SOCK"] {
        let value = env.lines().find_map(|line| line.strip_prefix(&format!("{name}="))).unwrap();
        assert!(value.starts_with(parent.to_str().unwrap()), "{name}={value} is not absolute");
    }
    let sends = fx.broker.calls_of("message.send");
    assert_eq!(sends[0].args["text"], "env", "the turn ran: {}", stderr(&output));
}
