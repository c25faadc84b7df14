//! `harness-runner RUN_DIR`, with `{"cap": "..."}` and a newline on stdin.
//!
//! Exit codes (spec, "The runner"): 0 stopped, 2 bad run directory or stdin (or a bad command
//! line), 20 founder credentials, 21 role.claim refused, 22 the capability or claim stopped
//! working, 23 the broker unreachable. A panic on any thread stops the session as a signal does
//! (the turn's group killed, the role released) and then exits 101, Rust's code for a panic,
//! outside the table.
//!
//! Logs go to stderr through `tracing` (docs/runner.md, "Logs"): human-readable lines by
//! default, JSON lines when `HARNESS_LOG_FORMAT=json`, the level from `HARNESS_LOG`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, fmt};

/// The exit code after a panic: Rust's own, so a panic on the main thread, which unwinds out of
/// `main`, ends with the same code as one on another thread.
const PANIC_EXIT: u8 = 101;

/// Set by the panic hook.
static PANICKED: AtomicBool = AtomicBool::new(false);

const AFTER_HELP: &str = "\
It claims the session's role, serves the typed tools on RUN_DIR/tools.sock, runs one harness
turn per message the broker hands it, sends each answer back as a RESULT, and releases the role
when stopped (docs/runner.md). The capability arrives on stdin as one line, {\"cap\": \"...\"};
it is never read from argv or the environment, and never logged. The runner stops cleanly on
SIGTERM or SIGINT.

environment:
  HARNESS_LOG          the log level: off, error, warn, info (default), debug or trace
  HARNESS_LOG_FORMAT   json for JSON lines on stderr; anything else, human-readable lines

exit status:
  0    stopped by SIGTERM or SIGINT (or --help, --version)
  2    bad run directory, stdin or command line
  20   founder credentials in the environment
  21   role.claim refused
  22   the capability or the claim stopped working
  23   the broker unreachable past brokerRetries
  101  a panic (the session is stopped first)";

/// The command line: the run directory alone.
#[derive(Debug, Parser)]
#[command(
    name = "harness-runner",
    version,
    about = "harness-runner: the per-session runner of a managed agent session.",
    help_template = "{about}\n\nusage: {usage}\n\n{all-args}{after-help}",
    after_help = AFTER_HELP
)]
struct Args {
    /// The run directory: run.json, bundle/, and what the runner writes (turns/, session/, ...).
    run_dir: PathBuf,
}

fn main() -> ExitCode {
    // First of all: as PID 1 of its own namespace the runner sees only signals it handles.
    let stop = match harness_runner::install_stop_handlers() {
        Ok(stop) => stop,
        Err(error) => {
            eprintln!("harness-runner: cannot install the signal handlers: {error}");
            return ExitCode::from(2);
        }
    };
    // Before stdin is touched: `--help`, `--version` and a bad command line never wait for it.
    // A usage error exits 2, the code of a bad run directory.
    let args = Args::parse();
    // A panic on a thread other than the main one would otherwise end only that thread (a tool
    // call's, the tool socket's): the hook turns it into a stop, so the main loop kills the
    // turn's group, releases the role, removes the tool socket, and `main` exits 101.
    // Before stdin is read: a process of the same user (the session) must not be able to read
    // the capability out of this process's memory (/proc/PID/mem, ptrace).
    if let Err(error) = harness_runner::harden_process() {
        eprintln!("harness-runner: cannot make the process non-dumpable: {error}");
        return ExitCode::from(2);
    }
    // The one read of the environment, as bytes: everything after uses this copy.
    let env = harness_runner::Environment::of_process();
    init_logging(&env);
    let hook_stop = stop.clone();
    std::panic::set_hook(Box::new(move |info| {
        PANICKED.store(true, Ordering::SeqCst);
        hook_stop.store(true, Ordering::SeqCst);
        let text = info.to_string().replace('\n', " ");
        tracing::error!(exit_code = PANIC_EXIT, "panicked: {text} (stopping; exit {PANIC_EXIT})");
    }));
    harness_runner::panic_for_test(&env);
    let config = harness_runner::RunnerConfig { run_dir: args.run_dir, stop, env };
    let result = harness_runner::run(&config, std::io::BufReader::new(std::io::stdin()));
    if PANICKED.load(Ordering::SeqCst) {
        if let Err(error) = result {
            tracing::error!(exit_code = PANIC_EXIT, "{error}");
        }
        return ExitCode::from(PANIC_EXIT);
    }
    match result {
        Ok(stopped) => {
            tracing::info!(exit_code = 0, ?stopped, "runner stopped (exit 0)");
            ExitCode::SUCCESS
        }
        Err(error) => {
            let (code, reason) = (error.exit_code(), error.end_reason());
            tracing::error!(exit_code = code, reason, "{error} (exit {code}, {reason})");
            ExitCode::from(code)
        }
    }
}

/// Logs to stderr: the level from `HARNESS_LOG` (info when unset or not a level), JSON lines
/// when `HARNESS_LOG_FORMAT=json`. Only the harness crates' own events pass the filter, so no
/// dependency's log can carry what this process holds.
fn init_logging(env: &harness_runner::Environment) {
    let level = env
        .get("HARNESS_LOG")
        .and_then(|value| value.to_str())
        .and_then(|value| value.trim().parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    let filter = Targets::new().with_target("harness", level);
    let layer = fmt::layer().with_writer(std::io::stderr);
    let layer = if env.get("HARNESS_LOG_FORMAT").is_some_and(|format| format == "json") {
        layer.json().flatten_event(true).with_filter(filter).boxed()
    } else {
        layer.with_filter(filter).boxed()
    };
    tracing_subscriber::registry().with(layer).init();
}
