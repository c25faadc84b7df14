//! Faults (issue 8, item 3): the broker dying mid tool call and mid reply, the adapter killed
//! by a signal, the tool socket's path already taken, a second runner on the same run
//! directory. Each case checks its documented outcome (docs/reliability.md, "Faults"), that no
//! reply is lost, and that no process, socket or temporary file is left behind.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use harness_testkit::BrokerAnswer;
use serde_json::json;

use super::fixture::{
    Fixture, alive, assert_clean, finish, host_pid, message, start, stderr, terminate, tool,
    wait_until,
};

const LIMIT: Duration = Duration::from_secs(30);

/// The broker's socket moved away and back: the broker "dies" (every new connection fails with
/// ENOENT) and "restarts" at the same path.
struct Outage {
    socket: PathBuf,
    away: PathBuf,
}

impl Outage {
    fn begin(fx: &Fixture) -> Outage {
        let socket = fx.broker.socket().to_path_buf();
        let away = fx.broker.dir().join("away.sock");
        std::fs::rename(&socket, &away).unwrap();
        Outage { socket, away }
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        let _ = std::fs::rename(&self.away, &self.socket);
    }
}

// The broker dies mid tool call.

#[test]
fn broker_hangs_up_mid_tool_call_the_caller_is_told_and_the_runner_serves_on() {
    let fx = Fixture::with_run_json(|run| run["brokerRetries"] = json!(1000));
    fx.broker.answer("spec.read", BrokerAnswer::result(json!({"text": "north star"})));
    // The broker takes the call and its connection closes with no reply line (it died).
    fx.broker.answer_once("spec.read", BrokerAnswer::Silence(Duration::ZERO));
    let child = start(&fx, &[]);
    let (ok, text) = tool(&fx.run, "read_spec", json!({"project": "web"}));
    assert!(!ok);
    assert!(text.starts_with("failed: the broker's reply to spec.read is not valid"), "{text}");
    // The socket is gone: the next call is told the broker is unreachable, at once.
    {
        let _outage = Outage::begin(&fx);
        let (ok, text) = tool(&fx.run, "read_spec", json!({"project": "web"}));
        assert!(!ok);
        assert!(text.starts_with("failed: the broker at "), "{text}");
        assert!(text.contains("unreachable"), "{text}");
    }
    // The broker is back: the same runner answers from it again.
    let (ok, text) = tool(&fx.run, "read_spec", json!({"project": "web"}));
    assert!(ok, "{text}");
    assert_eq!(text, r#"{"text":"north star"}"#);
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(fx.broker.calls_of("role.release").len(), 1);
    assert_clean(&fx.run);
}

#[test]
fn broker_answers_nothing_mid_tool_call_the_caller_is_told_when_it_hangs_up() {
    let fx = Fixture::new();
    // Silent past the runner's 10 s poll timeout: a typed tool's request has the tool socket's
    // 150 s (item 10 of issue 12), so the call ends when the broker hangs up, not before.
    fx.broker.answer("spec.read", BrokerAnswer::Silence(Duration::from_secs(12)));
    let child = start(&fx, &[]);
    let started = Instant::now();
    let (ok, text) = tool(&fx.run, "read_spec", json!({"project": "web"}));
    let waited = started.elapsed();
    assert!(!ok);
    assert!(text.starts_with("failed: the broker's reply to spec.read is not valid"), "{text}");
    assert!(
        waited >= Duration::from_secs(11) && waited < Duration::from_secs(20),
        "the broker hung up after 12 s; the call took {waited:?}"
    );
    assert_eq!(fx.broker.calls_of("spec.read").len(), 1, "a call is never retried");
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_clean(&fx.run);
}

// The broker dies mid reply.

#[test]
fn broker_dies_mid_reply_the_result_is_sent_again_and_only_then_marked_read() {
    let fx = Fixture::with_run_json(|run| run["brokerRetries"] = json!(200));
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    // The first send reaches the broker, which dies before answering: the connection closes
    // with no line a moment later; meanwhile its socket is gone too.
    // The outage outlasts the hung-up send, so the retries meet a missing socket first.
    fx.broker.answer_once("message.send", BrokerAnswer::Silence(Duration::from_millis(500)));
    let child = fx.spawn(&[]);
    wait_until(LIMIT, "the first send", || !fx.broker.calls_of("message.send").is_empty());
    {
        let _outage = Outage::begin(&fx);
        std::thread::sleep(Duration::from_millis(1000));
    }
    wait_until(LIMIT, "the message marked read", || {
        fx.broker.calls_of("message.read").iter().any(|call| call.args == json!({"after": "m1"}))
    });
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let calls = fx.broker.calls();
    let sends: Vec<usize> = (0..calls.len()).filter(|&i| calls[i].verb == "message.send").collect();
    assert_eq!(sends.len(), 2, "sent again once the broker was back: {calls:?}");
    assert_eq!(calls[sends[0]].args, calls[sends[1]].args, "the same RESULT both times");
    assert_eq!(calls[sends[1]].args["text"], "answered: Hi");
    let marked = calls.iter().position(|call| call.args == json!({"after": "m1"})).unwrap();
    assert!(marked > sends[1], "marked read only after the RESULT was delivered");
    assert!(
        calls[sends[0]..sends[1]].iter().all(|call| call.verb != "message.read"),
        "no new message is taken while a RESULT waits"
    );
    assert!(stderr(&output).contains("the broker did not answer"), "{}", stderr(&output));
    assert!(!fx.run.join("turns/0001.unsent").exists());
    assert_clean(&fx.run);
}

#[test]
fn broker_gone_for_good_mid_reply_exits_23_keeps_the_result_and_leaves_the_message_unread() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    fx.broker.answer("message.send", BrokerAnswer::Silence(Duration::ZERO));
    let output = finish(fx.spawn(&[]), LIMIT);
    assert_eq!(output.status.code(), Some(23), "{}", stderr(&output));
    assert_eq!(fx.broker.calls_of("message.send").len(), 3, "brokerRetries tries");
    assert!(
        !fx.broker.calls_of("message.read").iter().any(|call| call.args.get("after").is_some()),
        "the message stays unread for the next runner"
    );
    // Not dropped silently: kept for the operator and named on stderr.
    let kept = std::fs::read_to_string(fx.run.join("turns/0001.unsent")).unwrap();
    assert_eq!(kept, "answered: Hi");
    assert!(
        stderr(&output).contains("RESULT to message m1 was not delivered"),
        "{}",
        stderr(&output)
    );
    assert_eq!(fx.broker.calls_of("role.release").len(), 1, "the release is still tried");
    assert_clean(&fx.run);
}

#[test]
fn sigterm_while_a_result_waits_for_the_broker_keeps_it() {
    let fx = Fixture::with_run_json(|run| run["brokerRetries"] = json!(100_000));
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    fx.broker.answer("message.send", BrokerAnswer::Silence(Duration::ZERO));
    let child = fx.spawn(&[]);
    wait_until(LIMIT, "two sends", || fx.broker.calls_of("message.send").len() >= 2);
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(fx.run.join("turns/0001.unsent")).unwrap(), "answered: Hi");
    assert!(
        stderr(&output).contains("was stopped before the broker took it"),
        "{}",
        stderr(&output)
    );
    assert!(
        !fx.broker.calls_of("message.read").iter().any(|call| call.args.get("after").is_some())
    );
    assert_clean(&fx.run);
}

#[test]
fn broker_refuses_a_result_it_is_kept_and_the_message_marked_read() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    fx.broker.answer("message.send", BrokerAnswer::refuse("recipient-gone"));
    let child = fx.spawn(&[]);
    wait_until(LIMIT, "the message marked read", || {
        fx.broker.calls_of("message.read").iter().any(|call| call.args == json!({"after": "m1"}))
    });
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(fx.broker.calls_of("message.send").len(), 1, "a refusal is not retried");
    assert_eq!(std::fs::read_to_string(fx.run.join("turns/0001.unsent")).unwrap(), "answered: Hi");
    assert!(
        stderr(&output).contains("message.send refused (recipient-gone)"),
        "{}",
        stderr(&output)
    );
    assert_clean(&fx.run);
}

// The adapter is killed by a signal.

#[test]
fn adapter_killed_by_a_signal_fails_the_turn_naming_it_and_its_group_is_gone() {
    use rustix::process::Signal;
    for (signal, number) in [(Signal::KILL, 9), (Signal::SEGV, 11), (Signal::TERM, 15)] {
        let fx = Fixture::new();
        fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Go")));
        let child = fx.spawn(&[("TEST_MODE", "pids")]);
        wait_until(LIMIT, "the adapter's pids", || fx.run.join("session/pids").is_file());
        let pids = std::fs::read_to_string(fx.run.join("session/pids")).unwrap();
        let [background, adapter]: [u32; 2] = pids
            .split_whitespace()
            .map(|pid| host_pid(child.id(), pid.parse().unwrap()))
            .collect::<Vec<_>>()
            .try_into()
            .unwrap();
        let adapter = rustix::process::Pid::from_raw(adapter.try_into().unwrap()).unwrap();
        rustix::process::kill_process(adapter, signal).unwrap();
        wait_until(LIMIT, "the reply", || !fx.broker.calls_of("message.send").is_empty());
        let text = fx.broker.calls_of("message.send")[0].args["text"].as_str().unwrap().to_owned();
        assert_eq!(text, format!("The turn failed: the adapter was killed by signal {number}"));
        wait_until(Duration::from_secs(5), "the adapter's group gone", || !alive(background));
        // The runner goes on: the message is marked read and the next poll comes.
        wait_until(LIMIT, "the message marked read", || {
            fx.broker
                .calls_of("message.read")
                .iter()
                .any(|call| call.args == json!({"after": "m1"}))
        });
        terminate(&child);
        let output = finish(child, LIMIT);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_clean(&fx.run);
    }
}

// The tool socket's path already exists.

/// Starts a runner on a run directory whose `tools.sock` is taken and checks the refusal.
#[track_caller]
fn refused_before_the_claim(fx: &Fixture, names: &str) {
    let output = finish(fx.spawn(&[]), LIMIT);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("tools.sock"), "{}", stderr(&output));
    assert!(stderr(&output).contains(names), "{}", stderr(&output));
    assert!(fx.broker.calls_of("role.claim").is_empty(), "refused before the claim");
    let private: Vec<_> = std::fs::read_dir(&fx.run)
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(".tools-sock-"))
        .collect();
    assert!(private.is_empty(), "no private bind directory is left");
}

#[test]
fn tool_socket_path_is_a_regular_file_left_alone_exit_2() {
    let fx = Fixture::new();
    std::fs::write(fx.run.join("tools.sock"), "not yours").unwrap();
    refused_before_the_claim(&fx, "is not a socket");
    assert_eq!(std::fs::read_to_string(fx.run.join("tools.sock")).unwrap(), "not yours");
}

#[test]
fn tool_socket_path_is_a_directory_left_alone_exit_2() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.run.join("tools.sock")).unwrap();
    std::fs::write(fx.run.join("tools.sock/kept"), "kept").unwrap();
    refused_before_the_claim(&fx, "is not a socket");
    assert_eq!(std::fs::read_to_string(fx.run.join("tools.sock/kept")).unwrap(), "kept");
}

#[test]
fn tool_socket_path_is_a_symlink_left_alone_exit_2() {
    let fx = Fixture::new();
    let elsewhere = fx.workspace.join("elsewhere.sock");
    let _listener = UnixListener::bind(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, fx.run.join("tools.sock")).unwrap();
    refused_before_the_claim(&fx, "is not a socket");
    assert!(std::fs::symlink_metadata(fx.run.join("tools.sock")).unwrap().is_symlink());
    assert!(UnixStream::connect(&elsewhere).is_ok(), "the link's target is untouched");
}

#[test]
fn tool_socket_path_is_a_live_socket_of_another_process_not_stolen_exit_2() {
    let fx = Fixture::new();
    let listener = UnixListener::bind(fx.run.join("tools.sock")).unwrap();
    refused_before_the_claim(&fx, "live socket");
    // Still the other process's socket, still answering.
    let _client = UnixStream::connect(fx.run.join("tools.sock")).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (_server, _) = listener.accept().unwrap();
}

#[test]
fn tool_socket_path_is_a_stale_socket_it_is_replaced() {
    let fx = Fixture::new();
    fx.broker.answer("spec.read", BrokerAnswer::result(json!({"text": "north star"})));
    drop(UnixListener::bind(fx.run.join("tools.sock")).unwrap());
    assert!(UnixStream::connect(fx.run.join("tools.sock")).is_err(), "stale: nobody accepts");
    let child = start(&fx, &[]);
    let (ok, text) = tool(&fx.run, "read_spec", json!({"project": "web"}));
    assert!(ok, "{text}");
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_clean(&fx.run);
}

// A second runner on the same run directory.

#[test]
fn second_runner_on_the_same_run_directory_exits_2_naming_the_lock_before_claiming() {
    let fx = Fixture::new();
    fx.broker.answer("spec.read", BrokerAnswer::result(json!({"text": "north star"})));
    let first = start(&fx, &[]);
    let second = finish(fx.spawn(&[]), LIMIT);
    assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
    assert!(stderr(&second).contains("runner.lock"), "{}", stderr(&second));
    assert!(stderr(&second).contains("another runner"), "{}", stderr(&second));
    assert_eq!(fx.broker.calls_of("role.claim").len(), 1, "the second runner claimed nothing");
    // The first runner is untouched: its socket is still there and serves.
    let (ok, text) = tool(&fx.run, "read_spec", json!({"project": "web"}));
    assert!(ok, "{text}");
    terminate(&first);
    let output = finish(first, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(fx.broker.calls_of("role.release").len(), 1, "only the first runner released");
    assert_clean(&fx.run);
    // The lock went with the first runner: a third one starts.
    let third = start(&fx, &[]);
    terminate(&third);
    assert_eq!(finish(third, LIMIT).status.code(), Some(0));
    assert_eq!(fx.broker.calls_of("role.claim").len(), 2);
}

#[test]
fn a_runner_killed_with_sigkill_leaves_no_lock_and_a_stale_socket_the_next_one_replaces() {
    let fx = Fixture::new();
    fx.broker.answer("spec.read", BrokerAnswer::result(json!({"text": "north star"})));
    let mut first = start(&fx, &[]);
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(fx.run.join("tools.sock").exists(), "SIGKILL leaves the socket file, stale");
    let second = start(&fx, &[]);
    let (ok, text) = tool(&fx.run, "read_spec", json!({"project": "web"}));
    assert!(ok, "{text}");
    terminate(&second);
    let output = finish(second, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_clean(&fx.run);
}
