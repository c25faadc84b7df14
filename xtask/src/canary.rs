//! `cargo xtask fuzz-cli`: the real CLIs as the gate's oracle (harness-testkit's canary).
//!
//! Builds the gate, the MCP server and the unslop hook, then runs `harness_testkit::run_canary`
//! for Pi and Claude Code: generated hostile calls through the bundle's adapter with the real
//! gate, then the same calls with an allow-all stand-in. Prints each CLI's table and every escape
//! with its seed and call, and fails on an escape with the real gate, on a family the CLI never
//! executed or whose escapes the allow-all pass did not show, and on a blocked control.
//! `cargo xtask ci` runs a fixed-seed slice of it ([`ci_slice`]).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use harness_testkit::{CanaryConfig, CanaryReport, Cli, require_cli, run_canary};

use crate::cargo::Cargo;
use crate::setup;

const DEFAULT_CALLS: usize = 5000;
/// The CI slice: a few hundred calls per CLI, from a fixed seed, so a failure replays exactly.
const CI_CALLS: usize = 300;
const CI_SEED: u64 = 11;
const USAGE: &str = "usage: cargo xtask fuzz-cli [--calls N] [--seed S] [--cli pi|claude]";

pub(crate) fn run(root: &Path, args: &[&str]) -> Result<()> {
    let mut calls = DEFAULT_CALLS;
    let mut seed = None;
    let mut clis = vec![Cli::Pi, Cli::Claude];
    let mut rest = args;
    while let [flag, value, tail @ ..] = rest {
        match *flag {
            "--calls" => calls = value.parse().with_context(|| format!("--calls {value:?}"))?,
            "--seed" => seed = Some(value.parse().with_context(|| format!("--seed {value:?}"))?),
            "--cli" => {
                clis = match *value {
                    "pi" => vec![Cli::Pi],
                    "claude" => vec![Cli::Claude],
                    _ => bail!("--cli {value:?}: expected pi or claude\n{USAGE}"),
                }
            }
            _ => bail!("unknown flag {flag:?}\n{USAGE}"),
        }
        rest = tail;
    }
    if !rest.is_empty() {
        bail!("{:?} needs a value\n{USAGE}", rest.join(" "));
    }
    // Without --seed, a new seed from the clock, printed first so any run can be replayed.
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64)
    });
    setup::run(root)?;
    let bin_dir = Cargo::locate(root)?.build_install_binaries(false)?;
    eprintln!(
        "fuzz-cli: seed {seed}, {calls} calls per CLI (replay: cargo xtask fuzz-cli --seed {seed} \
         --calls {calls})"
    );
    check(&bin_dir, &clis, &CanaryConfig::new(calls, seed), true)
}

/// The fixed-seed slice `cargo xtask ci` runs after the tests (which built the binaries).
pub(crate) fn ci_slice(root: &Path) -> Result<()> {
    let bin_dir = Cargo::locate(root)?.bin_dir(false);
    check(&bin_dir, &[Cli::Pi, Cli::Claude], &CanaryConfig::new(CI_CALLS, CI_SEED), false)
}

/// Runs the canary for `clis`; `verbose` lists up to 40 calls each CLI did not execute and why
/// (the report's alternate form), otherwise three.
fn check(bin_dir: &Path, clis: &[Cli], config: &CanaryConfig, verbose: bool) -> Result<()> {
    let gate = bin_dir.join("harness-gate");
    if !gate.is_file() {
        bail!("{} is not built", gate.display());
    }
    let mut reports: Vec<CanaryReport> = Vec::new();
    for cli in clis {
        let Some(paths) = require_cli(*cli) else {
            bail!("{} is not installed; run `cargo xtask setup`", cli.name());
        };
        let started = Instant::now();
        let report = run_canary(&paths, &gate, bin_dir, config, &mut |line| eprintln!("{line}"))
            .with_context(|| format!("the canary could not run {}", cli.name()))?;
        if verbose {
            println!("{report:#}");
        } else {
            println!("{report}");
        }
        println!("  wall time {:.1} s", started.elapsed().as_secs_f64());
        reports.push(report);
    }
    let failed: Vec<String> = reports.iter().flat_map(CanaryReport::failures).collect();
    if !failed.is_empty() {
        bail!("the canary failed (seed {}):\n  {}", config.seed, failed.join("\n  "));
    }
    Ok(())
}
