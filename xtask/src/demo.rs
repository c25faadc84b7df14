//! `cargo xtask demo`: the README's main job. Until the session runner exists it shows the gate
//! at work inside the real Claude Code 2.1.296 and Pi 0.85.1, each against the scripted model on
//! 127.0.0.1: a read outside the workspace blocked (by its path, then through a symlink inside the
//! workspace), a read inside allowed, and the proof that the secret never reached the model.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use harness_testkit::{Cli, GateScenario, OutsideRead, SECRET_TEXT, ScenarioStep, require_cli};

use crate::{process, setup};

const DEADLINE: Duration = Duration::from_secs(90);

pub(crate) fn run(root: &Path) -> Result<()> {
    setup::run(root)?;
    let gate = build_gate(root)?;
    println!();
    println!("harness demo: the gate inside the real agent CLIs");
    println!("Each CLI talks to a scripted Messages API on 127.0.0.1 (no API key, no network).");
    println!("The model asks to read a secret outside the workspace, then a file inside it.");
    for cli in [Cli::Claude, Cli::Pi] {
        for outside in [OutsideRead::Direct, OutsideRead::ThroughSymlink] {
            show(cli, &gate, outside)?;
        }
    }
    println!();
    println!("Every block above is the gate's own reason, as the model received it.");
    Ok(())
}

fn build_gate(root: &Path) -> Result<PathBuf> {
    eprintln!("demo: building harness-gate ...");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = process::command(cargo);
    build.current_dir(root).args(["build", "--quiet", "-p", "harness-gate-cli"]);
    process::run_visible(&mut build)?;
    let gate = root.join("target/debug/harness-gate");
    if !gate.is_file() {
        bail!("the build did not produce {}", gate.display());
    }
    Ok(gate)
}

fn show(cli: Cli, gate: &Path, outside: OutsideRead) -> Result<()> {
    let Some(paths) = require_cli(cli) else {
        bail!("{} is not installed although setup ran; see the line above", cli.name());
    };
    let scenario = GateScenario::with_outside_read(cli, gate, outside)
        .with_context(|| format!("cannot lay out the {} scenario", cli.name()))?;
    let (title, wiring) = match cli {
        Cli::Claude => (
            "Claude Code 2.1.296",
            "PreToolUse hook, matcher *: timeout -k 2 10 harness-gate claude-hook --policy policy.json || exit 2",
        ),
        Cli::Pi => (
            "Pi 0.85.1",
            "extension (-e gate-extension.mjs): every tool_call runs harness-gate check --policy policy.json",
        ),
    };
    let how = match outside {
        OutsideRead::Direct => "by its own path",
        OutsideRead::ThroughSymlink => "through link.txt, a symlink inside the workspace",
    };
    println!();
    println!("── {title}: the secret {how} ──");
    println!("workspace  {}", scenario.workspace().display());
    println!("secret     {} (outside the workspace)", scenario.secret().display());
    println!("gate       {wiring}");
    let output = scenario.run(&paths, DEADLINE)?;
    if !output.status.success() {
        bail!("{} failed: {output}", cli.name());
    }
    for (number, step) in scenario.steps().iter().enumerate() {
        print_step(number + 1, step);
    }
    let calls = scenario.model().messages_calls();
    let answer = match cli {
        Cli::Claude => serde_json::from_str::<serde_json::Value>(&output.stdout)
            .ok()
            .and_then(|json| json["result"].as_str().map(str::to_owned))
            .unwrap_or_default(),
        Cli::Pi => output.stdout.trim_end().to_owned(),
    };
    println!("{}. the model answers: {answer:?}", scenario.steps().len() + 1);
    let leaked = calls.iter().any(|call| call.raw_body.contains(SECRET_TEXT));
    if leaked {
        bail!("the secret reached the model: the gate did not hold");
    }
    println!("   the secret's text is in none of the {} requests the model received", calls.len());
    Ok(())
}

fn print_step(number: usize, step: &ScenarioStep) {
    println!("{number}. the model calls {} {}", step.tool, step.input);
    match &step.result {
        Some(result) if result.is_error && result.text.contains("harness-gate: blocked") => {
            let reason = result.text.lines().find(|line| line.contains("harness-gate: blocked"));
            let reason = reason.unwrap_or(&result.text);
            let reason = reason.find("harness-gate: ").map_or(reason, |start| &reason[start..]);
            println!("   gate: BLOCKED, and the model is told: {}", reason.trim());
        }
        Some(result) if result.is_error => {
            println!("   the CLI refused it itself: {}", result.text.trim());
        }
        Some(result) => println!("   gate: allowed; the tool returned {:?}", result.text.trim()),
        None => println!("   (no result reached the model)"),
    }
}
