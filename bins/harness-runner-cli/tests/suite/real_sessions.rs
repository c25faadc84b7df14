//! Whole sessions through harness-runner with the real Pi 0.85.1 and Claude Code 2.1.296
//! (issue 7, item 4): five messages, each a turn of one continued conversation:
//! 1. a typed tool call (list_tasks) answered by the scripted broker through the tool socket;
//! 2. a read of the secret beside the workspace, blocked by the gate;
//! 3. a reply full of slop, flagged by the unslop check: its RESULT ends with the unslop note;
//! 4. the next turn, whose request carries the correction notice;
//! 5. a turn whose model call fails, reported to the sender;
//!
//! Then SIGTERM: the role released, exit 0, nothing left running.

use std::process::Child;
use std::time::{Duration, Instant};

use harness_testkit::{
    Cli, SESSION_CAP, SESSION_SECRET, SESSION_SLOP, SessionScenario, require_cli, workspace_binary,
};

const LIMIT: Duration = Duration::from_secs(240);

fn wait_for(child: &mut Child, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if let Some(status) = child.try_wait().unwrap() {
            let output = std::mem::replace(child, spawn_placeholder()).wait_with_output();
            panic!("the runner exited ({status}) before {what}: {output:?}");
        }
        assert!(start.elapsed() < LIMIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[expect(clippy::disallowed_methods, reason = "a placeholder child to move the real one out")]
fn spawn_placeholder() -> Child {
    std::process::Command::new("/bin/true").spawn().unwrap()
}

fn session(cli: Cli) {
    let Some(paths) = require_cli(cli) else { return };
    let runner = std::path::PathBuf::from(env!("CARGO_BIN_EXE_harness-runner"));
    let gate = workspace_binary("harness-gate");
    let _ = (workspace_binary("harness-mcp"), workspace_binary("harness-unslop"));
    let s = SessionScenario::new(&paths, gate.parent().unwrap()).unwrap();
    s.script_standard();
    let mut child = s.spawn_runner(&runner).unwrap();
    wait_for(&mut child, "five RESULTs", || s.broker().calls_of("message.send").len() >= 5);
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(20), "the runner did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(s.broker().calls_of("role.release").len(), 1, "the role is released");

    let results: Vec<String> = s
        .broker()
        .calls_of("message.send")
        .iter()
        .map(|call| call.args["text"].as_str().unwrap().to_owned())
        .collect();
    let turn_stderr = |n: u32| {
        std::fs::read_to_string(s.run_dir().join(format!("turns/{n:04}.stderr")))
            .unwrap_or_default()
    };
    assert_eq!(
        results[0],
        "Two tasks are open: web-1 and web-2.",
        "turn 1 stderr: {}",
        turn_stderr(1)
    );
    assert_eq!(results[1], "I cannot read files outside my workspace.", "{}", turn_stderr(2));
    // The RESULT after the turn that flagged the reply (its own) names it; the next does not again.
    assert!(
        results[2].starts_with(&format!("{SESSION_SLOP}\n\nunslop: 1 reply flagged: reply 3 ")),
        "{:?}",
        results[2]
    );
    assert!(results[2].ends_with("(delve, tapestry, testament)"), "{:?}", results[2]);
    assert_eq!(results[3], "Noted.", "{}", turn_stderr(4));
    assert!(
        results[4].starts_with("The turn failed: the adapter exited with status 1"),
        "{:?}",
        results[4]
    );

    // 1: the typed tool call went MCP or extension -> tool socket -> broker, with the runner's cap.
    let tasks = s.broker().calls_of("tasks");
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0].cap, SESSION_CAP);
    assert_eq!(tasks[0].args["done"], false);
    let calls = s.model().messages_calls();
    let tool_result = |id: &str| {
        calls.iter().flat_map(|call| call.tool_results()).find(|result| result.tool_use_id == id)
    };
    let listed = tool_result("toolu_tasks").expect("the list_tasks result reached the model");
    assert!(!listed.is_error && listed.text.contains("web-2"), "{listed:?}");
    // 2: the gate blocked the read, and the secret never reached the model.
    let blocked = tool_result("toolu_secret").expect("the blocked read's result");
    assert!(blocked.is_error && blocked.text.contains("harness-gate: blocked"), "{blocked:?}");
    for call in &calls {
        assert!(!call.raw_body.contains(SESSION_SECRET), "the secret reached the model");
        assert!(!call.raw_body.contains(SESSION_CAP), "the capability reached the model");
    }
    // The conversation continued: a later turn's request carries an earlier answer.
    let last = calls.last().unwrap();
    assert!(last.all_text().contains("Two tasks are open"), "not continued: {}", last.all_text());
    // 4: the turn after the flagged reply got the correction notice.
    let noticed = calls
        .iter()
        .any(|call| call.all_text().contains("Correction notice from the unslop check"));
    assert!(noticed, "no request carried the correction notice");
    let log = std::fs::read_to_string(s.run_dir().join("unslop.jsonl")).unwrap();
    assert!(
        log.contains("\"event\":\"flagged\"") && log.contains("\"event\":\"notice_injected\""),
        "{log}"
    );
    // The state block headed every request.
    let request = std::fs::read_to_string(s.run_dir().join("turns/0001.request")).unwrap();
    assert!(request.starts_with("Current state, read at "), "{request}");
    // Nothing the session started is left running.
    let run = s.run_dir().display().to_string();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let needle = format!("MOSAIC_RUN={run}");
        assert!(
            !environ.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "process {:?} of the session is still running",
            entry.file_name()
        );
    }
}

#[test]
fn a_pi_session_through_the_runner() {
    session(Cli::Pi);
}

#[test]
fn a_claude_code_session_through_the_runner() {
    session(Cli::Claude);
}
