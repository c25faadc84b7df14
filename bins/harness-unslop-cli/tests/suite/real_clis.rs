//! The unslop check inside the real CLIs (issue 5, item 7): Claude Code 2.1.296 with the Stop and
//! UserPromptSubmit hooks in a settings.json written by serde_json, run as two `-p` invocations
//! of one session (`--session-id`, then `--resume`); Pi 0.85.1 with
//! `crates/harness-adapters/assets/pi/unslop-extension.mjs` by `-e`, one session continued across two runs.
//!
//! For each: a reply with slop is logged `flagged` and the model's next request carries the
//! correction notice; a clean reply is logged `checked` and nothing is injected; a broken
//! lists.json logs `broken_lists` once, `skipped_broken` per reply, and the session runs on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use harness_testkit::{
    Cli, CliOutput, CliPaths, CliSandbox, PI_MODEL_ARG, Reply, ScriptedModel, require_cli,
    run_with_deadline, workspace_root,
};
use harness_unslop::log::{Event, read_from};
use harness_unslop::{NOTICE_HEADING, ResultNotes, unslop_counts};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(60);
const SESSION: &str = "5a1e0c2d-3b4f-4e6a-9c8d-7f0e1d2c3b4a";
const SYSTEM_PROMPT: &str = "You are the unslop scenario's agent.";
const SLOP: &str = "Certainly! Let us delve into the rich tapestry of the runner.";
const CLEAN: &str = "The runner starts one turn per message and sends its output back.";
const CLEAN_TOO: &str = "Both turns ran; the log has a line for each reply.";

fn unslop_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_harness-unslop"))
}

/// Which lists.json the session gets.
enum ListsFile {
    /// The shipped default list.
    Default,
    /// A file that is not JSON.
    Broken,
}

/// One CLI session with the unslop check wired in as the bundle wires it.
struct Session {
    cli: Cli,
    paths: CliPaths,
    model: ScriptedModel,
    sandbox: CliSandbox,
    log: PathBuf,
    lists: PathBuf,
}

impl Session {
    fn start(cli: Cli, paths: CliPaths, lists: ListsFile, replies: Vec<Reply>) -> Self {
        let model = ScriptedModel::start(replies.into()).unwrap();
        let sandbox = CliSandbox::new(&model).unwrap();
        let log = sandbox.root().join("run/unslop.jsonl");
        std::fs::create_dir(log.parent().unwrap()).unwrap();
        let lists = match lists {
            ListsFile::Default => workspace_root().join("crates/harness-unslop/assets/lists.json"),
            ListsFile::Broken => {
                let path = sandbox.root().join("lists.json");
                std::fs::write(&path, "{\"version\": 1, \"entries\": [").unwrap();
                harness_testkit::utf8(path).unwrap()
            }
        };
        let session = Self { cli, paths, model, sandbox, log, lists: lists.into() };
        if cli == Cli::Claude {
            session.write_claude_settings();
        }
        session
    }

    fn settings_path(&self) -> PathBuf {
        self.sandbox.root().join("settings.json")
    }

    /// Writes settings.json with a serializer (Claude Code ignores an invalid file silently).
    /// Each hook command ends `; exit 0`, so a hook that cannot even start never blocks.
    fn write_claude_settings(&self) {
        let bin = shell_quote(unslop_binary());
        let stop = format!("{bin} claude-stop --lists {}; exit 0", shell_quote(&self.lists));
        let prompt = format!("{bin} claude-prompt; exit 0");
        let settings = json!({"hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": stop, "timeout": 30}]}],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": prompt, "timeout": 30}]}],
        }});
        std::fs::write(self.settings_path(), serde_json::to_string_pretty(&settings).unwrap())
            .unwrap();
    }

    /// Runs turn `number` (from 1) of the session with `prompt`.
    fn turn(&self, number: usize, prompt: &str) -> CliOutput {
        let mut command = self.sandbox.command(&self.paths);
        command.env("MOSAIC_UNSLOP_LOG", &self.log);
        match self.cli {
            Cli::Claude => {
                command.args(["-p", prompt, "--output-format", "json", "--disable-slash-commands"]);
                command.args(["--tools", "", "--permission-mode", "dontAsk"]);
                command.arg("--settings").arg(self.settings_path());
                command.args(["--system-prompt", SYSTEM_PROMPT]);
                let session_flag = if number == 1 { "--session-id" } else { "--resume" };
                command.args([session_flag, SESSION]);
            }
            Cli::Pi => {
                let extension =
                    workspace_root().join("crates/harness-adapters/assets/pi/unslop-extension.mjs");
                command
                    .env("MOSAIC_UNSLOP_BIN", unslop_binary())
                    .env("MOSAIC_UNSLOP_LISTS", &self.lists);
                command.args(["-p", "--model", PI_MODEL_ARG, "--thinking", "off", "--no-skills"]);
                command.args(["--no-extensions", "--no-context-files", "--no-prompt-templates"]);
                command.args(["--no-themes", "-e"]).arg(extension);
                command.args(["--tools", "read", "--system-prompt", SYSTEM_PROMPT]);
                command.arg("--session-dir").arg(self.sandbox.root().join("pi-sessions"));
                command.args(["--session-id", SESSION]);
                command.arg(prompt);
            }
        }
        let output = run_with_deadline(command, DEADLINE).unwrap();
        output.assert_success();
        output
    }

    /// Runs two turns and checks each printed its scripted reply.
    fn two_turns(&self, first: &str, second: &str) {
        let output = self.turn(1, "First task");
        self.assert_answer(&output, first);
        let output = self.turn(2, "Second task");
        self.assert_answer(&output, second);
        self.model.assert_finished();
    }

    fn assert_answer(&self, output: &CliOutput, expected: &str) {
        let answer = match self.cli {
            Cli::Claude => {
                let result: serde_json::Value = serde_json::from_str(&output.stdout).unwrap();
                result["result"].as_str().unwrap_or_default().to_owned()
            }
            Cli::Pi => output.stdout.trim_end().to_owned(),
        };
        assert_eq!(answer, expected, "{output}");
    }

    /// Returns the log's event names, in order.
    fn events(&self) -> Vec<Event> {
        let slice = read_from(&self.log, 0).unwrap();
        assert_eq!(slice.unreadable, 0, "every log line parses");
        slice.records.into_iter().map(|record| record.event).collect()
    }

    fn event_names(&self) -> Vec<&'static str> {
        self.events().iter().map(Event::name).collect()
    }

    /// Returns every text of the request numbered `n` (from 1).
    fn request_text(&self, n: usize) -> String {
        let calls = self.model.messages_calls();
        assert!(calls.len() >= n, "expected at least {n} requests: {calls:#?}");
        calls[n - 1].all_text()
    }
}

/// Quotes `path` for `/bin/sh`.
fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

fn slop_then_notice(cli: Cli) {
    let Some(paths) = require_cli(cli) else { return };
    let replies = vec![Reply::text(SLOP), Reply::text(CLEAN)];
    let session = Session::start(cli, paths, ListsFile::Default, replies);
    session.two_turns(SLOP, CLEAN);

    assert_eq!(session.event_names(), ["flagged", "notice_injected", "checked"]);
    let events = session.events();
    let Event::Flagged { findings, .. } = &events[0] else { unreachable!() };
    let ids: Vec<&str> = findings.iter().map(|finding| finding.id.as_str()).collect();
    for id in ["delve", "rich-heritage", "certainly"] {
        assert!(ids.contains(&id), "{id} among {ids:?}");
    }
    assert!(findings.iter().all(|finding| !finding.source.is_empty()));
    let Event::NoticeInjected { ids: noticed } = &events[1] else { unreachable!() };
    assert_eq!(noticed.iter().map(String::as_str).collect::<Vec<_>>(), ids);

    let first = session.request_text(1);
    assert!(!first.contains(NOTICE_HEADING), "no notice before any reply: {first}");
    let second = session.request_text(2);
    assert!(second.contains(NOTICE_HEADING), "the notice reaches the model: {second}");
    assert!(second.contains("\"delve\" (delve)"), "{second}");

    // What the runner makes of the log the real hooks wrote: the note and the counts.
    let mut notes = ResultNotes::new(&session.log);
    notes.gather();
    let result = notes.compose(CLEAN);
    let note = result.note();
    assert!(
        note.starts_with("unslop: 1 reply flagged: reply 1 \"Certainly! Let us delve"),
        "{note}"
    );
    assert_eq!(result.text(), format!("{CLEAN}\n\n{note}"));
    let counts = unslop_counts(&session.log).unwrap();
    assert_eq!((counts.replies_checked, counts.replies_flagged, counts.notices), (2, 1, 1));
    assert_eq!(counts.findings.get("delve"), Some(&1));
}

fn clean_injects_nothing(cli: Cli) {
    let Some(paths) = require_cli(cli) else { return };
    let replies = vec![Reply::text(CLEAN), Reply::text(CLEAN_TOO)];
    let session = Session::start(cli, paths, ListsFile::Default, replies);
    session.two_turns(CLEAN, CLEAN_TOO);

    assert_eq!(session.event_names(), ["checked", "checked"]);
    let second = session.request_text(2);
    assert!(second.contains(CLEAN), "the second request carries the history: {second}");
    assert!(!second.contains(NOTICE_HEADING), "nothing injected: {second}");
}

fn broken_lists_runs_on(cli: Cli) {
    let Some(paths) = require_cli(cli) else { return };
    let replies = vec![Reply::text(SLOP), Reply::text(CLEAN)];
    let session = Session::start(cli, paths, ListsFile::Broken, replies);
    session.two_turns(SLOP, CLEAN);

    assert_eq!(session.event_names(), ["broken_lists", "skipped_broken", "skipped_broken"]);
    let Event::BrokenLists { reason } = &session.events()[0] else { unreachable!() };
    assert!(reason.contains("lists.json") && reason.contains("not valid"), "{reason}");
    assert!(!session.request_text(2).contains(NOTICE_HEADING));
}

#[test]
fn claude_code_slop_is_flagged_and_the_next_request_carries_the_notice() {
    slop_then_notice(Cli::Claude);
}

#[test]
fn pi_slop_is_flagged_and_the_next_request_carries_the_notice() {
    slop_then_notice(Cli::Pi);
}

#[test]
fn claude_code_clean_reply_is_checked_and_nothing_is_injected() {
    clean_injects_nothing(Cli::Claude);
}

#[test]
fn pi_clean_reply_is_checked_and_nothing_is_injected() {
    clean_injects_nothing(Cli::Pi);
}

#[test]
fn claude_code_broken_lists_is_logged_and_the_session_runs_on() {
    broken_lists_runs_on(Cli::Claude);
}

#[test]
fn pi_broken_lists_is_logged_and_the_session_runs_on() {
    broken_lists_runs_on(Cli::Pi);
}
