//! `cargo bench -p harness-runner-cli --bench claim`: from harness-runner's start to its
//! `role.claim`, with the real Pi and Claude Code named by their packages' own bin entries (as an
//! npm install names them), against a floor measured in the same run: the same runner, bundle and
//! broker with a CLI that is a one-line shell script in a package of its own. The runner reads the
//! version from the package and claims without starting the CLI; the launch preflight (the CLI's
//! `--version` inside the turn's sandbox) runs beside the claim, and its end, the first
//! `message.read`, is reported too. Target: start → claim at most 20 ms at the median, both CLIs.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::error::Error;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use harness_benchkit::{Row, Unit, binary_beside, median};
use harness_testkit::{Cli, SessionOptions, SessionScenario, require_cli, tools_bin_dir};
use serde_json::json;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const STARTS: usize = 15;
const TARGET_MS: f64 = 20.0;

fn main() -> Result<()> {
    let runner = Path::new(env!("CARGO_BIN_EXE_harness-runner"));
    for sibling in ["harness-gate", "harness-mcp", "harness-unslop"] {
        binary_beside(env!("CARGO_BIN_EXE_harness-runner"), sibling)?;
    }
    let bin = runner.parent().ok_or("the runner has no directory")?;
    let tools = tools_bin_dir().parent().ok_or("no .tools")?.canonicalize()?;
    let modules = tools.join("node_modules");
    let dir = tempfile::tempdir()?;
    let mut report = String::from(
        "| CLI (its package's bin entry) | start → `role.claim` | floor (a packaged shell \
         script) | start → first `message.read` (the preflight done) |\n| --- | ---: | ---: | ---: |\n",
    );
    let mut rows = Vec::new();
    for (cli, entry, version) in [
        (Cli::Pi, modules.join("@earendil-works/pi-coding-agent/dist/bundle/cli.js"), "0.85.1"),
        (Cli::Claude, modules.join("@anthropic-ai/claude-code/bin/claude.exe"), "2.1.296"),
    ] {
        let paths = require_cli(cli).ok_or("a CLI is not installed; run cargo xtask setup")?;
        let package = match cli {
            Cli::Pi => "@earendil-works/pi-coding-agent",
            Cli::Claude => "@anthropic-ai/claude-code",
        };
        let printed = match cli {
            Cli::Pi => version.to_owned(),
            Cli::Claude => format!("{version} (Claude Code)"),
        };
        let fake = fake_package(&dir.path().join(cli.name()), package, version, &printed)?;
        eprintln!("bench claim: {cli}, {STARTS} starts each with the real CLI and the floor ...");
        let (mut real, mut floor, mut ready) = (Vec::new(), Vec::new(), Vec::new());
        let real_scenario = scenario(&paths, bin, &entry)?;
        let floor_scenario = scenario(&paths, bin, &fake)?;
        for round in 0..STARTS {
            // Take turns going first, so that noise hits both alike.
            let order: [&SessionScenario; 2] = if round % 2 == 0 {
                [&real_scenario, &floor_scenario]
            } else {
                [&floor_scenario, &real_scenario]
            };
            for which in order {
                let (claim, read) = time_start(which, runner)?;
                if std::ptr::eq(which, &real_scenario) {
                    real.push(claim);
                    ready.push(read);
                } else {
                    floor.push(claim);
                }
            }
        }
        let (real, floor, ready) = (median(real), median(floor), median(ready));
        report.push_str(&format!("| {cli} | {real:.1} ms | {floor:.1} ms | {ready:.1} ms |\n"));
        let label = format!("{cli}: start → role.claim");
        let row = Row::at_most(
            ("runner", label.as_str()),
            Unit::Ms,
            real,
            Some(("a packaged script CLI", floor)),
            TARGET_MS,
        );
        rows.push(row);
    }
    println!("{report}");
    println!(
        "Medians of {STARTS} starts each, the real CLI and the floor taken in turns. Each start is \
         timed from the spawn to the scripted broker receiving `role.claim`, then to the first \
         `message.read`, which waits for the preflight; then SIGTERM."
    );
    for row in rows {
        println!("{row}");
    }
    Ok(())
}

/// A package `name` at `version` whose bin entry prints `printed` for `--version`.
fn fake_package(root: &Path, name: &str, version: &str, printed: &str) -> Result<PathBuf> {
    let package = root.join("node_modules").join(name);
    std::fs::create_dir_all(package.join("bin"))?;
    let manifest = json!({"name": name, "version": version, "bin": {"cli": "bin/cli"}});
    std::fs::write(package.join("package.json"), manifest.to_string())?;
    let entry = package.join("bin/cli");
    std::fs::write(&entry, format!("#!/bin/sh\necho '{printed}'\n"))?;
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755))?;
    Ok(entry)
}

fn scenario(paths: &harness_testkit::CliPaths, bin: &Path, cli: &Path) -> Result<SessionScenario> {
    let mut options = SessionOptions::from_checkout(bin)?;
    options.run_json = json!({"cli": cli}).as_object().cloned().unwrap_or_default();
    Ok(SessionScenario::with_options(paths, options)?)
}

/// Starts the runner; returns the milliseconds to its claim and to its first read, then stops it.
fn time_start(scenario: &SessionScenario, runner: &Path) -> Result<(f64, f64)> {
    let broker = scenario.broker();
    let (claims, reads) =
        (broker.calls_of("role.claim").len(), broker.calls_of("message.read").len());
    let started = Instant::now();
    let mut child = scenario.spawn_runner(runner)?;
    let claim = wait(&mut child, started, || broker.calls_of("role.claim").len() > claims)?;
    let read = wait(&mut child, started, || broker.calls_of("message.read").len() > reads)?;
    stop(child)?;
    Ok((claim, read))
}

fn wait(child: &mut Child, started: Instant, mut done: impl FnMut() -> bool) -> Result<f64> {
    while !done() {
        if let Some(status) = child.try_wait()? {
            return Err(format!("the runner exited ({status}) early").into());
        }
        if started.elapsed() > Duration::from_secs(60) {
            return Err("the runner took over 60 s".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

fn stop(mut child: Child) -> Result<()> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id())?).ok_or("no pid")?;
    rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
    let status = child.wait()?;
    if status.code() != Some(0) {
        return Err(format!("the runner stopped with {status}").into());
    }
    Ok(())
}
