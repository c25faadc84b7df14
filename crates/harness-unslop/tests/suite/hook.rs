//! The hooks as a library call: a payload in, what to print out, and the lines the log gained.

use std::path::{Path, PathBuf};

use harness_unslop::log::read_from;
use harness_unslop::{Hook, HookConfig, NOTICE_HEADING, run_hook};

use super::default_lists_path;

struct Run {
    _dir: tempfile::TempDir,
    log: PathBuf,
}

impl Run {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("unslop.jsonl");
        Self { _dir: dir, log }
    }

    fn hook(&self, hook: Hook, lists: Option<&Path>, payload: &str) -> String {
        let config =
            HookConfig { hook, log: Some(self.log.clone()), lists: lists.map(Path::to_path_buf) };
        let output = run_hook(&config, &mut payload.as_bytes());
        assert_eq!(output.stderr, None);
        output.stdout
    }

    /// Returns the log as `event` names, with the ids of findings or notices in brackets.
    fn events(&self) -> Vec<String> {
        read_from(&self.log, 0)
            .unwrap()
            .records
            .into_iter()
            .map(|record| serde_json::to_value(&record).unwrap())
            .map(|line| {
                let ids: Vec<String> = line["findings"]
                    .as_array()
                    .or(line["ids"].as_array())
                    .map(|items| {
                        items
                            .iter()
                            .map(|item| item["id"].as_str().or(item.as_str()).unwrap().to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                let name = line["event"].as_str().unwrap().to_owned();
                if ids.is_empty() { name } else { format!("{name}[{}]", ids.join(",")) }
            })
            .collect()
    }
}

fn stop(text: &str) -> String {
    serde_json::json!({"session_id": "s", "hook_event_name": "Stop", "last_assistant_message": text}).to_string()
}

#[test]
fn claude_code_stop_then_prompt() {
    let run = Run::new();
    let lists = default_lists_path();
    assert_eq!(run.hook(Hook::ClaudePrompt, None, r#"{"prompt": "hi"}"#), "", "no reply yet");
    assert_eq!(run.hook(Hook::ClaudeStop, Some(&lists), &stop("Let us delve in.")), "");
    let out = run.hook(Hook::ClaudePrompt, None, r#"{"session_id": "s", "prompt": "next"}"#);
    let out: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    let context = out["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(
        context.starts_with(NOTICE_HEADING) && context.contains("\"delve\" (delve)"),
        "{context}"
    );
    assert_eq!(run.hook(Hook::ClaudePrompt, None, "{}"), "", "one notice per flagged reply");
    assert_eq!(run.hook(Hook::ClaudeStop, Some(&lists), &stop("Plain words.")), "");
    assert_eq!(run.hook(Hook::ClaudePrompt, None, "{}"), "");
    assert_eq!(run.events(), ["flagged[delve]", "notice_injected[delve]", "checked"]);
}

#[test]
fn pi_agent_end_then_before_start() {
    let run = Run::new();
    let lists = default_lists_path();
    run.hook(Hook::PiAgentEnd, Some(&lists), r#"{"reply": "I hope this helps!"}"#);
    let notice = run.hook(Hook::PiBeforeStart, None, "{}");
    assert!(notice.starts_with(NOTICE_HEADING), "plain text for Pi: {notice}");
    assert_eq!(run.events(), ["flagged[hope-this-helps]", "notice_injected[hope-this-helps]"]);
}

#[test]
fn a_broken_lists_file_is_logged_once_and_each_reply_skipped() {
    let run = Run::new();
    let broken = run.log.with_file_name("lists.json");
    std::fs::write(&broken, "[]").unwrap();
    for _ in 0..3 {
        assert_eq!(run.hook(Hook::ClaudeStop, Some(&broken), &stop("Let us delve in.")), "");
    }
    run.hook(Hook::PiAgentEnd, None, r#"{"reply": "x"}"#);
    assert_eq!(
        run.events(),
        ["broken_lists", "skipped_broken", "skipped_broken", "skipped_broken", "skipped_broken"]
    );
    assert_eq!(run.hook(Hook::ClaudePrompt, None, "{}"), "", "no verdict, no notice");
}

#[test]
fn failures_are_logged_as_hook_failed() {
    let run = Run::new();
    let lists = default_lists_path();
    run.hook(Hook::ClaudeStop, Some(&lists), "not json");
    run.hook(Hook::ClaudeStop, Some(&lists), r#"{"session_id": "s"}"#);
    run.hook(Hook::PiAgentEnd, Some(&lists), r#"{"reply": 7}"#);
    assert_eq!(run.events(), ["hook_failed", "hook_failed", "hook_failed"]);
    let reasons: Vec<String> = read_from(&run.log, 0)
        .unwrap()
        .records
        .into_iter()
        .map(|record| serde_json::to_value(&record).unwrap()["reason"].as_str().unwrap().to_owned())
        .collect();
    assert!(reasons[0].contains("not JSON"), "{reasons:?}");
    assert!(reasons[1].contains("last_assistant_message"), "{reasons:?}");
    assert!(reasons[2].contains("\"reply\""), "{reasons:?}");
}

#[test]
fn without_a_log_the_hook_only_warns() {
    let config = HookConfig { hook: Hook::ClaudeStop, log: None, lists: None };
    let output = run_hook(&config, &mut &b"{}"[..]);
    assert_eq!(output.stdout, "");
    assert!(output.stderr.unwrap().contains("MOSAIC_UNSLOP_LOG"));
}

#[test]
fn an_unwritable_log_is_said_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let config = HookConfig {
        hook: Hook::ClaudeStop,
        log: Some(dir.path().join("missing-dir/unslop.jsonl")),
        lists: Some(default_lists_path()),
    };
    let output = run_hook(&config, &mut stop("hello").as_bytes());
    assert_eq!(output.stdout, "");
    let stderr = output.stderr.unwrap();
    assert!(stderr.contains("cannot log it"), "{stderr}");
}
