//! `harness-runner RUN_DIR`, with `{"cap": "..."}` and a newline on stdin.
//!
//! Exit codes (spec, "The runner"): 0 stopped, 2 bad run directory or stdin, 20 founder
//! credentials, 21 role.claim refused, 22 the capability or claim stopped working, 23 the broker
//! unreachable. A panic on any thread stops the session as a signal does (the turn's group
//! killed, the role released) and then exits 101, Rust's code for a panic, outside the table.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// The exit code after a panic: Rust's own, so a panic on the main thread, which unwinds out of
/// `main`, ends with the same code as one on another thread.
const PANIC_EXIT: u8 = 101;

/// Set by the panic hook.
static PANICKED: AtomicBool = AtomicBool::new(false);

fn main() -> ExitCode {
    // First of all: as PID 1 of its own namespace the runner sees only signals it handles.
    let stop = match harness_runner::install_stop_handlers() {
        Ok(stop) => stop,
        Err(error) => {
            eprintln!("harness-runner: cannot install the signal handlers: {error}");
            return ExitCode::from(2);
        }
    };
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
    let hook_stop = stop.clone();
    std::panic::set_hook(Box::new(move |info| {
        PANICKED.store(true, Ordering::SeqCst);
        hook_stop.store(true, Ordering::SeqCst);
        let text = info.to_string().replace('\n', " ");
        eprintln!("harness-runner: panicked: {text} (stopping; exit {PANIC_EXIT})");
    }));
    harness_runner::panic_for_test(&env);
    let mut args = std::env::args_os().skip(1);
    let (Some(run_dir), None) = (args.next(), args.next()) else {
        eprintln!(
            "usage: harness-runner RUN_DIR  (the capability as {{\"cap\": \"...\"}} on stdin)"
        );
        return ExitCode::from(2);
    };
    let config = harness_runner::RunnerConfig { run_dir: run_dir.into(), stop, env };
    let result = harness_runner::run(&config, std::io::BufReader::new(std::io::stdin()));
    if PANICKED.load(Ordering::SeqCst) {
        if let Err(error) = result {
            eprintln!("harness-runner: {error}");
        }
        return ExitCode::from(PANIC_EXIT);
    }
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!(
                "harness-runner: {error} (exit {}, {})",
                error.exit_code(),
                error.end_reason()
            );
            ExitCode::from(error.exit_code())
        }
    }
}
