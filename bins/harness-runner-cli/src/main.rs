//! `harness-runner RUN_DIR`, with `{"cap": "..."}` and a newline on stdin.
//!
//! Exit codes (spec, "The runner"): 0 stopped, 2 bad run directory or stdin, 20 founder
//! credentials, 21 role.claim refused, 22 the capability or claim stopped working, 23 the broker
//! unreachable.

use std::process::ExitCode;

fn main() -> ExitCode {
    // First of all: as PID 1 of its own namespace the runner sees only signals it handles.
    let stop = match harness_runner::install_stop_handlers() {
        Ok(stop) => stop,
        Err(error) => {
            eprintln!("harness-runner: cannot install the signal handlers: {error}");
            return ExitCode::from(2);
        }
    };
    let mut args = std::env::args_os().skip(1);
    let (Some(run_dir), None) = (args.next(), args.next()) else {
        eprintln!(
            "usage: harness-runner RUN_DIR  (the capability as {{\"cap\": \"...\"}} on stdin)"
        );
        return ExitCode::from(2);
    };
    let config = harness_runner::RunnerConfig {
        run_dir: run_dir.into(),
        stop,
        env: harness_runner::environment(),
    };
    match harness_runner::run(&config, std::io::BufReader::new(std::io::stdin())) {
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
