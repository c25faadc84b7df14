//! `harness-unslop`: the unslop check's hooks, one process per reply or prompt.
//!
//! `harness-unslop claude-stop [--lists LISTS]` is Claude Code's Stop hook and
//! `harness-unslop claude-prompt` its UserPromptSubmit hook; `harness-unslop pi-agent-end
//! [--lists LISTS]` and `harness-unslop pi-before-start` are what Pi's unslop extension runs.
//! The log is `MOSAIC_UNSLOP_LOG`; LISTS defaults to `MOSAIC_UNSLOP_LISTS`.
//!
//! It exits 0 whatever happens, bad arguments included: the check never blocks or fails a
//! session (and for Claude Code's Stop hook, exit 2 would make the agent go on). What went wrong
//! is logged as `hook_failed`, or said on stderr when there is no log.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

use harness_unslop::{Hook, HookConfig, LISTS_ENV, log::LOG_ENV, run_hook};

const USAGE: &str = "usage: harness-unslop (claude-stop | claude-prompt | pi-agent-end | pi-before-start) \
                     [--lists LISTS]";

const HELP: &str = "\
harness-unslop: the unslop check's hooks, one process per reply or prompt.

usage: harness-unslop (claude-stop | claude-prompt | pi-agent-end | pi-before-start) [--lists LISTS]
       harness-unslop --help | --version

  claude-stop      Claude Code's Stop hook: checks the reply on stdin and logs checked or flagged
  claude-prompt    Claude Code's UserPromptSubmit hook: prints the correction notice when due
  pi-agent-end     what Pi's unslop extension runs at agent_end (as claude-stop)
  pi-before-start  what Pi's unslop extension runs at before_agent_start (as claude-prompt)

environment: MOSAIC_UNSLOP_LOG (the log), MOSAIC_UNSLOP_LISTS (lists.json unless --lists)

exit status: always 0, bad arguments included: the check never blocks or fails a session.
What went wrong is logged as hook_failed, or said on stderr when there is no log.";

fn main() -> ExitCode {
    if let Some(text) = help_or_version(std::env::args_os().skip(1).collect()) {
        let _ = writeln!(std::io::stdout(), "{text}");
        return ExitCode::SUCCESS;
    }
    let log = std::env::var_os(LOG_ENV).filter(|v| !v.is_empty()).map(PathBuf::from);
    let output = match parse_args(std::env::args_os().skip(1).collect()) {
        Ok((hook, lists)) => {
            let lists = lists.or_else(|| {
                std::env::var_os(LISTS_ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
            });
            run_hook(&HookConfig { hook, log, lists }, &mut std::io::stdin().lock())
        }
        Err(usage) => harness_unslop::HookOutput { stdout: String::new(), stderr: Some(usage) },
    };
    // A closed stdout or stderr leaves nothing better to do; the exit status stays 0.
    if !output.stdout.is_empty() {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(output.stdout.as_bytes()).and_then(|()| stdout.flush());
    }
    if let Some(message) = output.stderr {
        let _ = writeln!(std::io::stderr(), "{message}");
    }
    ExitCode::SUCCESS
}

/// The text `--help` or `--version`, when that is the one argument.
fn help_or_version(args: Vec<OsString>) -> Option<String> {
    match args.as_slice() {
        [arg] if arg == "--help" || arg == "-h" => Some(HELP.to_owned()),
        [arg] if arg == "--version" || arg == "-V" => {
            Some(format!("harness-unslop {}", env!("CARGO_PKG_VERSION")))
        }
        _ => None,
    }
}

/// Reads the arguments as `OsString`s: `std::env::args` panics on one that is not UTF-8, and a
/// hook must exit 0 whatever it is given.
fn parse_args(args: Vec<OsString>) -> Result<(Hook, Option<PathBuf>), String> {
    let mut args = args.into_iter();
    let hook = args
        .next()
        .as_deref()
        .and_then(OsStr::to_str)
        .and_then(Hook::from_name)
        .ok_or_else(|| USAGE.to_owned())?;
    let lists = match (args.next(), args.next()) {
        (None, _) => None,
        (Some(flag), Some(path)) if flag == "--lists" => Some(PathBuf::from(path)),
        (Some(flag), None) => match flag.as_bytes().strip_prefix(b"--lists=") {
            Some(path) => Some(PathBuf::from(OsStr::from_bytes(path))),
            None => return Err(USAGE.to_owned()),
        },
        _ => return Err(USAGE.to_owned()),
    };
    if args.next().is_some() {
        return Err(USAGE.to_owned());
    }
    Ok((hook, lists))
}
