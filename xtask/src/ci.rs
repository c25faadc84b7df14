//! `cargo xtask ci`: the test command of the README and of `.ci/run`.
//!
//! It runs the steps below in order and stops at the first failure, naming the step.
//! Every step is real: none is skipped on a machine that lacks something, because setup installs it.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::{canary, process, setup, verify_pi};

/// One step of the test command.
struct Step {
    name: &'static str,
    run: fn(&Path) -> Result<()>,
}

/// The steps, in the order they run.
const STEPS: &[Step] = &[
    Step { name: "setup", run: |root| setup::run(root).map(|_tools| ()) },
    Step { name: "fmt", run: fmt },
    Step { name: "clippy", run: clippy },
    Step { name: "verify-pi", run: verify_pi::run },
    Step { name: "test", run: test },
    // After the tests, which built the binaries it drives: the real CLIs as the gate's oracle.
    Step { name: "canary", run: canary::ci_slice },
];

pub(crate) fn run(root: &Path) -> Result<()> {
    let started = Instant::now();
    for (number, step) in STEPS.iter().enumerate() {
        eprintln!("ci: [{}/{}] {} ...", number + 1, STEPS.len(), step.name);
        let step_started = Instant::now();
        (step.run)(root).with_context(|| format!("ci step `{}` failed", step.name))?;
        eprintln!(
            "ci: [{}/{}] {} passed in {:.1} s",
            number + 1,
            STEPS.len(),
            step.name,
            step_started.elapsed().as_secs_f64()
        );
    }
    eprintln!("ci: all {} steps passed in {:.1} s", STEPS.len(), started.elapsed().as_secs_f64());
    Ok(())
}

fn fmt(root: &Path) -> Result<()> {
    process::run_visible(cargo(root).args(["fmt", "--all", "--check"]))
        .context("the code is not formatted; `cargo fmt --all` formats it")
}

fn clippy(root: &Path) -> Result<()> {
    process::run_visible(cargo(root).args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))
}

/// Every test; `HARNESS_REQUIRE_CLIS=1` makes a test that cannot find a real CLI fail, not skip.
fn test(root: &Path) -> Result<()> {
    process::run_visible(cargo(root).args(["test", "--workspace"]).env("HARNESS_REQUIRE_CLIS", "1"))
}

/// Returns a command for the cargo that runs xtask, in the workspace root.
///
/// Cargo's own environment is kept on purpose: it carries the toolchain choice and proxies.
fn cargo(root: &Path) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = process::command(cargo);
    cmd.current_dir(root);
    cmd
}
