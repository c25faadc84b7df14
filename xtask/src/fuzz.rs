//! `cargo xtask fuzz`: the gate, generated, at scale.
//!
//! Runs `harness_gate::fuzz` (random trees and calls for both harnesses, each allowed call held
//! to the kernel's resolution) for a million calls by default, a new tree every 1000 calls, on
//! every core. Not part of `cargo xtask ci`: the test suite runs a 20,000-call slice of it.
//! Exits non-zero on any escape, printing the seed, the tree and the call.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use harness_gate::fuzz::{self, FuzzConfig, Report};

const DEFAULT_CALLS: u64 = 1_000_000;
const CALLS_PER_TREE: u64 = 1000;
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

pub(crate) fn run(args: &[&str]) -> Result<()> {
    let mut calls = DEFAULT_CALLS;
    let mut seed = None;
    let mut rest = args;
    while let [flag, value, tail @ ..] = rest {
        match *flag {
            "--calls" => calls = value.parse().with_context(|| format!("--calls {value:?}"))?,
            "--seed" => seed = Some(value.parse().with_context(|| format!("--seed {value:?}"))?),
            _ => bail!("unknown flag {flag:?} (expected --calls N, --seed S)"),
        }
        rest = tail;
    }
    if !rest.is_empty() {
        bail!("{:?} needs a value (--calls N, --seed S)", rest.join(" "));
    }
    // Without --seed, a new seed from the clock: each run explores new trees, and prints the
    // seed first so that any run can be replayed.
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64)
    });
    let scratch = tempfile::tempdir().context("cannot make a scratch directory")?;
    let config = FuzzConfig {
        seed,
        calls,
        calls_per_tree: CALLS_PER_TREE,
        scratch: scratch.path().to_path_buf(),
        threads: std::thread::available_parallelism().map_or(1, usize::from),
    };
    eprintln!(
        "fuzz: seed {seed}, {calls} calls, a new tree every {CALLS_PER_TREE}, {} threads \
         (replay: cargo xtask fuzz --seed {seed} --calls {calls})",
        config.threads
    );
    let started = Instant::now();
    let mut last = Instant::now();
    let report = fuzz::run(&config, &mut |report: &Report| {
        if last.elapsed() >= PROGRESS_EVERY {
            last = Instant::now();
            eprintln!(
                "fuzz: {} of {calls} calls, {} allowed, {} escapes, {:.0} s",
                report.calls,
                report.allowed,
                report.escapes.len(),
                started.elapsed().as_secs_f64()
            );
        }
    })
    .context("the fuzzer could not build or remove a tree")?;
    let elapsed = started.elapsed().as_secs_f64();
    println!("{report}");
    println!("seed {seed}, {elapsed:.1} s, {:.0} calls/s", report.calls as f64 / elapsed);
    if !report.escapes.is_empty() {
        for escape in &report.escapes {
            println!("\n{escape}");
        }
        bail!("{} allowed calls escape the workspace (seed {seed})", report.escapes.len());
    }
    if report.calls != calls {
        bail!("only {} of {calls} calls ran", report.calls);
    }
    Ok(())
}
