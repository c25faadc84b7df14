//! Timing whole processes and finding the binaries a bench measures.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::{BenchError, Samples};

/// The variable through which `cargo xtask bench --runs N` sets the number of timed runs.
pub const RUNS_ENV: &str = "HARNESS_BENCH_RUNS";
/// Runs of each process thrown away first, so that page cache and dentry cache are warm for all.
pub const WARMUP_RUNS: usize = 20;
const DEFAULT_RUNS: usize = 500;

/// Returns the number of timed runs: [`RUNS_ENV`] if set to a number of at least 10, else 500.
pub fn runs() -> usize {
    std::env::var(RUNS_ENV)
        .ok()
        .and_then(|runs| runs.parse().ok())
        .filter(|runs| *runs >= 10)
        .unwrap_or(DEFAULT_RUNS)
}

/// Times `runs` runs of each command, after [`WARMUP_RUNS`] untimed ones, in turns: in round `r`
/// command `(r + i) % n` goes `i`-th, so that each goes first as often as the others and noise
/// from other jobs hits all alike. Each run gets a fresh descriptor of its stdin file (opened
/// outside the time), and stdout and stderr go to /dev/null. Returns wall seconds from just
/// before the spawn to just after the wait, per command; fails on any exit but 0.
pub fn time_interleaved(
    commands: &mut [(Command, PathBuf)],
    runs: usize,
) -> Result<Vec<Samples>, BenchError> {
    let mut times = vec![Vec::with_capacity(runs); commands.len()];
    for round in 0..WARMUP_RUNS + runs {
        for turn in 0..commands.len() {
            let which = (round + turn) % commands.len();
            let (cmd, stdin) = &mut commands[which];
            let input = File::open(&*stdin).map_err(BenchError::io("open", &*stdin))?;
            cmd.stdin(input).stdout(Stdio::null()).stderr(Stdio::null());
            let started = Instant::now();
            let status = cmd.status().map_err(BenchError::io("run", cmd.get_program()))?;
            let took = started.elapsed().as_secs_f64();
            if !status.success() {
                return Err(BenchError::Unexpected(format!(
                    "{} exited with {status} in round {round}",
                    Path::new(cmd.get_program()).display()
                )));
            }
            if round >= WARMUP_RUNS {
                times[which].push(took);
            }
        }
    }
    Ok(times.into_iter().map(Samples::new).collect())
}

/// Returns the path of binary `name` in the directory of `exe` (a `CARGO_BIN_EXE_*` of the bench's
/// own package), failing with what to build when it is missing: a bench target can ask cargo
/// for its own package's binaries only.
pub fn binary_beside(exe: &str, name: &str) -> Result<PathBuf, BenchError> {
    let path = Path::new(exe).with_file_name(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(BenchError::Unexpected(format!(
            "{} is missing: run `cargo xtask bench`, which builds every binary first, or \
             `cargo build --release -p {name}-cli` before this bench",
            path.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[expect(clippy::disallowed_methods, reason = "the test spawns the process it times")]
    fn a_failing_process_fails_the_timing() {
        let dir = std::env::temp_dir();
        let mut commands = [(Command::new("/bin/false"), dir.clone())];
        let error = time_interleaved(&mut commands, 1).unwrap_err().to_string();
        assert!(error.contains("/bin/false"), "{error}");
    }
}
