//! `cargo xtask ci`: the test command of the README and of `.ci/run`.
//!
//! It runs the steps below in order and stops at the first failure, naming the step.
//! Every step is real: none is skipped on a machine that lacks something, because setup installs it.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::cargo::Cargo;
use crate::{process, setup, verify_pi};

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
    process::run_visible(&mut Cargo::locate(root)?.command(&["fmt", "--all", "--check"]))
        .context("the code is not formatted; `cargo fmt --all` formats it")
}

fn clippy(root: &Path) -> Result<()> {
    let args = ["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"];
    process::run_visible(&mut Cargo::locate(root)?.command(&args))
}

/// Every test; `HARNESS_REQUIRE_CLIS=1` makes a test that cannot find a real CLI fail, not skip.
fn test(root: &Path) -> Result<()> {
    let mut cmd = Cargo::locate(root)?.command(&["test", "--workspace"]);
    process::run_visible(cmd.env("HARNESS_REQUIRE_CLIS", "1"))
}
