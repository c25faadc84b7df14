//! `cargo xtask ci`: the test command of the README and of `.ci/run`.
//!
//! It runs the steps below in order and stops at the first failure, naming the step.
//! Every step is real: none is skipped on a machine that lacks something, because setup installs it.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, Result};

use crate::cargo::Cargo;
use crate::{canary, dist, process, setup, verify_pi};

/// A step of the test command.
type Step = fn(&Path) -> Result<()>;

/// The steps, in the order they run.
const STEPS: [(&str, Step); 7] = [
    ("setup", |root| setup::run(root).map(|_tools| ())),
    ("fmt", |root| cargo(root, &["fmt", "--all", "--check"])),
    ("clippy", |root| {
        cargo(root, &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"])
    }),
    ("verify-pi", verify_pi::run),
    // `HARNESS_REQUIRE_CLIS=1` (below) makes a test that cannot find a real CLI fail, not skip.
    ("test", |root| cargo(root, &["test", "--workspace"])),
    // After the tests, which built the binaries it drives: the real CLIs as the gate's oracle.
    ("canary", canary::ci_slice),
    // A fresh clone's host path: `cargo xtask dist --archive`, the archive unpacked by the
    // system tar, `harness doctor` and both example hosts on the unpacked install.
    ("dist-hosts", dist::ci_hosts),
];

pub(crate) fn run(root: &Path) -> Result<()> {
    let started = Instant::now();
    for (number, (name, step)) in STEPS.iter().enumerate() {
        let at = format!("ci: [{}/{}] {name}", number + 1, STEPS.len());
        eprintln!("{at} ...");
        let step_started = Instant::now();
        step(root).with_context(|| format!("ci step `{name}` failed"))?;
        eprintln!("{at} passed in {:.1} s", step_started.elapsed().as_secs_f64());
    }
    eprintln!("ci: all {} steps passed in {:.1} s", STEPS.len(), started.elapsed().as_secs_f64());
    Ok(())
}

/// Runs `cargo ARGS` in the workspace, its output visible (`cargo fmt --all` formats what `fmt`
/// finds unformatted).
fn cargo(root: &Path, args: &[&str]) -> Result<()> {
    let mut cmd = Cargo::locate(root)?.command(args);
    process::run_visible(cmd.env("HARNESS_REQUIRE_CLIS", "1"))
}
