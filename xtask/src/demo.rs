//! `cargo xtask demo`: the README's main job. On a fresh machine it installs what it needs,
//! builds the harness, and runs one whole session for each real CLI (Pi 0.85.1 and Claude Code
//! 2.1.296) through harness-runner, against the scripted broker and the scripted model on
//! loopback, then prints a readable transcript and keeps the run directory to look into.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use harness_testkit::{Cli, Endpoint, SessionOptions, SessionScenario, require_cli};

use crate::cargo::Cargo;
use crate::setup;

const LIMIT: Duration = Duration::from_secs(240);

const USAGE: &str = "usage: cargo xtask demo [--endpoint URL --model MODEL]  (with --endpoint, \
                     ANTHROPIC_API_KEY must hold the endpoint's key)";

pub(crate) fn run(root: &Path, args: &[&str]) -> Result<()> {
    let endpoint = match args {
        [] => None,
        ["--endpoint", url, "--model", model] | ["--model", model, "--endpoint", url] => {
            let api_key = std::env::var("ANTHROPIC_API_KEY")
                .ok()
                .filter(|key| !key.is_empty())
                .with_context(|| format!("--endpoint needs ANTHROPIC_API_KEY\n{USAGE}"))?;
            Some(Endpoint {
                base_url: url.trim_end_matches('/').to_owned(),
                model: (*model).to_owned(),
                api_key,
            })
        }
        _ => bail!("{USAGE}"),
    };
    setup::run(root)?;
    eprintln!("demo: building the install's binaries ...");
    let bin_dir = Cargo::locate(root)?.build_install_binaries(false)?;
    println!(
        "\nharness demo: one whole session for each real agent CLI, through harness-runner.\n\
         The host's broker and the model are scripted, on this machine only: no API key, no network.\n\
         Each session gets five messages: a typed tool call, a read outside the workspace, a reply\n\
         full of slop, a thank-you, and a turn whose model call fails."
    );
    let mut kept = Vec::new();
    for cli in [Cli::Pi, Cli::Claude] {
        kept.push(session(cli, &bin_dir, endpoint.clone())?);
    }
    println!("\nThe run directories are kept; look into them:");
    kept.iter().for_each(|dir| println!("  {}", dir.display()));
    Ok(())
}

fn session(cli: Cli, bin_dir: &Path, endpoint: Option<Endpoint>) -> Result<std::path::PathBuf> {
    let Some(paths) = require_cli(cli) else {
        bail!("{} is not installed although setup ran; see the line above", cli.name());
    };
    let scripted = endpoint.is_none();
    let options = SessionOptions { endpoint, ..SessionOptions::from_checkout(bin_dir)? };
    let scenario =
        SessionScenario::with_options(&paths, options).context("cannot lay out the session")?;
    let turns = scenario.script_standard();
    let title = match cli {
        Cli::Pi => "Pi 0.85.1 (the gate in its extension, typed tools registered by it)",
        Cli::Claude => {
            "Claude Code 2.1.296 (the gate as its PreToolUse hook, typed tools over MCP)"
        }
    };
    println!(
        "\n══ {title} ══\nrun directory  {}\nworkspace      {}\nsecret beside  {}",
        scenario.run_dir().display(),
        scenario.workspace().display(),
        scenario.secret().display()
    );
    let mut child = scenario.spawn_runner(&bin_dir.join("harness-runner"))?;
    wait(&mut child, LIMIT, "the session did not finish", |child| match child.try_wait()? {
        Some(status) => bail!("the runner ended early ({status})"),
        None => Ok(scenario.broker().calls_of("message.send").len() >= turns.len()),
    })?;
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id())?).context("no pid")?;
    rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
    let stopped = |child: &mut Child| Ok(child.try_wait()?.is_some());
    wait(&mut child, Duration::from_secs(20), "the runner did not stop on SIGTERM", stopped)?;
    let output = child.wait_with_output()?;
    print!("{}", scenario.transcript(&turns, scripted));
    let released = scenario.broker().calls_of("role.release").len();
    println!(
        "stop           SIGTERM → role.release ({released} call) → exit {}",
        output.status.code().map_or_else(|| "by signal".to_owned(), |code| code.to_string())
    );
    if output.status.code() != Some(0) {
        bail!("the runner did not stop cleanly: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(scenario.keep())
}

/// Polls `done` until it holds, killing the runner if it does not within `limit`.
fn wait(
    child: &mut Child,
    limit: Duration,
    what: &str,
    mut done: impl FnMut(&mut Child) -> Result<bool>,
) -> Result<()> {
    let start = Instant::now();
    while !done(child)? {
        if start.elapsed() > limit {
            let _ = child.kill();
            bail!("{what} within {limit:?}; it was killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
