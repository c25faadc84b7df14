//! The hooks: what `harness-unslop` does for Claude Code's Stop and UserPromptSubmit hooks and for
//! Pi's extension at agent_end and before_agent_start.
//!
//! The check hooks (Stop, agent_end) check the reply and log `checked` or `flagged`, or, when the
//! lists file cannot be used, `broken_lists` (once per log) and `skipped_broken`. The notice hooks
//! (UserPromptSubmit, before_agent_start) look at the log's last verdict: when it is `flagged` and
//! no notice followed it, they log `notice_injected` and print the correction notice.
//!
//! A hook never blocks and never fails a session: [`run_hook`] returns what to print and nothing
//! else, whatever happens, and the binary always exits 0. What went wrong is logged as
//! `hook_failed`, or, with no log to write to, said on stderr.

use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use harness_contract::{AdapterEnv, AssetRole, Harness};
use serde_json::{Value, json};

use crate::checker::{Checker, Finding};
use crate::error::{UnslopError, error_chain};
use crate::lists::Lists;
use crate::log::{Event, Record, ReplyInfo, append, has_broken_lists, read_from};
use crate::text::{clip_chars, one_line, prefix_utf16};

/// The environment variable naming lists.json, when no `--lists` argument does.
pub const LISTS_ENV: &str = AdapterEnv::Asset(AssetRole::UnslopLists).name();
/// The most a hook reads from stdin, in bytes.
pub const MAX_PAYLOAD: u64 = 64 << 20;
/// The first line of every correction notice.
pub const NOTICE_HEADING: &str = "Correction notice from the unslop check:";
/// How much of a reply's start the log keeps, in characters.
const REPLY_START_CHARS: usize = 80;
/// The longest notice, in characters.
const NOTICE_CHARS: usize = 1500;

/// Which hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// Claude Code's Stop hook: checks `last_assistant_message`.
    ClaudeStop,
    /// Claude Code's UserPromptSubmit hook: prints `additionalContext` JSON when a notice is due.
    ClaudePrompt,
    /// Pi's extension at agent_end: checks `{"reply": ...}`.
    PiAgentEnd,
    /// Pi's extension at before_agent_start: prints the notice as plain text when one is due.
    PiBeforeStart,
}

impl Hook {
    /// Every hook, for usage text and tests.
    pub const ALL: [Self; 4] =
        [Self::ClaudeStop, Self::ClaudePrompt, Self::PiAgentEnd, Self::PiBeforeStart];

    /// Returns the subcommand name of `harness-unslop` that runs the hook.
    pub fn name(self) -> &'static str {
        match self {
            Self::ClaudeStop => "claude-stop",
            Self::ClaudePrompt => "claude-prompt",
            Self::PiAgentEnd => "pi-agent-end",
            Self::PiBeforeStart => "pi-before-start",
        }
    }

    /// Returns the hook named `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|hook| hook.name() == name)
    }

    fn harness(self) -> &'static str {
        match self {
            Self::ClaudeStop | Self::ClaudePrompt => Harness::ClaudeCode.name(),
            Self::PiAgentEnd | Self::PiBeforeStart => Harness::Pi.name(),
        }
    }
}

/// What a hook run needs: which hook, the log, the lists file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    /// The hook.
    pub hook: Hook,
    /// The log (`MOSAIC_UNSLOP_LOG`); without it the hook can only warn on stderr.
    pub log: Option<PathBuf>,
    /// lists.json (`--lists`, else `MOSAIC_UNSLOP_LISTS`); without it the check is broken.
    pub lists: Option<PathBuf>,
}

/// What the binary prints; it exits 0 in every case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookOutput {
    /// For stdout: empty, or the notice (JSON for Claude Code, plain text for Pi).
    pub stdout: String,
    /// For stderr: what could not even be logged.
    pub stderr: Option<String>,
}

/// Runs `config.hook` on the payload read from `stdin`. Never panics, never fails.
pub fn run_hook(config: &HookConfig, stdin: &mut dyn Read) -> HookOutput {
    let Some(log) = config.log.as_deref() else {
        return HookOutput {
            stdout: String::new(),
            stderr: Some(format!(
                "harness-unslop {}: {} is not set; nothing checked or logged",
                config.hook.name(),
                crate::log::LOG_ENV
            )),
        };
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| run_logged(config, log, stdin)));
    let reason = match outcome {
        Ok(Ok(stdout)) => return HookOutput { stdout, stderr: None },
        Ok(Err(reason)) => reason,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            format!("the hook panicked: {what}")
        }
    };
    let record = Record::now(
        Some(config.hook.harness()),
        None,
        Event::HookFailed { hook: config.hook.name().to_owned(), reason: reason.clone() },
    );
    let stderr = match append(log, &record) {
        Ok(()) => None,
        Err(error) => Some(format!(
            "harness-unslop {}: {reason}; and cannot log it: {}",
            config.hook.name(),
            error_chain(&error)
        )),
    };
    HookOutput { stdout: String::new(), stderr }
}

/// A hook's failure, as the `reason` of its `hook_failed` line.
type Failure = String;

fn run_logged(config: &HookConfig, log: &Path, stdin: &mut dyn Read) -> Result<String, Failure> {
    #[cfg(feature = "test-hooks")]
    if std::env::var_os(PANIC_FOR_TEST).is_some() {
        panic!("{PANIC_FOR_TEST} is set");
    }
    let payload = read_payload(stdin)?;
    let harness = Some(config.hook.harness());
    match config.hook {
        Hook::ClaudeStop | Hook::PiAgentEnd => {
            let (text_field, session_field) = match config.hook {
                Hook::ClaudeStop => ("last_assistant_message", "session_id"),
                _ => ("reply", "session"),
            };
            let reply = payload
                .get(text_field)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("the payload has no string {text_field:?}"))?;
            let session = payload.get(session_field).and_then(Value::as_str);
            let event = check_event(config.lists.as_deref(), log, harness, session, reply)?;
            write(log, &Record::now(harness, session, event))?;
            Ok(String::new())
        }
        Hook::ClaudePrompt | Hook::PiBeforeStart => {
            let session_field =
                if config.hook == Hook::ClaudePrompt { "session_id" } else { "session" };
            let session = payload.get(session_field).and_then(Value::as_str);
            let Some(findings) = due_notice(log)? else { return Ok(String::new()) };
            let notice = notice_text(&findings);
            let ids = findings.into_iter().map(|finding| finding.id).collect();
            write(log, &Record::now(harness, session, Event::NoticeInjected { ids }))?;
            Ok(match config.hook {
                Hook::ClaudePrompt => json!({"hookSpecificOutput": {
                    "hookEventName": "UserPromptSubmit",
                    "additionalContext": notice,
                }})
                .to_string(),
                _ => notice,
            })
        }
    }
}

/// Set only by this workspace's tests, to prove that a panic is logged and the hook still exits
/// 0. It exists only with the `test-hooks` feature, which only the tests' dev-dependencies enable:
/// a release build, and so every installed binary, has no such hook.
#[cfg(feature = "test-hooks")]
pub const PANIC_FOR_TEST: &str = "HARNESS_UNSLOP_PANIC_FOR_TEST";

fn read_payload(stdin: &mut dyn Read) -> Result<Value, Failure> {
    let mut bytes = Vec::new();
    stdin
        .take(MAX_PAYLOAD + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read the payload on stdin: {error}"))?;
    if bytes.len() as u64 > MAX_PAYLOAD {
        return Err(format!("the payload is larger than {MAX_PAYLOAD} bytes"));
    }
    serde_json::from_slice(&bytes).map_err(|error| format!("the payload is not JSON: {error}"))
}

fn write(log: &Path, record: &Record) -> Result<(), Failure> {
    append(log, record).map_err(|error| error_chain(&error))
}

/// Checks `reply` and returns the verdict; with a broken lists file, logs `broken_lists` if the
/// log has none yet and returns `skipped_broken`.
fn check_event(
    lists: Option<&Path>,
    log: &Path,
    harness: Option<&str>,
    session: Option<&str>,
    reply: &str,
) -> Result<Event, Failure> {
    let checker = lists
        .ok_or_else(|| format!("no lists file: neither --lists nor {LISTS_ENV} names one"))
        .and_then(|path| {
            Lists::load(path).and_then(Checker::new).map_err(|error| match error {
                // These name the path already.
                UnslopError::ReadLists { .. } | UnslopError::ListsTooLarge { .. } => {
                    error_chain(&error)
                }
                _ => format!("{}: {}", path.display(), error_chain(&error)),
            })
        });
    let checker = match checker {
        Ok(checker) => checker,
        Err(reason) => {
            if !has_broken_lists(log) {
                let broken = Event::BrokenLists { reason: reason.clone() };
                write(log, &Record::now(harness, session, broken))?;
            }
            return Ok(Event::SkippedBroken { reason });
        }
    };
    let findings = checker.check(reply);
    let reply = ReplyInfo {
        reply_chars: reply.chars().count(),
        // Only the start is kept: fold the whitespace of a bounded prefix, not of the whole reply.
        reply_start: clip_chars(
            &one_line(prefix_utf16(reply, 4 * REPLY_START_CHARS)),
            REPLY_START_CHARS,
        ),
    };
    Ok(if findings.is_empty() {
        Event::Checked { reply }
    } else {
        Event::Flagged { reply, findings }
    })
}

/// Returns the findings of the log's last verdict when it is `flagged` and no notice followed.
fn due_notice(log: &Path) -> Result<Option<Vec<Finding>>, Failure> {
    let slice = read_from(log, 0).map_err(|error| error_chain(&error))?;
    for record in slice.records.into_iter().rev() {
        match record.event {
            Event::Flagged { findings, .. } => return Ok(Some(findings)),
            Event::Checked { .. } | Event::NoticeInjected { .. } => return Ok(None),
            Event::BrokenLists { .. } | Event::SkippedBroken { .. } | Event::HookFailed { .. } => {}
        }
    }
    Ok(None)
}

/// Returns the correction notice for a reply with `findings`.
pub fn notice_text(findings: &[Finding]) -> String {
    let quoted: Vec<String> = findings
        .iter()
        .map(|finding| format!("\"{}\" ({})", finding.matched, finding.id))
        .collect();
    let text = format!(
        "{NOTICE_HEADING} your previous reply used phrasing that public style guides and studies \
         name as typical of machine-written prose: {}. Write plainly and specifically from now on: \
         say what you mean in ordinary words, without stock phrases, filler or inflated importance. \
         Do not mention this notice.",
        quoted.join(", ")
    );
    clip_chars(&text, NOTICE_CHARS)
}
