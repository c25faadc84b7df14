//! Garbage for the hooks' two parsers (issue 8, docs/reliability.md "Garbage in"): the payload on
//! stdin, for all four hooks, and lists.json. Every case exits 0 with nothing on stdout (the reply
//! is never blocked) and logs why: `hook_failed` for a payload, `broken_lists` once per log and
//! `skipped_broken` per reply for a lists file. The panic is `contract.rs`'s
//! `every_outcome_exits_0` (`HARNESS_UNSLOP_PANIC_FOR_TEST`, logged as `hook_failed`).

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use harness_testkit::workspace_root;
use harness_unslop::log::{Event, read_from};

#[expect(clippy::disallowed_methods, reason = "the test runs the binary under test")]
fn run(args: &[&OsStr], log: &Path, stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_harness-unslop"))
        .args(args)
        .env_clear()
        .env("MOSAIC_UNSLOP_LOG", log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A hook that stops reading early is no failure of the test.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "every hook exits 0: {output:?}");
    assert!(output.stdout.is_empty(), "nothing on stdout: {output:?}");
    output
}

fn events(log: &Path) -> Vec<Event> {
    let slice = read_from(log, 0).unwrap();
    assert_eq!(slice.unreadable, 0, "the log holds whole lines only");
    slice.records.into_iter().map(|record| record.event).collect()
}

#[test]
fn garbage_payloads_exit_0_and_log_hook_failed_naming_why() {
    let lists = workspace_root().join("crates/harness-unslop/assets/lists.json");
    let deep = "[".repeat(100_000).into_bytes();
    let oversized = vec![b' '; (64 << 20) + 1];
    // Every hook reads the payload as JSON first.
    #[rustfmt::skip]
    let every: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "the payload is not JSON: EOF while parsing"),
        ("not json", b"delve delve".to_vec(), "the payload is not JSON"),
        ("truncated", br#"{"last_assistant_message": "Let us del"#.to_vec(), "the payload is not JSON: EOF while parsing"),
        ("not UTF-8", b"\xff\xfe".to_vec(), "the payload is not JSON"),
        ("not UTF-8 in a string", b"{\"reply\": \"\xff\"}".to_vec(), "the payload is not JSON: invalid unicode code point"),
        ("a lone surrogate", br#"{"reply": "\ud800"}"#.to_vec(), "the payload is not JSON"),
        ("100k open brackets", deep, "the payload is not JSON: recursion limit"),
        ("over 64 MiB", oversized, "the payload is larger than 67108864 bytes"),
    ];
    // The check hooks also need their reply field as a string.
    #[rustfmt::skip]
    let check_only: Vec<(&str, Vec<u8>, &str)> = vec![
        ("an array", b"[]".to_vec(), "the payload has no string"),
        ("no reply", b"{}".to_vec(), "the payload has no string"),
        ("reply a number", br#"{"reply": 5, "last_assistant_message": 5}"#.to_vec(), "the payload has no string"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for hook in ["claude-stop", "claude-prompt", "pi-agent-end", "pi-before-start"] {
        let checks = matches!(hook, "claude-stop" | "pi-agent-end");
        for (what, stdin, reason) in every.iter().chain(check_only.iter().filter(|_| checks)) {
            let log = dir.path().join(format!("{hook}-{}.jsonl", what.replace(' ', "-")));
            let args = [OsStr::new(hook), OsStr::new("--lists"), lists.as_os_str()];
            let output = run(&args, &log, stdin);
            assert!(output.stderr.is_empty(), "{hook} {what}: {output:?}");
            let events = events(&log);
            let [Event::HookFailed { hook: logged, reason: got }] = events.as_slice() else {
                panic!("{hook} {what}: {events:?}");
            };
            assert_eq!(logged, hook, "{what}");
            assert!(got.contains(reason), "{hook} {what}: expected {reason:?} in {got:?}");
            assert!(got.len() < 1000, "{hook} {what}: the reason is {} bytes", got.len());
        }
    }
}

#[test]
fn a_broken_lists_file_is_logged_once_and_never_blocks_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let entry = |pattern: &str| {
        format!(
            r#"{{"version": 1, "entries": [{{"id": "x", "pattern": "{pattern}", "source": "s"}}]}}"#
        )
    };
    #[rustfmt::skip]
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "EOF while parsing"),
        ("not json", b"delve".to_vec(), "expected value"),
        ("not UTF-8", b"\xff\xfe".to_vec(), "expected value"),
        ("truncated", entry("delve").as_bytes()[..30].to_vec(), "EOF while parsing"),
        ("100k open brackets", "[".repeat(100_000).into_bytes(), "lists.json"),
        ("deep unknown key", format!(r#"{{"version": 1, "x": {}, "entries": []}}"#, "[".repeat(100_000)) .into_bytes(), "lists.json"),
        ("over 1 MiB", vec![b' '; (1 << 20) + 1], "1048576"),
        ("version 2", br#"{"version": 2, "entries": []}"#.to_vec(), "version"),
        ("an unknown key", br#"{"version": 1, "entries": [], "extra": 1}"#.to_vec(), "unknown field `extra`"),
        ("entries an object", br#"{"version": 1, "entries": {}}"#.to_vec(), "invalid type"),
        ("a bad id", entry("delve").replace(r#""x""#, r#""X Y""#).into_bytes(), "X Y"),
        ("a lookahead", entry("a(?=b)").into_bytes(), "lists.json"),
        ("matches the empty string", entry("a*").into_bytes(), "empty"),
        ("a pattern of 2001 bytes", entry(&"a".repeat(2001)).into_bytes(), "2000"),
        ("a pattern not a regex", entry("(").into_bytes(), "lists.json"),
    ];
    let slop =
        br#"{"last_assistant_message": "Let us delve into it.", "reply": "Let us delve into it."}"#;
    for (what, bytes, reason) in &cases {
        let case = dir.path().join(what.replace(' ', "-"));
        std::fs::create_dir(&case).unwrap();
        let lists = case.join("lists.json");
        std::fs::write(&lists, bytes).unwrap();
        let log = case.join("unslop.jsonl");
        for hook in ["claude-stop", "pi-agent-end", "claude-stop"] {
            let output =
                run(&[OsStr::new(hook), OsStr::new("--lists"), lists.as_os_str()], &log, slop);
            assert!(output.stderr.is_empty(), "{what}: {output:?}");
        }
        let events = events(&log);
        let [Event::BrokenLists { reason: broken }, rest @ ..] = events.as_slice() else {
            panic!("{what}: {events:?}");
        };
        assert!(broken.contains(reason), "{what}: expected {reason:?} in {broken:?}");
        assert!(broken.contains("lists.json"), "{what}: the reason names the file: {broken:?}");
        assert!(broken.len() < 2000, "{what}: the reason is {} bytes", broken.len());
        assert_eq!(
            rest.len(),
            3,
            "{what}: broken_lists once, then one skipped_broken per reply: {events:?}"
        );
        assert!(
            rest.iter()
                .all(|event| matches!(event, Event::SkippedBroken { reason } if reason == broken)),
            "{what}: {events:?}"
        );
        // The notice hooks have nothing to say about a reply that went unchecked.
        run(&[OsStr::new("claude-prompt")], &log, b"{}");
        assert_eq!(self::events(&log).len(), 4, "{what}: no notice for an unchecked reply");
    }
    // A lists path that is a directory, or is missing.
    for (what, lists) in
        [("a directory", dir.path().to_path_buf()), ("missing", dir.path().join("none.json"))]
    {
        let log = dir.path().join(format!("{}.jsonl", what.replace(' ', "-")));
        run(&[OsStr::new("claude-stop"), OsStr::new("--lists"), lists.as_os_str()], &log, slop);
        let events = events(&log);
        assert!(
            matches!(events.as_slice(), [Event::BrokenLists { .. }, Event::SkippedBroken { .. }]),
            "{what}: {events:?}"
        );
    }
}

#[test]
fn arguments_that_are_not_utf8_exit_0_with_the_usage() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("unslop.jsonl");
    let bad = OsStr::from_bytes(b"\xff");
    for args in [&[bad][..], &[OsStr::new("claude-stop"), OsStr::new("--lists"), bad, bad]] {
        let output = run(args, &log, b"{}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("usage"), "{output:?}");
    }
    // A lists path that is not UTF-8 is a path like any other: here, a missing one.
    let lists = [dir.path().as_os_str().as_bytes(), b"/\xff.json"].concat();
    run(
        &[OsStr::new("claude-stop"), OsStr::new("--lists"), OsStr::from_bytes(&lists)],
        &log,
        br#"{"last_assistant_message": "hi"}"#,
    );
    let flag = [&b"--lists="[..], &lists].concat();
    run(&[OsStr::new("pi-agent-end"), OsStr::from_bytes(&flag)], &log, br#"{"reply": "hi"}"#);
    let events = events(&log);
    assert!(
        matches!(events.as_slice(), [Event::BrokenLists { reason }, Event::SkippedBroken { .. }, Event::SkippedBroken { .. }] if reason.contains(".json")),
        "{events:?}"
    );
}
