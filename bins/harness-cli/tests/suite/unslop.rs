//! `harness unslop counts LOG`.

use std::process::{Command, Output};

fn harness(args: &[&str]) -> Output {
    #[expect(clippy::disallowed_methods, reason = "the test runs the binary under test")]
    let mut command = Command::new(env!("CARGO_BIN_EXE_harness"));
    command.args(args).env_clear().output().unwrap()
}

#[test]
fn counts_prints_the_log_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("unslop.jsonl");
    let lines = [
        r#"{"ts":"t","event":"checked","reply_chars":3,"reply_start":"abc"}"#,
        r#"{"ts":"t","event":"flagged","reply_chars":5,"reply_start":"delve","findings":[{"id":"delve","source":"s","match":"delve"}]}"#,
        r#"{"ts":"t","event":"notice_injected","ids":["delve"]}"#,
        r#"{"ts":"t","event":"broken_lists","reason":"lists.json: not valid"}"#,
    ];
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let output = harness(&["unslop", "counts", log.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let counts: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        counts,
        serde_json::json!({
            "replies_checked": 2, "replies_flagged": 1, "findings": {"delve": 1}, "notices": 1,
            "skipped_broken": 0, "hook_failures": 0,
            "first_broken_reason": "lists.json: not valid", "unreadable_lines": 0,
        })
    );
}

#[test]
fn usage_and_failures_have_their_exit_codes() {
    assert_eq!(harness(&[]).status.code(), Some(0));
    for args in
        [&["unslop"][..], &["unslop", "counts"], &["bogus"], &["unslop", "counts", "a", "b"]]
    {
        let output = harness(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let err = String::from_utf8_lossy(&output.stderr).to_lowercase();
        assert!(err.contains("usage: harness"), "{output:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let output = harness(&["unslop", "counts", dir.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "a directory is no log: {output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("cannot read the unslop log"),
        "{output:?}"
    );
}
