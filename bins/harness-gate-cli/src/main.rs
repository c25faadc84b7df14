//! `harness-gate`: the gate as a process, run once per tool call.
//!
//! `harness-gate check --policy POLICY` reads `{"tool": NAME, "input": {...}}` (Pi's extension);
//! `harness-gate claude-hook --policy POLICY` reads Claude Code's PreToolUse payload. Exit 0
//! allows; exit 2 blocks with a one-line reason on stderr. Everything that is not a clean allow
//! (bad arguments, an unreadable policy, bad JSON, a panic) exits 2: the gate fails closed.

#![deny(clippy::print_stdout)]

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

use harness_gate::{Decision, Policy, ToolCall, ToolEnv, decide};

/// The most stdin the gate reads; a Write of a large file carries its content in the payload.
const MAX_PAYLOAD: u64 = 64 << 20;

const USAGE: &str = "usage: harness-gate (check | claude-hook) --policy POLICY";

const HELP: &str = "\
harness-gate: one decision per agent tool call, shared by Pi and Claude Code.

usage: harness-gate check --policy POLICY        (Pi's extension: {\"tool\", \"input\"} on stdin)
       harness-gate claude-hook --policy POLICY  (Claude Code's PreToolUse payload on stdin)
       harness-gate --help | --version

POLICY is the bundle's policy.json. A file tool is allowed only when every path it may open
resolves inside the policy's workspace; the policy's typed tools pass; everything else is blocked.

exit status: 0 allows (stdout stays empty); 2 blocks, with a one-line reason on stderr. Anything
that is not a clean allow exits 2: bad arguments, an unreadable policy, bad JSON, a panic.";

enum Mode {
    Check,
    ClaudeHook,
}

fn main() -> ExitCode {
    if let Some(text) = help_or_version() {
        // Only `--help` or `--version` alone: no hook command is ever written that way, and
        // every other command line still blocks.
        #[expect(clippy::print_stdout, reason = "--help and --version answer on stdout")]
        {
            println!("{text}");
        }
        return ExitCode::SUCCESS;
    }
    std::panic::set_hook(Box::new(|info| {
        let text = info.to_string().replace('\n', " ");
        eprintln!("harness-gate: blocked: the gate failed: {text} (rule gate-error)");
        std::process::exit(2);
    }));
    match run() {
        Ok(Decision::Allow) => ExitCode::SUCCESS,
        Ok(Decision::Block(blocked)) => {
            eprintln!("harness-gate: blocked: {blocked}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("harness-gate: blocked: {} (rule gate-error)", error.replace('\n', " "));
            ExitCode::from(2)
        }
    }
}

/// The text of `--help` or `--version`, when that is the one argument.
fn help_or_version() -> Option<String> {
    let mut args = std::env::args_os().skip(1);
    let (Some(arg), None) = (args.next(), args.next()) else { return None };
    if arg == "--help" || arg == "-h" {
        Some(HELP.to_owned())
    } else if arg == "--version" || arg == "-V" {
        Some(format!("harness-gate {}", env!("CARGO_PKG_VERSION")))
    } else {
        None
    }
}

fn parse_args() -> Result<(Mode, PathBuf), String> {
    // `args_os`: `std::env::args` panics on an argument that is not UTF-8.
    let mut args = std::env::args_os().skip(1);
    let mode = match args.next().as_deref().and_then(OsStr::to_str) {
        Some("check") => Mode::Check,
        Some("claude-hook") => Mode::ClaudeHook,
        _ => return Err(USAGE.to_owned()),
    };
    let policy = match (args.next(), args.next()) {
        (Some(flag), Some(path)) if flag == "--policy" => PathBuf::from(path),
        (Some(flag), None) => match flag.as_bytes().strip_prefix(b"--policy=") {
            Some(path) => PathBuf::from(OsStr::from_bytes(path)),
            None => return Err(USAGE.to_owned()),
        },
        _ => return Err(USAGE.to_owned()),
    };
    if args.next().is_some() {
        return Err(USAGE.to_owned());
    }
    Ok((mode, policy))
}

fn run() -> Result<Decision, String> {
    let (mode, policy_path) = parse_args()?;
    harness_gate::panic_for_test();
    let policy_text = std::fs::read(&policy_path)
        .map_err(|error| format!("cannot read the policy {policy_path:?}: {error}"))?;
    let home = std::env::var("HOME").ok();
    let policy = Policy::from_json(&policy_text, home)
        .map_err(|error| error_chain(&error))?
        .with_tool_env(ToolEnv::from_process());
    let mut payload = Vec::new();
    std::io::stdin()
        .take(MAX_PAYLOAD + 1)
        .read_to_end(&mut payload)
        .map_err(|error| format!("cannot read the tool call on stdin: {error}"))?;
    if payload.len() as u64 > MAX_PAYLOAD {
        return Err(format!("the tool call is larger than {MAX_PAYLOAD} bytes"));
    }
    let call = match mode {
        Mode::Check => ToolCall::from_check_json(&payload),
        Mode::ClaudeHook => ToolCall::from_claude_hook_json(&payload),
    }
    .map_err(|error| error.to_string())?;
    Ok(decide(&policy, &call))
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
