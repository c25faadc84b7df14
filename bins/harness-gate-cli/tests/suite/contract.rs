//! docs/contracts.md, contract 1: exit 0 allows; exit 2 blocks with a one-line reason on stderr; every
//! error, a panic included, exits 2.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    pub(crate) root: PathBuf,
}

impl Fixture {
    /// `root/ws/inside.txt`, `root/ws/y -> ../secret`, `root/secret`, and a directory `root/cwd`
    /// whose `inside.txt` is a link to the secret and whose `y` is a plain file.
    pub(crate) fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws")).unwrap();
        std::fs::create_dir_all(root.join("cwd")).unwrap();
        std::fs::write(root.join("ws/inside.txt"), "in").unwrap();
        std::fs::write(root.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink("../secret", root.join("ws/y")).unwrap();
        std::os::unix::fs::symlink("../secret", root.join("cwd/inside.txt")).unwrap();
        std::fs::write(root.join("cwd/y"), "plain").unwrap();
        Fixture { _dir: dir, root }
    }

    pub(crate) fn policy(&self, harness: &str) -> PathBuf {
        let path = self.root.join(format!("policy-{harness}.json"));
        let tools = if harness == "pi" { r#"["read","write"]"# } else { r#"["Read","Write"]"# };
        let text = format!(
            r#"{{"harness":"{harness}","workspace":"{}","tools":{tools},"typed":["list_tasks"],"network":"none","extra":{{"ignored":true}}}}"#,
            self.root.join("ws").display()
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.root.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

#[expect(clippy::disallowed_methods, reason = "the test runs the gate binary")]
pub(crate) fn gate(args: &[&str], cwd: &Path, stdin: &[u8], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_harness-gate"))
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("HOME", cwd)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    feed(&mut child, stdin);
    child.wait_with_output().unwrap()
}

/// Writes the call to the gate's stdin. The gate may exit before reading it (bad arguments, a
/// panic), so a broken pipe is expected there; any other write error fails the test.
fn feed(child: &mut std::process::Child, stdin: &[u8]) {
    let mut pipe = child.stdin.take().unwrap();
    match pipe.write_all(stdin) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(error) => panic!("writing the gate's stdin: {error}"),
    }
}

/// Asserts the exit code, and for a block a single line on stderr naming `reason`.
#[track_caller]
pub(crate) fn expect(output: &Output, code: i32, reason: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "stderr: {stderr}");
    assert!(output.stdout.is_empty(), "stdout must stay empty: {:?}", output.stdout);
    if code == 0 {
        assert!(stderr.is_empty(), "an allow prints nothing: {stderr}");
    } else {
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.starts_with("harness-gate: blocked: "), "{stderr}");
        assert!(stderr.contains(reason), "expected {reason:?} in {stderr}");
    }
}

fn check_call(fx: &Fixture, harness: &str, call: &str) -> Output {
    let policy = fx.policy(harness);
    let mode = if harness == "pi" { "check" } else { "claude-hook" };
    gate(&[mode, "--policy", policy.to_str().unwrap()], &fx.root.join("cwd"), call.as_bytes(), &[])
}

#[test]
fn check_allows_inside_and_blocks_outside() {
    let fx = Fixture::new();
    let ws = fx.root.join("ws");
    let inside = format!(r#"{{"tool":"read","input":{{"path":"{}/inside.txt"}}}}"#, ws.display());
    expect(&check_call(&fx, "pi", &inside), 0, "");
    let outside = r#"{"tool":"read","input":{"path":"/etc/hostname"}}"#;
    expect(&check_call(&fx, "pi", outside), 2, "rule outside-workspace");
    expect(&check_call(&fx, "pi", r#"{"tool":"list_tasks","input":{}}"#), 0, "");
    expect(&check_call(&fx, "pi", r#"{"tool":"bash","input":{}}"#), 2, "rule tool-not-allowed");
}

#[test]
fn claude_hook_reads_the_real_pretooluse_payload() {
    let fx = Fixture::new();
    let ws = fx.root.join("ws");
    let payload = |path: &str| {
        format!(
            r#"{{"session_id":"1111","transcript_path":"/x.jsonl","cwd":"{}","prompt_id":"b","permission_mode":"dontAsk","effort":{{"level":"medium"}},"hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{{"file_path":"{path}"}},"tool_use_id":"toolu_6828"}}"#,
            ws.display()
        )
    };
    expect(
        &check_call(&fx, "claude-code", &payload(&format!("{}/inside.txt", ws.display()))),
        0,
        "",
    );
    expect(&check_call(&fx, "claude-code", &payload("/etc/passwd")), 2, "/etc/passwd");
    let mcp = r#"{"hook_event_name":"PreToolUse","tool_name":"mcp__mosaic__list_tasks","tool_input":{},"mcp_server":{"name":"mosaic","source":"dynamic"}}"#;
    expect(&check_call(&fx, "claude-code", mcp), 0, "");
}

#[test]
fn relative_paths_resolve_against_the_policy_workspace_not_the_gates_cwd() {
    let fx = Fixture::new();
    // In the gate's cwd, inside.txt leads out and y is plain; in the workspace it is the reverse.
    expect(&check_call(&fx, "pi", r#"{"tool":"read","input":{"path":"inside.txt"}}"#), 0, "");
    expect(
        &check_call(&fx, "pi", r#"{"tool":"read","input":{"path":"y"}}"#),
        2,
        "outside-workspace",
    );
    let hook = r#"{"tool_name":"Read","tool_input":{"file_path":"y"}}"#;
    expect(&check_call(&fx, "claude-code", hook), 2, "outside-workspace");
}

#[test]
fn every_bad_input_blocks() {
    let fx = Fixture::new();
    let cwd = fx.root.join("cwd");
    let good_call = br#"{"tool":"read","input":{"path":"inside.txt"}}"#;
    let policy = fx.policy("pi");
    let policy = policy.to_str().unwrap();
    for stdin in [
        &b""[..],
        b"not json",
        b"{\"tool\":\"read\"}",
        b"{\"tool\":\"read\",\"input\":{\"path\":\"\\ud800\"}}",
        b"\xff\xfe{}",
        b"{\"tool\":\"read\",\"input\":{\"path\":\"inside.txt\"}",
        b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    ] {
        expect(&gate(&["check", "--policy", policy], &cwd, stdin, &[]), 2, "rule ");
    }
    let deep = "[".repeat(100_000);
    expect(&gate(&["check", "--policy", policy], &cwd, deep.as_bytes(), &[]), 2, "rule gate-error");
    for args in [
        &[][..],
        &["check"][..],
        &["check", "--policy"][..],
        &["judge", "--policy", policy][..],
        &["check", "--policy", policy, "extra"][..],
        // `--help` and `--version` answer only alone: beside a command they are a usage error,
        // and a call is never allowed because one of them is there.
        &["--help", "check", "--policy", policy][..],
        &["check", "--policy", policy, "--version"][..],
        &["check", "--policy", policy, "--help"][..],
        &["--version", "claude-hook", "--policy", policy][..],
    ] {
        expect(&gate(args, &cwd, good_call, &[]), 2, "usage: harness-gate");
    }
    // `--help` where the policy path goes is a path like any other: no such policy, blocked.
    expect(
        &gate(&["check", "--policy", "--help"], &cwd, good_call, &[]),
        2,
        "cannot read the policy",
    );
    let missing = fx.root.join("missing.json");
    let bad_policies = [
        (missing.clone(), "cannot read the policy"),
        (fx.write("p1.json", "{"), "not valid"),
        (
            fx.write("p2.json", r#"{"harness":"vim","workspace":"/","tools":[],"typed":[]}"#),
            "unknown harness",
        ),
        (
            fx.write("p3.json", r#"{"harness":"pi","workspace":"ws","tools":[],"typed":[]}"#),
            "not an absolute path",
        ),
        (
            fx.write(
                "p4.json",
                r#"{"harness":"pi","workspace":"/nonexistent/ws","tools":[],"typed":[]}"#,
            ),
            "cannot be resolved",
        ),
        (
            fx.write("p6.json", r#"{"harness":"pi","workspace":"/tmp/..","tools":[],"typed":[]}"#),
            "would confine nothing",
        ),
        (fx.write("p5.json", r#"{"harness":"pi","workspace":"/","tools":["read"]}"#), "typed"),
    ];
    for (path, reason) in bad_policies {
        expect(
            &gate(&["check", "--policy", path.to_str().unwrap()], &cwd, good_call, &[]),
            2,
            reason,
        );
    }
}

#[test]
fn a_panic_blocks_with_exit_2() {
    let fx = Fixture::new();
    let policy = fx.policy("pi");
    let output = gate(
        &["check", "--policy", policy.to_str().unwrap()],
        &fx.root.join("cwd"),
        br#"{"tool":"read","input":{"path":"inside.txt"}}"#,
        &[("HARNESS_GATE_PANIC_FOR_TEST", "1")],
    );
    expect(&output, 2, "the gate failed");
}

#[test]
fn a_missing_home_refuses_tilde_but_nothing_else() {
    let fx = Fixture::new();
    let policy = fx.policy("pi");
    let policy = policy.to_str().unwrap();
    let cwd = fx.root.join("cwd");
    #[expect(clippy::disallowed_methods, reason = "the test runs the gate binary")]
    let run = |call: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_harness-gate"))
            .args(["check", "--policy", policy])
            .current_dir(&cwd)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        feed(&mut child, call.as_bytes());
        child.wait_with_output().unwrap()
    };
    expect(&run(r#"{"tool":"read","input":{"path":"~/x"}}"#), 2, "HOME is not set");
    expect(&run(r#"{"tool":"read","input":{"path":"inside.txt"}}"#), 0, "");
}
