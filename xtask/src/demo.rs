//! `cargo xtask demo`: the README's main job. On a fresh machine it installs what it needs,
//! builds the harness, and runs one whole session for each real CLI (Pi 0.85.1 and Claude Code
//! 2.1.296) through harness-runner, against the scripted broker and the scripted model on
//! loopback, then prints a readable transcript and keeps the run directory to look into.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use harness_testkit::{Cli, Endpoint, ScriptedTurn, SessionOptions, SessionScenario, require_cli};

use crate::cargo::Cargo;
use crate::setup;

const LIMIT: Duration = Duration::from_secs(240);
const PACKAGES: [&str; 4] =
    ["harness-gate-cli", "harness-mcp-cli", "harness-unslop-cli", "harness-runner-cli"];

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
    eprintln!("demo: building harness-gate, harness-mcp, harness-unslop and harness-runner ...");
    let bin_dir = Cargo::locate(root)?.build_binaries(&PACKAGES, false)?;
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
    let options = SessionOptions { endpoint, ..SessionOptions::from_checkout(bin_dir) };
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
    print_transcript(&scenario, &turns, scripted);
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

/// Shortens `text` to one line of at most `max` characters.
fn line(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ⏎ ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max).collect::<String>())
    }
}

fn print_transcript(scenario: &SessionScenario, turns: &[ScriptedTurn], scripted: bool) {
    let sends = scenario.broker().calls_of("message.send");
    let tasks = scenario.broker().calls_of("tasks");
    let calls = scenario.model().messages_calls();
    let results: Vec<_> = calls.iter().flat_map(|call| call.tool_results()).collect();
    // A turn got the notice if, in a request of that turn, it stands after the turn's message.
    let noticed: Vec<bool> = turns
        .iter()
        .map(|turn| {
            calls.iter().any(|call| {
                let messages: Vec<String> =
                    call.messages().iter().map(ToString::to_string).collect();
                let Some(at) = messages.iter().rposition(|m| m.contains(&turn.text)) else {
                    return false;
                };
                let later_turn = turns.iter().any(|other| {
                    other.id > turn.id && messages.iter().any(|m| m.contains(&other.text))
                });
                !later_turn
                    && messages[at..]
                        .iter()
                        .any(|m| m.contains("Correction notice from the unslop check"))
            })
        })
        .collect();
    for (index, turn) in turns.iter().enumerate() {
        println!("\n[{}] acme-cos → the session: {}", turn.id, turn.text);
        // A real model chooses its own tool calls; the broker's log shows the typed ones.
        let runner_verbs = ["role.claim", "role.release", "message.read", "message.send", "state"];
        let broker_calls = scenario.broker().calls();
        let typed = broker_calls.iter().filter(|c| !runner_verbs.contains(&c.verb.as_str()));
        for call in typed.filter(|_| !scripted && index == 0) {
            println!(
                "     broker     {} {} (a typed tool call of the session)",
                call.verb, call.args
            );
        }
        for (id, tool, input) in turn.tool_calls.iter().filter(|_| scripted) {
            println!("     tool call  {tool} {input}");
            if tool.ends_with("list_tasks") {
                for call in &tasks {
                    println!(
                        "       broker   {} {} (with the runner's capability, never the agent's)",
                        call.verb, call.args
                    );
                }
            }
            match results.iter().find(|result| &result.tool_use_id == id) {
                Some(result)
                    if result.is_error && result.text.contains("harness-gate: blocked") =>
                {
                    let reason = result
                        .text
                        .find("harness-gate: ")
                        .map_or(result.text.as_str(), |at| &result.text[at..]);
                    println!(
                        "       gate     BLOCKED; the model is told: {}",
                        line(reason.trim(), 160)
                    );
                }
                Some(result) => println!("       result   {}", line(&result.text, 120)),
                None => println!("       result   (none reached the model)"),
            }
        }
        if noticed.get(index).copied().unwrap_or(false) {
            println!("     notice     this turn's request carried the unslop correction notice");
        }
        match sends.get(index) {
            Some(send) => {
                let text = send.args["text"].as_str().unwrap_or_default();
                let (answer, note) =
                    text.split_once("\n\nunslop: ").map_or((text, None), |(a, n)| (a, Some(n)));
                println!(
                    "     RESULT     → {}: {}",
                    send.args["to"].as_str().unwrap_or("?"),
                    line(answer, 160)
                );
                if let Some(note) = note {
                    println!("     note       unslop: {}", line(note, 160));
                }
            }
            None => println!("     RESULT     (none sent)"),
        }
    }
    let log = std::fs::read_to_string(scenario.run_dir().join("unslop.jsonl")).unwrap_or_default();
    let count = |event: &str| log.matches(&format!("\"event\":\"{event}\"")).count();
    println!(
        "\nunslop log     {} checked, {} flagged, {} notice injected (run/unslop.jsonl)",
        count("checked"),
        count("flagged"),
        count("notice_injected")
    );
}
