//! The runner against a hostile session (issue 12): the test adapter is the attacker (it reads
//! the runner's memory, leaves detached processes holding its stdout, replaces the unslop log
//! with a FIFO or a link to /dev/zero, makes turn files ahead of the runner), and the scripted
//! broker plays a broker that dies, goes silent or sends what the runner cannot parse.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use harness_testkit::{BrokerAnswer, kill_marked, marked_processes};
use serde_json::{Value, json};

use super::fixture::{
    CAP, FAKE_CLI_VERSION, Fixture, assert_clean, finish, message, start, stderr, terminate, tool,
    wait_until,
};

const LIMIT: Duration = Duration::from_secs(30);

/// A string no other process has in its argv: this test's marker for what its adapter starts.
fn marker(what: &str) -> String {
    static SERIAL: AtomicU32 = AtomicU32::new(0);
    format!(
        "harness-hostile-{what}-{}-{}",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    )
}

fn sends(fx: &Fixture) -> Vec<Value> {
    fx.broker.calls_of("message.send").into_iter().map(|call| call.args).collect()
}

fn marked_read(fx: &Fixture, id: &str) -> bool {
    fx.broker.calls_of("message.read").iter().any(|call| call.args["after"] == id)
}

/// Starts the runner with an environment given as bytes.
#[expect(clippy::disallowed_methods, reason = "the test runs the runner binary")]
fn spawn_os(fx: &Fixture, env: &[(&str, Vec<u8>)]) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_harness-runner"))
        .arg(&fx.run)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .envs(env.iter().map(|(key, value)| (*key, OsString::from_vec(value.clone()))))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(format!("{{\"cap\": \"{CAP}\"}}\n").as_bytes()).unwrap();
    drop(pipe);
    child
}

// Item 1: the capability in memory.

/// Runs the runner and its adapter as `nobody` when the test runs as root (root's
/// CAP_SYS_PTRACE would read any process's memory, dumpable or not), from copies of what they
/// execute that `nobody` can read; as any other user, as that user.
#[test]
fn the_adapter_cannot_read_the_capability_out_of_the_runners_memory() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Go")));
    let root = rustix::process::geteuid().is_root();
    let bin = tempfile::Builder::new().prefix("harness-nobody-").tempdir().unwrap();
    let runner = bin.path().join("harness-runner");
    std::fs::copy(env!("CARGO_BIN_EXE_harness-runner"), &runner).unwrap();
    if root {
        use std::os::unix::fs::PermissionsExt;
        let nobody = Some(rustix::process::Uid::from_raw(65534));
        let nogroup = Some(rustix::process::Gid::from_raw(65534));
        std::fs::set_permissions(bin.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&runner, std::fs::Permissions::from_mode(0o755)).unwrap();
        // The fixture's whole tree (run directory, bundle, workspace) becomes nobody's, and the
        // broker's socket reachable for it.
        let tree = fx.run.parent().unwrap();
        let mut stack = vec![tree.to_path_buf()];
        while let Some(path) = stack.pop() {
            rustix::fs::chownat(
                rustix::fs::CWD,
                &path,
                nobody,
                nogroup,
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .unwrap();
            if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            }
        }
        std::fs::set_permissions(fx.broker.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(fx.broker.socket(), std::fs::Permissions::from_mode(0o777))
            .unwrap();
    }
    #[expect(clippy::disallowed_methods, reason = "the test runs the runner binary")]
    let mut command = Command::new(&runner);
    command
        .arg(&fx.run)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("TEST_MODE", "memread")
        // What the attacker looks for: the capability's first characters.
        .env("TEST_MARK", &CAP[..16])
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if root {
        use std::os::unix::process::CommandExt;
        command.uid(65534).gid(65534);
    }
    let mut child = command.spawn().unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(format!("{{\"cap\": \"{CAP}\"}}\n").as_bytes()).unwrap();
    drop(pipe);
    wait_until(LIMIT, "the reply", || !fx.broker.calls_of("message.send").is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let read = std::fs::read_to_string(fx.run.join("session/memread")).unwrap();
    let lines: Vec<&str> = read.lines().collect();
    assert_eq!(lines[..2], ["open-denied", "0"], "the adapter read the runner's memory: {read}");
    // The control: the same scan reads a dumpable process of the same user (its own shell,
    // from a child: Yama's ptrace_scope 1 or more refuses that, so there the control is moot).
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
    if matches!(yama.trim(), "" | "0") {
        assert_ne!(lines[2], "0", "the scan itself does not work: {read}");
    }
}

// Item 2: the founder-credential stop on bytes, and one environment source.

#[test]
fn a_founder_variable_that_is_not_utf8_stops_the_run_before_the_claim() {
    for (name, value) in [
        ("SSH_AUTH_SOCK", b"/tmp/ssh-\xe9/agent.1".to_vec()),
        ("GH_TOKEN", b"ghp_\xff\xfe".to_vec()),
    ] {
        let fx = Fixture::new();
        let output = finish(spawn_os(&fx, &[(name, value)]), LIMIT);
        assert_eq!(output.status.code(), Some(20), "{name}: {}", stderr(&output));
        assert!(stderr(&output).contains(name), "{}", stderr(&output));
        assert!(fx.broker.calls_of("role.claim").is_empty(), "{name}: claimed");
    }
}

#[test]
fn a_pass_env_value_that_is_not_utf8_reaches_the_adapter_as_is() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Go")));
    let child =
        spawn_os(&fx, &[("TEST_MODE", b"env".to_vec()), ("TEST_MARK", b"caf\xe9-\xff".to_vec())]);
    wait_until(LIMIT, "the reply", || !fx.broker.calls_of("message.send").is_empty());
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
    let env = std::fs::read(fx.run.join("session/adapter.env")).unwrap();
    assert!(
        env.split(|&b| b == b'\n').any(|line| line == b"TEST_MARK=caf\xe9-\xff"),
        "{}",
        String::from_utf8_lossy(&env)
    );
}

// Item 3: no doubled RESULT.

#[test]
fn a_restarted_runner_never_answers_a_delivered_message_twice() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    // The broker takes the RESULT and dies before the mark: every read after it goes
    // unanswered, and the runner ends with exit 23.
    fx.broker.answer("message.read", BrokerAnswer::Silence(Duration::ZERO));
    let output = finish(fx.spawn(&[]), LIMIT);
    assert_eq!(output.status.code(), Some(23), "{}", stderr(&output));
    assert_eq!(sends(&fx).len(), 1);
    // The mark was retried on its own before the exit.
    assert!(
        fx.broker
            .calls_of("message.read")
            .iter()
            .any(|call| call.args == json!({"after": "m1", "limit": 0})),
        "{:?}",
        fx.broker.calls_of("message.read")
    );
    // The broker is back, and m1 is still unread there: the next runner gets it again.
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    fx.broker.answer("message.read", BrokerAnswer::result(json!({"message": null})));
    let child = start(&fx, &[]);
    wait_until(LIMIT, "m1 marked read", || {
        fx.broker.calls_of("message.read").iter().any(|call| call.args == json!({"after": "m1"}))
    });
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(sends(&fx).len(), 1, "answered twice: {:?}", sends(&fx));
    assert!(!fx.run.join("turns/0002.request").exists(), "no second turn for m1");
    assert!(stderr(&output).contains("message m1 was answered already"), "{}", stderr(&output));
    // The record is in the runner's own directory, 0700.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(fx.run.join("state")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    assert_clean(&fx.run);
}

#[test]
fn a_state_dir_named_in_run_json_holds_the_record_and_one_inside_the_run_is_refused() {
    let elsewhere = tempfile::tempdir().unwrap();
    let state = elsewhere.path().join("state");
    let fx = Fixture::with_run_json(|run| run["stateDir"] = json!(state));
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let child = fx.spawn(&[]);
    wait_until(LIMIT, "m1 marked read", || marked_read(&fx, "m1"));
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
    let record = std::fs::read_to_string(state.join("runner-state.json")).unwrap();
    assert!(record.contains("\"m1\""), "{record}");
    assert!(!fx.run.join("state").exists());
    let cases: [fn(&Fixture) -> std::path::PathBuf; 4] = [
        |fx| fx.run.join("state"),
        |fx| fx.run.join("session/state"),
        |fx| fx.workspace.join("state"),
        |_| "state".into(),
    ];
    for case in cases {
        let fx = Fixture::new();
        let inside = case(&fx);
        let path = fx.run.join("run.json");
        let mut run: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        run["stateDir"] = json!(inside);
        std::fs::write(&path, run.to_string()).unwrap();
        let output = finish(fx.spawn(&[]), LIMIT);
        assert_eq!(output.status.code(), Some(2), "{inside:?}: {}", stderr(&output));
        assert!(stderr(&output).contains("stateDir"), "{}", stderr(&output));
        assert!(fx.broker.calls_of("role.claim").is_empty());
    }
}

// Item 4: no lost message.

#[test]
fn a_malformed_message_with_an_id_and_a_sender_is_answered_then_marked_read() {
    for (id, body, reason) in [
        ("m-nosent", json!({"kind": "message", "text": "Hi"}), "missing field `sentAt`"),
        (
            "m-number",
            json!({"kind": "message", "sentAt": 7, "text": "Hi"}),
            "sentAt: invalid type: integer `7`, expected a string",
        ),
        (
            "m-kind",
            json!({"kind": "memo", "sentAt": "2026-11-30T03:00:00Z", "text": "Hi"}),
            "kind: unknown variant `memo`",
        ),
        (
            "m-null",
            json!({"kind": "message", "sentAt": "2026-11-30T03:00:00Z", "text": null}),
            "text: invalid type: null",
        ),
    ] {
        let fx = Fixture::new();
        let mut message = body;
        message["id"] = json!(id);
        message["from"] = json!("acme-cos");
        fx.broker.answer_once("message.read", BrokerAnswer::result(json!({"message": message})));
        let child = fx.spawn(&[]);
        wait_until(LIMIT, "the message marked read", || marked_read(&fx, id));
        terminate(&child);
        let output = finish(child, LIMIT);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let sent = sends(&fx);
        assert_eq!(sent.len(), 1, "{id}: {sent:?}");
        assert_eq!(sent[0]["to"], "acme-cos");
        assert_eq!(sent[0]["replyTo"], id);
        let text = sent[0]["text"].as_str().unwrap();
        assert!(text.starts_with("The turn failed: malformed message: "), "{text}");
        assert!(text.contains(reason), "{id}: {text}");
        assert!(stderr(&output).contains(id), "{}", stderr(&output));
        // The send came before the mark.
        let calls = fx.broker.calls();
        let send = calls.iter().position(|c| c.verb == "message.send").unwrap();
        let mark = calls.iter().position(|c| c.args["after"] == id).unwrap();
        assert!(send < mark);
        assert!(!fx.run.join("turns/0001.request").exists(), "no turn for it");
    }
}

// Item 5: no lost answer.

#[test]
fn a_detached_child_holding_stdout_does_not_empty_the_answer() {
    let mark = marker("stdout");
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let child = fx.spawn(&[("TEST_MODE", "detach"), ("TEST_MARK", &mark)]);
    wait_until(LIMIT, "the reply", || !sends(&fx).is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    let left = kill_marked(&mark);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(sends(&fx)[0]["text"], "answered: Hi");
    assert!(left.is_empty(), "the holder of stdout was left running: {left:?}");
}

/// 50 MiB on stderr, with a detached process left holding stderr: the turn ends and is
/// answered, and its stderr file keeps the head and the tail, at most 1 MiB and the note.
#[test]
fn a_turn_flooding_stderr_leaves_a_file_of_at_most_1_mib_with_its_head_and_tail() {
    let mark = marker("stderr");
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let child = fx.spawn(&[("TEST_MODE", "stderrflood"), ("TEST_MARK", &mark)]);
    wait_until(LIMIT, "the reply", || !sends(&fx).is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    let left = kill_marked(&mark);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(sends(&fx)[0]["text"], "answered: Hi");
    assert!(left.is_empty(), "the holder of stderr was left running: {left:?}");
    let files: Vec<_> = std::fs::read_dir(fx.run.join("turns"))
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "stderr"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let kept = std::fs::read(&files[0]).unwrap();
    let note = "bytes of this turn's stderr dropped here";
    assert!(kept.len() <= 1024 * 1024 + 200, "the stderr file is {} bytes", kept.len());
    assert!(kept.starts_with(b"HEAD-OF-STDERR\n0123456789abcdef\n"), "the head is gone");
    // 52428800 is not a whole number of `yes` lines: the last one is cut before the marker.
    let last = 52_428_800 % 17;
    let tail = format!("0123456789abcdef\n{}TAIL-OF-STDERR\n", &"0123456789abcdef"[..last]);
    assert!(kept.ends_with(tail.as_bytes()), "the tail is gone");
    let text = String::from_utf8_lossy(&kept);
    let notes: Vec<&str> = text.lines().filter(|line| line.contains(note)).collect();
    let dropped = 52_428_800 + 30 - 1024 * 1024;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].starts_with(&format!("[harness-runner: {dropped} bytes")), "{notes:?}");
}

#[test]
fn a_turn_that_prints_nothing_fails_with_a_reason_never_an_empty_result() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let child = fx.spawn(&[("TEST_MODE", "silent")]);
    wait_until(LIMIT, "the reply", || !sends(&fx).is_empty());
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
    assert_eq!(sends(&fx)[0]["text"], "The turn failed: the adapter printed no answer");
}

// Item 6: nothing left running.

#[test]
fn a_detached_process_a_turn_started_is_killed_after_the_turn() {
    let mark = marker("after-turn");
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let child = fx.spawn(&[("TEST_MODE", "leave"), ("TEST_MARK", &mark)]);
    wait_until(LIMIT, "the reply", || !sends(&fx).is_empty());
    // The runner is still running: the turn's leftovers are gone already, not at exit.
    let gone = Instant::now();
    while !marked_processes(&mark).is_empty() && gone.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = kill_marked(&mark);
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(left.is_empty(), "left running after the turn: {left:?}");
    // The turn's PID namespace ended with it: the runner's sweep found nothing left to kill.
    let err = stderr(&output);
    assert!(!err.contains("turn 0001 left "), "{err}");
}

#[test]
fn a_detached_process_of_a_turn_stopped_by_sigterm_is_killed_before_the_exit() {
    let mark = marker("sigterm");
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let child = fx.spawn(&[("TEST_MODE", "leavehang"), ("TEST_MARK", &mark)]);
    wait_until(LIMIT, "the adapter", || fx.run.join("session/started").exists());
    wait_until(LIMIT, "the detached process", || !marked_processes(&mark).is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    let left = kill_marked(&mark);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(left.is_empty(), "left running after the runner's exit: {left:?}");
}

// Item 7: the run directory is hostile input.

/// The runner's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn an_unslop_log_replaced_by_a_fifo_or_a_link_to_dev_zero_is_a_broken_check_told_once() {
    for mode in ["fifo", "zero"] {
        // The attack needs the run directory writable, which confinement denies the session;
        // with confinement off (or a kernel without Landlock) the runner must still hold.
        let fx = unconfined();
        fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "A")));
        fx.broker.answer_once("message.read", BrokerAnswer::result(message("m2", "message", "B")));
        let mut child = fx.spawn(&[("TEST_MODE", mode)]);
        let started = Instant::now();
        let mut peak = 0;
        while sends(&fx).len() < 2 {
            peak = peak.max(rss_kib(child.id()));
            if peak > 64 * 1024 || started.elapsed() > LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{mode}: no two replies in time, or the runner grew to {peak} KiB");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let stopping = Instant::now();
        terminate(&child);
        let output = finish(child, LIMIT);
        assert_eq!(output.status.code(), Some(0), "{mode}: {}", stderr(&output));
        assert!(stopping.elapsed() < Duration::from_secs(5), "{mode}: the stop took long");
        let sent = sends(&fx);
        let first = sent[0]["text"].as_str().unwrap();
        assert!(first.starts_with("answered: A\n\nunslop: the check is broken"), "{mode}: {first}");
        assert_eq!(sent[1]["text"], "answered: B", "{mode}: told once");
    }
}

#[test]
fn a_turn_file_made_ahead_by_the_session_is_skipped_never_written_through() {
    // As above: writing turns/ needs confinement off.
    let fx = unconfined();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "A")));
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m2", "message", "B")));
    let child = fx.spawn(&[("TEST_MODE", "ahead")]);
    wait_until(LIMIT, "two replies", || sends(&fx).len() >= 2);
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(sends(&fx)[1]["text"], "answered: B");
    assert!(!fx.workspace.join("victim").exists(), "written through the session's link");
    assert!(std::fs::symlink_metadata(fx.run.join("turns/0002.request")).unwrap().is_symlink());
    assert!(fx.run.join("turns/0003.request").is_file());
}

// Item 8: exit 22 on every session-invalid refusal.

#[test]
fn a_send_refused_with_claim_revoked_exits_22() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    fx.broker.answer("message.send", BrokerAnswer::refuse("claim-revoked"));
    let output = finish(fx.spawn(&[]), LIMIT);
    assert_eq!(output.status.code(), Some(22), "{}", stderr(&output));
    assert!(stderr(&output).contains("message.send refused: claim-revoked"), "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(fx.run.join("turns/0001.unsent")).unwrap(), "answered: Hi");
    assert_eq!(fx.broker.calls_of("role.release").len(), 1);
}

// Item 9: a prompt stop with a silent broker.

#[test]
fn sigterm_with_a_silent_broker_stops_within_a_few_seconds() {
    let fx = Fixture::new();
    let child = start(&fx, &[]);
    fx.broker.answer("message.read", BrokerAnswer::Silence(Duration::from_secs(30)));
    fx.broker.answer("role.release", BrokerAnswer::Silence(Duration::from_secs(30)));
    let polls = fx.broker.calls_of("message.read").len();
    wait_until(LIMIT, "a silent poll", || fx.broker.calls_of("message.read").len() > polls);
    let stopping = Instant::now();
    terminate(&child);
    let output = finish(child, LIMIT);
    let took = stopping.elapsed();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(took < Duration::from_secs(4), "the stop took {took:?}");
    assert_eq!(fx.broker.calls_of("role.release").len(), 1, "the release is still tried");
}

#[test]
fn a_claim_in_flight_at_sigterm_is_released() {
    let fx = Fixture::new();
    fx.broker.answer("role.claim", BrokerAnswer::Silence(Duration::from_secs(30)));
    let child = fx.spawn(&[]);
    wait_until(LIMIT, "the claim", || !fx.broker.calls_of("role.claim").is_empty());
    let stopping = Instant::now();
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stopping.elapsed() < Duration::from_secs(4), "took {:?}", stopping.elapsed());
    assert_eq!(fx.broker.calls_of("role.release").len(), 1, "the claim may have been taken");
    assert!(fx.broker.calls_of("message.read").is_empty());
}

// Item 10: typed tools keep the spec's limits.

fn granted(actions: &[&str]) -> Fixture {
    Fixture::with_setup(
        |resolved| resolved.actions.within_role.extend(actions.iter().map(|a| (*a).to_owned())),
        |_| {},
    )
}

#[test]
fn a_typed_tool_call_waits_for_a_slow_broker_past_the_poll_timeout_and_is_sent_once() {
    let fx = Fixture::new();
    fx.broker.answer(
        "spec.read",
        BrokerAnswer::Late(Duration::from_secs(12), json!({"text": "north star"})),
    );
    let child = start(&fx, &[]);
    let started = Instant::now();
    let (ok, text) = tool(&fx.run, "read_spec", json!({"project": "web"}));
    assert!(ok, "{text}");
    assert_eq!(text, r#"{"text":"north star"}"#);
    assert!(started.elapsed() >= Duration::from_secs(12));
    assert_eq!(fx.broker.calls_of("spec.read").len(), 1, "never sent twice");
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
    assert_clean(&fx.run);
}

#[test]
fn organization_revision_returns_the_revision_alone() {
    let fx = granted(&["organization.change"]);
    fx.broker.answer(
        "organization.revision",
        BrokerAnswer::result(json!({"revision": 12, "organization": {"limits": {"pm": 3}}})),
    );
    let child = start(&fx, &[]);
    assert_eq!(
        tool(&fx.run, "organization_revision", json!({})),
        (true, r#"{"revision":12}"#.into())
    );
    fx.broker.answer("organization.revision", BrokerAnswer::result(json!({"rev": 12})));
    let (ok, text) = tool(&fx.run, "organization_revision", json!({}));
    assert!(!ok && text.contains("holds no revision"), "{text}");
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
}

#[test]
fn end_run_counts_the_reason_in_utf16_code_units_as_the_spec_does() {
    let fx = granted(&["role.end"]);
    fx.broker.answer("role.revoke", BrokerAnswer::result(json!({"revoked": true})));
    let child = start(&fx, &[]);
    // 250 characters outside the BMP are 500 UTF-16 code units: in bounds; 251 are not.
    let (ok, text) = tool(&fx.run, "end_run", json!({"role": "pm", "reason": "🕴".repeat(250)}));
    assert!(ok, "{text}");
    let (ok, text) = tool(&fx.run, "end_run", json!({"role": "pm", "reason": "🕴".repeat(251)}));
    assert!(!ok && text.starts_with("bad-arguments: end_run"), "{text}");
    assert_eq!(fx.broker.calls_of("role.revoke").len(), 1);
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
}

// Item 12: told once a run.

#[test]
fn a_restarted_runner_does_not_tell_the_previous_runs_note_again() {
    let fx = Fixture::new();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "A")));
    let child = fx.spawn(&[("TEST_MODE", "slop")]);
    wait_until(LIMIT, "m1 marked read", || marked_read(&fx, "m1"));
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
    assert!(sends(&fx)[0]["text"].as_str().unwrap().contains("unslop: 1 reply flagged"));
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m2", "message", "B")));
    let child = fx.spawn(&[]);
    wait_until(LIMIT, "the second reply", || sends(&fx).len() >= 2);
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
    assert_eq!(sends(&fx)[1]["text"], "answered: B", "the note was told again");
    assert!(Path::new(&fx.run.join("state/runner-state.json")).is_file());
}

#[test]
fn a_forged_runner_state_cannot_make_the_runner_skip_a_message() {
    let fx = Fixture::new();
    // What a session with bash could leave for the next runner while the state directory is
    // the default one and confinement is off: m1 recorded as answered.
    std::fs::create_dir(fx.run.join("state")).unwrap();
    let forged = json!({"handled": [{"id": "m1", "digest": "0".repeat(64)}]});
    std::fs::write(fx.run.join("state/runner-state.json"), forged.to_string()).unwrap();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let child = fx.spawn(&[]);
    wait_until(LIMIT, "m1 marked read", || marked_read(&fx, "m1"));
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
    assert_eq!(sends(&fx).len(), 1, "m1 was skipped");
    assert_eq!(sends(&fx)[0]["text"], "answered: Hi");
}

#[test]
fn a_claim_that_got_no_answer_is_released_on_the_way_out() {
    let fx = Fixture::new();
    // The broker reads each claim and hangs up without a reply: it may have taken it.
    fx.broker.answer("role.claim", BrokerAnswer::Silence(Duration::ZERO));
    let output = finish(fx.spawn(&[]), LIMIT);
    assert_eq!(output.status.code(), Some(23), "{}", stderr(&output));
    assert_eq!(fx.broker.calls_of("role.claim").len(), 3);
    assert_eq!(fx.broker.calls_of("role.release").len(), 1, "the unanswered claim is released");
}

/// A fixture whose run.json turns confinement off, for attacks that need the run directory
/// writable by the session.
fn unconfined() -> Fixture {
    Fixture::with_run_json(|run_json| run_json["confine"] = serde_json::json!("off"))
}

/// The CLI's `--version` runs under the supervisor: a CLI that leaves a process holding its
/// stdout cannot hold the runner's start (it was read to its end, the 40 s of the process
/// holding it), and the process is killed by the runner's exit at the latest.
#[test]
fn a_cli_whose_version_leaves_a_process_holding_stdout_does_not_hold_the_start() {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mark = marker("version");
    let fx = Fixture::new();
    let run: Value =
        serde_json::from_slice(&std::fs::read(fx.run.join("run.json")).unwrap()).unwrap();
    let cli = std::path::PathBuf::from(run["cli"].as_str().unwrap());
    std::fs::remove_file(&cli).unwrap();
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o755).open(&cli).unwrap();
    let script =
        format!("#!/bin/sh\necho '{FAKE_CLI_VERSION}'\nsetsid sh -c 'sleep 40; :' {mark} &\n");
    std::io::Write::write_all(&mut file, script.as_bytes()).unwrap();
    drop(file);
    let child = fx.spawn(&[]);
    let claimed = || !fx.broker.calls_of("role.claim").is_empty();
    let waited = std::time::Instant::now();
    while !claimed() && waited.elapsed() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let in_time = claimed();
    terminate(&child);
    let output = finish(child, LIMIT);
    let left = kill_marked(&mark);
    assert!(in_time, "no claim within 8 s: {}", stderr(&output));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(left.is_empty(), "the holder of --version's stdout was left running: {left:?}");
}
