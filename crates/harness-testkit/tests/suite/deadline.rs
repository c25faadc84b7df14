//! `run_with_deadline`: output is collected, and a child that hangs (or leaves a helper holding its
//! output open) is killed with its whole process group instead of hanging the test.

use std::io::ErrorKind;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness_testkit::run_with_deadline;

fn sh(script: &str) -> Command {
    #[expect(clippy::disallowed_methods, reason = "the test drives /bin/sh directly")]
    let mut command = Command::new("/bin/sh");
    command.env_clear().args(["-c", script]).stdin(Stdio::null());
    command
}

#[test]
fn output_and_status_are_collected() {
    let output = run_with_deadline(
        sh("printf out; printf err >&2; head -c 200000 /dev/zero | tr '\\0' x >&2; exit 3"),
        Duration::from_secs(20),
    )
    .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(output.stdout, "out");
    // More than a pipe buffer on stderr proves the pipes are drained while the child runs.
    assert!(output.stderr.starts_with("err"));
    assert_eq!(output.stderr.len(), 3 + 200_000);
}

#[test]
fn a_hung_child_is_killed_with_its_group_and_its_stderr_reported() {
    let started = Instant::now();
    let error = run_with_deadline(
        sh("sleep 30 & echo \"helper=$!\" >&2; sleep 30; wait"),
        Duration::from_millis(500),
    )
    .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert_eq!(error.kind(), ErrorKind::TimedOut);
    let message = error.to_string();
    assert!(message.contains("did not exit before its deadline"), "{message}");
    // The last `helper=` is the child's stderr; the first is the script in the command line.
    let helper = message.rsplit("helper=").next().unwrap().split_whitespace().next().unwrap();
    assert_gone(helper.parse().unwrap());
}

/// Asserts that process `pid` is gone or a zombie within two seconds (a container's init may be
/// slow to reap orphans, and a zombie no longer runs).
fn assert_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next()))
            .flatten();
        if matches!(state, None | Some('Z')) {
            return;
        }
        assert!(Instant::now() < deadline, "the helper {pid} survived in state {state:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_helper_that_keeps_the_output_open_is_killed_too() {
    let started = Instant::now();
    let error = run_with_deadline(sh("sleep 30 & echo \"helper=$!\""), Duration::from_millis(500))
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert_eq!(error.kind(), ErrorKind::TimedOut);
    let message = error.to_string();
    assert!(message.contains("kept its output open"), "{message}");
    let helper = message.rsplit("helper=").next().unwrap().split_whitespace().next().unwrap();
    assert_gone(helper.parse().unwrap());
}
