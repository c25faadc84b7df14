//! The binary as a hook: it exits 0 whatever happens, prints only the notice, and logs; two
//! hooks appending at once leave whole lines.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use harness_testkit::workspace_root;
use harness_unslop::log::read_from;
use harness_unslop::{NOTICE_HEADING, PANIC_FOR_TEST};

fn lists() -> PathBuf {
    workspace_root().join("crates/harness-unslop/assets/lists.json").into()
}

/// Returns the hook command with an environment of `env` only.
fn hook(args: &[&str], env: &[(&str, &Path)]) -> Command {
    #[expect(clippy::disallowed_methods, reason = "the test runs the binary under test")]
    let mut command = Command::new(env!("CARGO_BIN_EXE_harness-unslop"));
    command.args(args).env_clear();
    for (name, value) in env {
        command.env(name, value);
    }
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

fn run(mut command: Command, stdin: &str) -> Output {
    let mut child = command.spawn().unwrap();
    // A hook that exits before reading its stdin is no test failure.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "every hook exits 0: {output:?}");
    output
}

fn events(log: &Path) -> Vec<&'static str> {
    read_from(log, 0).unwrap().records.iter().map(|record| record.event.name()).collect()
}

const SLOP: &str = r#"{"session_id": "s", "last_assistant_message": "Let us delve into it."}"#;

#[test]
fn every_outcome_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("unslop.jsonl");
    let env: &[(&str, &Path)] = &[("MOSAIC_UNSLOP_LOG", &log)];
    let lists = lists();
    let lists_arg = lists.to_str().unwrap();

    let out = run(hook(&["claude-stop", "--lists", lists_arg], env), SLOP);
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");
    let out = run(hook(&["claude-prompt"], env), "{}");
    let stdout: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let context = stdout["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(context.starts_with(NOTICE_HEADING));

    let env_lists: &[(&str, &Path)] =
        &[("MOSAIC_UNSLOP_LOG", &log), ("MOSAIC_UNSLOP_LISTS", &lists)];
    run(hook(&["pi-agent-end"], env_lists), r#"{"reply": "I hope this helps."}"#);
    let out = run(hook(&["pi-before-start"], env), "{}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(NOTICE_HEADING));

    // Bad JSON, a missing field, a panic: logged, exit 0, nothing on stdout.
    assert!(run(hook(&["claude-stop", "--lists", lists_arg], env), "{").stdout.is_empty());
    assert!(run(hook(&["claude-stop", "--lists", lists_arg], env), "{}").stdout.is_empty());
    let panicking: &[(&str, &Path)] =
        &[("MOSAIC_UNSLOP_LOG", &log), (PANIC_FOR_TEST, Path::new("1"))];
    assert!(run(hook(&["claude-stop"], panicking), SLOP).stdout.is_empty());
    assert_eq!(
        events(&log),
        [
            "flagged",
            "notice_injected",
            "flagged",
            "notice_injected",
            "hook_failed",
            "hook_failed",
            "hook_failed"
        ]
    );
    let last = read_from(&log, 0).unwrap().records.pop().unwrap();
    assert!(serde_json::to_string(&last).unwrap().contains("panicked"), "{last:?}");

    // No log, bad arguments, an unwritable log: said on stderr, exit 0.
    let out = run(hook(&["claude-stop"], &[]), SLOP);
    assert!(String::from_utf8_lossy(&out.stderr).contains("MOSAIC_UNSLOP_LOG"), "{out:?}");
    let out = run(hook(&["nonsense"], env), SLOP);
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage"), "{out:?}");
    let out = run(hook(&["claude-stop", "--lists"], env), SLOP);
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage"), "{out:?}");
    let nowhere = dir.path().join("no-dir/unslop.jsonl");
    let out =
        run(hook(&["claude-stop", "--lists", lists_arg], &[("MOSAIC_UNSLOP_LOG", &nowhere)]), SLOP);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot log it"), "{out:?}");
    assert_eq!(events(&log).len(), 7, "the failures with no log to write to added nothing");
}

#[test]
fn concurrent_hook_processes_append_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("unslop.jsonl");
    let lists = lists();
    let reply = "Let us delve into it. ".repeat(3000);
    let payload = serde_json::json!({"last_assistant_message": reply}).to_string();
    const PROCESSES: usize = 16;
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            let mut child = hook(
                &["claude-stop", "--lists", lists.to_str().unwrap()],
                &[("MOSAIC_UNSLOP_LOG", &log)],
            )
            .spawn()
            .unwrap();
            child.stdin.take().unwrap().write_all(payload.as_bytes()).unwrap();
            child
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
    }
    let slice = read_from(&log, 0).unwrap();
    assert_eq!(slice.unreadable, 0);
    assert_eq!(slice.records.len(), PROCESSES);
    assert!(slice.records.iter().all(|record| record.event.name() == "flagged"));
}
