//! The namespaces a child enters before its Landlock domain, seen from inside the child.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_confine::{Mode, Network, SessionPaths, namespace_support, prepare};

fn paths(root: &std::path::Path, network: Network) -> SessionPaths {
    for sub in ["workspace", "run/session", "run/bundle"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    SessionPaths {
        workspace: root.join("workspace"),
        session_dir: root.join("run/session"),
        bundle: root.join("run/bundle"),
        programs: vec!["/bin/sh".into()],
        search_path: Some("/usr/bin:/bin".into()),
        network,
        ..SessionPaths::default()
    }
}

/// Runs `sh -c script` in the sandbox of `paths` under `mode`: its status and stdout.
#[expect(clippy::disallowed_methods, reason = "the test runs a child in the sandbox")]
fn sh(paths: &SessionPaths, mode: Mode, script: &str) -> (bool, String) {
    let domain = Arc::new(prepare(&paths.policy(mode)).unwrap());
    let mut command = Command::new("/bin/sh");
    command.args(["-c", script]).stdout(Stdio::piped()).stderr(Stdio::null());
    domain.attach(&mut command);
    let output = command.output().unwrap();
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
}

fn world() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    (dir, root)
}

#[test]
fn this_machine_lets_a_user_make_every_namespace() {
    let support = namespace_support();
    assert!(support.user && support.pid && support.net && support.ipc, "{support:?}");
}

#[test]
fn proc_lists_only_the_sandbox_and_pid_1_is_out_of_reach() {
    let (_dir, root) = world();
    let paths = paths(&root, Network::Loopback);
    let (ok, out) = sh(
        &paths,
        Mode::Required,
        "echo self=$$; ls /proc | grep -c '^[0-9]'; cat /proc/1/environ > /dev/null 2>&1 && echo environ=read || echo environ=denied",
    );
    assert!(ok, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    // PID 1 keeps the namespace; the shell is PID 2; `ls` and `grep` make 2 more at most.
    assert_eq!(lines[0], "self=2", "{out}");
    let count: usize = lines[1].parse().unwrap();
    assert!(count <= 4, "{out}");
    assert_eq!(lines[2], "environ=denied", "{out}");
    // Without namespaces (confine off) the same child sees the machine's processes.
    let (_, out) = sh(&paths, Mode::Off, "ls /proc | grep -c '^[0-9]'");
    assert!(out.trim().parse::<usize>().unwrap() > 4, "{out}");
}

#[test]
fn a_detached_fork_chain_ends_with_the_child() {
    let (_dir, root) = world();
    let paths = paths(&root, Network::Loopback);
    let mark = root.join("workspace/alive");
    let script = format!(
        "setsid sh -c 'while :; do touch {mark}; sleep 0.05; done' >/dev/null 2>&1 </dev/null & echo started",
        mark = mark.display()
    );
    let (ok, out) = sh(&paths, Mode::Required, &script);
    assert!(ok && out.contains("started"), "{out}");
    // The child has ended: nothing of it touches the mark any more.
    let _ = std::fs::remove_file(&mark);
    std::thread::sleep(Duration::from_millis(400));
    assert!(!mark.exists(), "a process of the sandbox outlived it");
}

#[test]
fn the_network_is_loopback_only() {
    let (_dir, root) = world();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let script = format!(
        "if command -v bash >/dev/null; then bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo tcp=allowed || echo tcp=denied; fi"
    );
    let (_, out) = sh(&paths(&root, Network::Loopback), Mode::Required, &script);
    assert_eq!(out.trim(), "tcp=denied");
    assert!(listener.accept().is_err(), "a connection arrived from the sandbox");
    let (_, out) = sh(&paths(&root, Network::Host), Mode::Required, &script);
    assert_eq!(out.trim(), "tcp=allowed", "the control: the host network reaches it");
    let started = Instant::now();
    while listener.accept().is_err() {
        assert!(started.elapsed() < Duration::from_secs(5), "the control's connection");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
#[expect(clippy::disallowed_methods, reason = "the test runs a child in the sandbox")]
fn the_fresh_proc_does_not_show_up_among_the_machines_mounts() {
    let (_dir, root) = world();
    let paths = paths(&root, Network::Loopback);
    let mounts = || std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().count();
    let before = mounts();
    let domain = Arc::new(prepare(&paths.policy(Mode::Required)).unwrap());
    let mut command = Command::new("/bin/sh");
    command.args(["-c", "grep -c ' /proc ' /proc/self/mountinfo; sleep 1"]);
    command.stdout(Stdio::piped());
    domain.attach(&mut command);
    let child = command.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let during = mounts();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    // Inside: the machine's /proc and the fresh one over it.
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "2");
    assert_eq!(before, during, "a mount of the sandbox propagated to the machine");
}
