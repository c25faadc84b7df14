//! Garbage for the gate's two parsers (issue 8, docs/reliability.md "Garbage in"): the tool call
//! on stdin, for both modes, and policy.json. Every case blocks with exit 2 and one line naming
//! what was wrong; none panics (a panic would still exit 2, but say "the gate failed"). The panic
//! itself is `contract.rs`'s `a_panic_blocks_with_exit_2`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Output, Stdio};

use super::contract::{Fixture, expect, gate};

/// Asserts a block that is not a panic.
#[track_caller]
fn blocked(output: &Output, what: &str, reason: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("the gate failed"), "{what}: a panic: {stderr}");
    assert!(stderr.len() < 1000, "{what}: {} bytes on stderr: {stderr:.1000}", stderr.len());
    expect(output, 2, reason);
}

#[test]
fn garbage_tool_calls_block_naming_what_was_wrong() {
    let fx = Fixture::new();
    let cwd = fx.root.join("cwd");
    let deep = "[".repeat(100_000).into_bytes();
    let oversized = vec![b' '; (64 << 20) + 1];
    #[rustfmt::skip]
    let check: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "EOF while parsing a value"),
        ("not json", b"not json".to_vec(), "not valid JSON of the expected shape"),
        ("truncated", br#"{"tool":"read","input":{"path":"ins"#.to_vec(), "EOF while parsing"),
        ("not UTF-8", b"\xff\xfe{}".to_vec(), "not valid JSON of the expected shape"),
        ("not UTF-8 in the path", b"{\"tool\":\"read\",\"input\":{\"path\":\"\xff\"}}".to_vec(), "invalid unicode code point"),
        ("100k open brackets", deep.clone(), "not valid JSON of the expected shape"),
        ("deep input", format!(r#"{{"tool":"read","input":{}"#, "[".repeat(100_000)).into_bytes(), "recursion limit"),
        ("over 64 MiB", oversized.clone(), "larger than 67108864 bytes"),
        ("an array", b"[]".to_vec(), "not valid JSON of the expected shape"),
        ("two objects", br#"{"tool":"read","input":{}} {}"#.to_vec(), "trailing characters"),
        ("tool a number", br#"{"tool":5,"input":{}}"#.to_vec(), "invalid type: integer `5`"),
        ("input a string", br#"{"tool":"read","input":"x"}"#.to_vec(), "rule bad-input"),
        ("path a number", br#"{"tool":"read","input":{"path":5}}"#.to_vec(), "rule bad-input"),
        ("path with NUL", br#"{"tool":"read","input":{"path":"a\u0000b"}}"#.to_vec(), "rule bad-path"),
        ("path a lone surrogate", br#"{"tool":"read","input":{"path":"\ud800"}}"#.to_vec(), "unexpected end of hex escape"),
        ("path empty", br#"{"tool":"read","input":{"path":""}}"#.to_vec(), "rule bad-path"),
    ];
    let policy = fx.policy("pi");
    let policy = policy.to_str().unwrap();
    for (what, stdin, reason) in &check {
        blocked(&gate(&["check", "--policy", policy], &cwd, stdin, &[]), what, reason);
    }
    #[rustfmt::skip]
    let hook: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "EOF while parsing a value"),
        ("not json", b"x".to_vec(), "not valid JSON of the expected shape"),
        ("truncated", br#"{"tool_name":"Read","tool_input":{"file_path":"x"}"#.to_vec(), "EOF while parsing an object"),
        ("not UTF-8", b"\xff".to_vec(), "not valid JSON of the expected shape"),
        ("100k open brackets", deep, "not valid JSON of the expected shape"),
        ("over 64 MiB", oversized, "larger than 67108864 bytes"),
        ("tool_name a number", br#"{"tool_name":5,"tool_input":{}}"#.to_vec(), "invalid type: integer `5`"),
        ("no tool_input", br#"{"tool_name":"Read"}"#.to_vec(), "missing field `tool_input`"),
        ("tool_input an array", br#"{"tool_name":"Read","tool_input":[]}"#.to_vec(), "rule bad-input"),
        ("file_path an array", br#"{"tool_name":"Read","tool_input":{"file_path":["a"]}}"#.to_vec(), "rule bad-input"),
    ];
    let policy = fx.policy("claude-code");
    let policy = policy.to_str().unwrap();
    for (what, stdin, reason) in &hook {
        blocked(&gate(&["claude-hook", "--policy", policy], &cwd, stdin, &[]), what, reason);
    }
}

#[test]
fn garbage_policies_block_naming_the_policy() {
    let fx = Fixture::new();
    let cwd = fx.root.join("cwd");
    let ws = fx.root.join("ws");
    let ws = ws.to_str().unwrap();
    let good = format!(r#"{{"harness":"pi","workspace":"{ws}","tools":["read"],"typed":[]}}"#);
    let deep = "[".repeat(100_000);
    #[rustfmt::skip]
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "the policy is not valid: EOF while parsing a value"),
        ("not UTF-8", b"\xff\xfe".to_vec(), "the policy is not valid"),
        ("truncated", good.as_bytes()[..good.len() - 1].to_vec(), "the policy is not valid: EOF while parsing an object"),
        ("100k open brackets", deep.clone().into_bytes(), "the policy is not valid"),
        ("deep extra key", format!(r#"{{"harness":"pi","workspace":"{ws}","tools":[],"typed":[],"x":{deep}}}"#).into_bytes(), "the policy is not valid"),
        ("an array", b"[]".to_vec(), "the policy is not valid"),
        ("tools a string", format!(r#"{{"harness":"pi","workspace":"{ws}","tools":"read","typed":[]}}"#).into_bytes(), "expected a sequence"),
        ("a tool a number", format!(r#"{{"harness":"pi","workspace":"{ws}","tools":[5],"typed":[]}}"#).into_bytes(), "invalid type: integer `5`"),
        ("workspace a number", br#"{"harness":"pi","workspace":5,"tools":[],"typed":[]}"#.to_vec(), "invalid type: integer `5`"),
        ("workspace with NUL", format!(r#"{{"harness":"pi","workspace":"{ws}\u0000x","tools":[],"typed":[]}}"#).into_bytes(), "is not an absolute path"),
        ("workspace not UTF-8", [&br#"{"harness":"pi","workspace":""#[..], ws.as_bytes(), b"\xff\",\"tools\":[],\"typed\":[]}"].concat(), "invalid unicode code point"),
        ("workspace a file", br#"{"harness":"pi","workspace":"/etc/hostname","tools":[],"typed":[]}"#.to_vec(), "cannot be resolved"),
        ("harness twice", format!(r#"{{"harness":"pi","harness":"claude-code","workspace":"{ws}","tools":[],"typed":[]}}"#).into_bytes(), "duplicate field `harness`"),
        ("harness unknown", format!(r#"{{"harness":"vim","workspace":"{ws}","tools":[],"typed":[]}}"#).into_bytes(), "unknown harness"),
    ];
    let call = br#"{"tool":"read","input":{"path":"inside.txt"}}"#;
    for (what, bytes, reason) in &cases {
        let path = fx.root.join("policy-garbage.json");
        std::fs::write(&path, bytes).unwrap();
        blocked(
            &gate(&["check", "--policy", path.to_str().unwrap()], &cwd, call, &[]),
            what,
            reason,
        );
    }
    // Not a file at all.
    let dir = fx.root.to_str().unwrap();
    blocked(
        &gate(&["check", "--policy", dir], &cwd, call, &[]),
        "a directory",
        "cannot read the policy",
    );
    blocked(
        &gate(&["check", "--policy", "/dev/null"], &cwd, call, &[]),
        "/dev/null",
        "the policy is not valid",
    );
    // A policy padded with 20 MiB of an ignored key still works: other keys are ignored.
    let padded = format!(
        r#"{{"harness":"pi","workspace":"{ws}","tools":["read"],"typed":[],"pad":"{}"}}"#,
        "x".repeat(20 << 20)
    );
    let path = fx.write("policy-padded.json", &padded);
    expect(&gate(&["check", "--policy", path.to_str().unwrap()], &cwd, call, &[]), 0, "");
}

#[test]
#[expect(clippy::disallowed_methods, reason = "the test runs the gate binary")]
fn arguments_that_are_not_utf8_block_with_the_usage() {
    let fx = Fixture::new();
    let policy = fx.policy("pi");
    let run = |args: &[&OsStr]| {
        Command::new(env!("CARGO_BIN_EXE_harness-gate"))
            .args(args)
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let bad = OsStr::from_bytes(b"\xff");
    for args in [&[bad][..], &[OsStr::new("check"), OsStr::new("--policy"), bad, bad]] {
        blocked(&run(args), "not UTF-8", "usage: harness-gate");
    }
    // A policy path that is not UTF-8 is a path like any other: here, a missing one.
    let missing = [policy.as_os_str().as_bytes(), b"\xff"].concat();
    let output = run(&[OsStr::new("check"), OsStr::new("--policy"), OsStr::from_bytes(&missing)]);
    blocked(&output, "a policy path not UTF-8", "cannot read the policy");
    let flag = [&b"--policy="[..], &missing].concat();
    blocked(
        &run(&[OsStr::new("check"), OsStr::from_bytes(&flag)]),
        "--policy=",
        "cannot read the policy",
    );
}
