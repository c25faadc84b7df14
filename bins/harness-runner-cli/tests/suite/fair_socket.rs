//! The tool socket stays fair against the session's own clients (issue 20): with bash the model
//! can open as many connections to `RUN/tools.sock` as it likes, send lines that never end, or
//! connect and say nothing. The runner must keep its memory bounded and keep answering the
//! calls of another client (the CLI's MCP server or extension) all the same.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use harness_testkit::BrokerAnswer;
use serde_json::{Value, json};

use super::fixture::{Fixture, finish, start, terminate};

const LIMIT: Duration = Duration::from_secs(30);
/// The connections the socket serves at once (docs/protocol.md, section 2).
const CLIENTS: usize = 256;

/// A field of `/proc/PID/status`, in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap()
}

fn read_spec_fixture() -> Fixture {
    let fx = Fixture::new();
    fx.broker.answer("spec.read", BrokerAnswer::result(json!({"text": "north star"})));
    fx
}

/// A call of another client, timed: the reply's `ok` and `text`, or what went wrong.
fn timed_call(fx: &Fixture) -> (bool, String, Duration) {
    let started = Instant::now();
    let exchange = || -> std::io::Result<(bool, String)> {
        let mut stream = UnixStream::connect(fx.run.join("tools.sock"))?;
        stream.set_read_timeout(Some(LIMIT))?;
        let request = json!({"tool": "read_spec", "args": {"project": "web"}});
        stream.write_all(format!("{request}\n").as_bytes())?;
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line)?;
        let reply: Value = serde_json::from_str(&line).map_err(std::io::Error::other)?;
        Ok((reply["ok"] == true, reply["text"].as_str().unwrap_or_default().to_owned()))
    };
    let (ok, text) = exchange().unwrap_or_else(|error| (false, format!("no reply: {error}")));
    (ok, text, started.elapsed())
}

/// 256 clients each write 1 MiB with no newline, all at once: the runner's peak resident memory
/// stays under 64 MiB, and a call from another client in the middle of it is answered within 1 s.
#[test]
fn a_flood_of_unfinished_one_mib_lines_keeps_the_runner_under_64_mib_and_serving() {
    let fx = read_spec_fixture();
    let child = start(&fx, &[]);
    let pid = child.id();
    let socket: PathBuf = fx.run.join("tools.sock");
    let barrier = Arc::new(Barrier::new(CLIENTS + 1));
    let flood: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (socket, barrier) = (socket.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut stream = UnixStream::connect(&socket).unwrap();
                stream.set_write_timeout(Some(LIMIT)).unwrap();
                barrier.wait();
                // The runner may close the connection before the whole MiB is in: its answer.
                let _ = stream.write_all(&vec![b'x'; 1024 * 1024]);
                stream
            })
        })
        .collect();
    barrier.wait();
    std::thread::sleep(Duration::from_millis(500));
    let (ok, text, took) = timed_call(&fx);
    let streams: Vec<UnixStream> = flood.into_iter().map(|thread| thread.join().unwrap()).collect();
    let peak = status_kib(pid, "VmHWM");
    let after = status_kib(pid, "VmRSS");
    drop(streams);
    eprintln!("the flood: peak VmHWM {peak} KiB, VmRSS {after} KiB after it; the call {took:?}");
    assert!(peak < 64 * 1024, "the runner's peak resident memory was {peak} KiB");
    assert!(ok, "{text}");
    assert_eq!(text, r#"{"text":"north star"}"#);
    assert!(took < Duration::from_secs(1), "the call took {took:?}");
    let (ok, text, _) = timed_call(&fx);
    assert!(ok, "after the flood: {text}");
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
}

/// 256 clients connect and say nothing (half of them start a line and stop): calls from another
/// client are still answered, each within 1 s, while they stay connected.
#[test]
fn two_hundred_fifty_six_idle_or_slow_clients_never_keep_another_clients_call_out() {
    let fx = read_spec_fixture();
    let child = start(&fx, &[]);
    let socket = fx.run.join("tools.sock");
    let idle: Vec<UnixStream> = (0..CLIENTS)
        .map(|client| {
            let mut stream = UnixStream::connect(&socket).unwrap();
            if client % 2 == 1 {
                stream.write_all(br#"{"tool": "read_spec", "args": {"#).unwrap();
            }
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    for call in 0..5 {
        let (ok, text, took) = timed_call(&fx);
        assert!(ok, "call {call}: {text}");
        assert!(took < Duration::from_secs(1), "call {call} took {took:?}");
    }
    assert_eq!(fx.broker.calls_of("spec.read").len(), 5);
    drop(idle);
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
}
