//! `cargo xtask bench`, the runner section: the release harness-runner idle (its RSS once it
//! polls), one typed tool call through its tool socket against the same call made straight to
//! the broker (the floor, interleaved), and 100 runners started and stopped in a row, after
//! which no process, socket or file of theirs may be left.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use harness_bus::{Broker, BrokerConfig, Capability, UnixBroker};
use harness_testkit::{BrokerAnswer, Cli, SESSION_CAP, SessionScenario, require_cli};
use harness_tools::Verb;
use serde_json::json;

use crate::bench::{Row, median_f64, rss_kib, write_section};
use crate::process;

const CALLS: usize = 500;
const CYCLES: usize = 100;
const TARGET_RSS_KIB: u64 = 4 * 1024;
const TARGET_ADDED_US: f64 = 200.0;

pub(crate) fn run(root: &Path) -> Result<Vec<Row>> {
    eprintln!("bench runner: building the release binaries ...");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = process::command(cargo);
    build.current_dir(root).args(["build", "--release", "--quiet"]);
    for package in
        ["harness-runner-cli", "harness-gate-cli", "harness-mcp-cli", "harness-unslop-cli"]
    {
        build.args(["-p", package]);
    }
    process::run_visible(&mut build)?;
    let bin = root.join("target/release");
    let runner = bin.join("harness-runner");
    let pi = require_cli(Cli::Pi).context("Pi is not installed; run cargo xtask setup")?;
    let scenario = SessionScenario::new(&pi, &bin)?;
    scenario.broker().answer(
        "tasks",
        BrokerAnswer::result(json!({"tasks": [{"ref": "web-1", "title": "Ship"}], "total": 1})),
    );

    // Idle RSS.
    let child = start(&scenario, &runner)?;
    std::thread::sleep(Duration::from_millis(300));
    let (rss, hwm) = rss_kib(child.id())?;
    stop(child)?;

    // A typed tool call through the runner's socket, against the broker straight.
    let child = start(&scenario, &runner)?;
    let socket = scenario.run_dir().join("tools.sock");
    let broker = UnixBroker::new(BrokerConfig {
        socket: scenario.broker().socket().to_path_buf(),
        timeout: Duration::from_secs(10),
    });
    let cap = Capability::new(SESSION_CAP).context("capability")?;
    let args = json!({"done": false, "limit": 50, "descriptions": false});
    let (mut through, mut direct) = (Vec::with_capacity(CALLS), Vec::with_capacity(CALLS));
    for round in 0..CALLS + 20 {
        let time_socket = || -> Result<f64> {
            let start = Instant::now();
            let mut stream = UnixStream::connect(&socket)?;
            stream.write_all(b"{\"tool\":\"list_tasks\",\"args\":{}}\n")?;
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line)?;
            ensure!(line.contains("\"ok\":true"), "the tool call failed: {line}");
            Ok(start.elapsed().as_secs_f64() * 1e6)
        };
        let time_direct = || -> Result<f64> {
            let start = Instant::now();
            broker.call(&cap, Verb::Tasks, &args).map_err(|error| anyhow::anyhow!("{error}"))?;
            Ok(start.elapsed().as_secs_f64() * 1e6)
        };
        let (a, b) = if round % 2 == 0 {
            (time_socket()?, time_direct()?)
        } else {
            let b = time_direct()?;
            (time_socket()?, b)
        };
        if round >= 20 {
            through.push(a);
            direct.push(b);
        }
    }
    stop(child)?;
    let (through, direct) = (median_f64(through), median_f64(direct));
    let added = through - direct;

    // 100 runners started and stopped in a row.
    let started = Instant::now();
    for _ in 0..CYCLES {
        let child = start(&scenario, &runner)?;
        stop(child)?;
    }
    let cycle_ms = started.elapsed().as_secs_f64() * 1e3 / CYCLES as f64;
    let leftovers = leftovers(scenario.run_dir())?;

    let verdict = |ok: bool| if ok { "pass" } else { "MISSED" };
    let section = format!(
        "## The runner\n\n\
         Reproduce with `cargo xtask bench`. The release `harness-runner` on a run directory built by \
         harness-testkit's `SessionScenario` (a Pi bundle of the pm fixture), against the scripted broker.\n\n\
         | benchmark | median | floor / reference | result | target | verdict |\n\
         | --- | ---: | --- | ---: | --- | --- |\n\
         | idle RSS, once the runner polls | {:.2} MiB | peak {:.2} MiB | | ≤ 4 MiB | {} |\n\
         | list_tasks through `tools.sock` (runner → broker) | {through:.1} µs | straight to the broker {direct:.1} µs | adds {added:.1} µs | ≤ 200 µs added | {} |\n\
         | {CYCLES} runners started and stopped in a row | {cycle_ms:.1} ms per start and stop | | {} left behind | nothing left | {} |\n\n\
         Each start waits for the runner's first `message.read`; each stop is SIGTERM and the wait for exit 0 \
         (`role.release` included). After the {CYCLES} cycles no process whose command line names the run \
         directory is alive, `tools.sock` is gone, and the run directory holds only `run.json`, `bundle/`, \
         `session/`, `turns/`, `tmp/`, the runner state `state/` and the `runner.lock` file. The tool calls alternate with the direct calls ({CALLS} each, after 20 \
         warm-up), each on a new connection, as the MCP server and the Pi extension make them.\n",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0,
        verdict(rss <= TARGET_RSS_KIB),
        verdict(added <= TARGET_ADDED_US),
        if leftovers.is_empty() { "nothing".to_owned() } else { leftovers.join(", ") },
        verdict(leftovers.is_empty()),
    );
    eprintln!(
        "bench runner: idle RSS {rss} KiB, tool call adds {added:.1} µs ({through:.1} vs {direct:.1}), \
         {cycle_ms:.1} ms per start/stop, leftovers: {leftovers:?}"
    );
    write_section(&Path::new(root).join("docs/performance.md"), "runner", &section)?;
    Ok(vec![
        Row::new(
            "runner",
            "idle RSS",
            format!("{:.2} MiB", rss as f64 / 1024.0),
            "",
            "",
            "≤ 4 MiB",
            rss <= TARGET_RSS_KIB,
        ),
        Row::new(
            "runner",
            "a typed tool call through tools.sock",
            format!("{through:.1} µs"),
            format!("the broker straight {direct:.1} µs"),
            format!("+{added:.1} µs"),
            "≤ +200 µs",
            added <= TARGET_ADDED_US,
        ),
        Row::new(
            "runner",
            "100 runners started and stopped",
            format!("{cycle_ms:.1} ms each"),
            "",
            "",
            "nothing left behind",
            leftovers.is_empty(),
        ),
    ])
}

fn start(scenario: &SessionScenario, runner: &Path) -> Result<Child> {
    let polls = scenario.broker().calls_of("message.read").len();
    let mut child = scenario.spawn_runner(runner)?;
    let start = Instant::now();
    while scenario.broker().calls_of("message.read").len() == polls {
        if let Some(status) = child.try_wait()? {
            bail!("the runner exited ({status}) before polling");
        }
        ensure!(start.elapsed() < Duration::from_secs(20), "the runner did not poll in 20 s");
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(child)
}

fn stop(mut child: Child) -> Result<()> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id())?).context("pid")?;
    rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
    let status = child.wait()?;
    ensure!(status.code() == Some(0), "the runner stopped with {status}");
    Ok(())
}

/// What the runners left: live processes naming the run directory, the socket, unexpected files.
fn leftovers(run: &Path) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let needle = run.display().to_string();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&needle) {
            found.push(format!("process {}", entry.file_name().to_string_lossy()));
        }
    }
    for entry in std::fs::read_dir(run)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !["run.json", "bundle", "session", "turns", "tmp", "state", "runner.lock"]
            .contains(&name.as_str())
        {
            found.push(PathBuf::from(&name).display().to_string());
        }
    }
    Ok(found)
}
