//! `cargo bench -p harness-runner-cli --bench runner`: the release harness-runner idle (its RSS
//! once it polls), one typed tool call through its tool socket against the same call made straight
//! to the broker (the floor, interleaved), and 100 runners started and stopped in a row, after
//! which no process, socket or file of theirs may be left.
//!
//! The run directory is harness-testkit's `SessionScenario` (a Pi bundle of the pm fixture)
//! against the scripted broker; no turn runs. Prints a Markdown report and a `bench-row` line per
//! target for `cargo xtask bench`. Targets: idle RSS at most 4 MiB, a tool call adding at most
//! 200 µs, nothing left behind.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::error::Error;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use harness_benchkit::{Memory, Row, Unit, binary_beside, median};
use harness_bus::{Broker, BrokerConfig, Capability, UnixBroker};
use harness_testkit::{BrokerAnswer, Cli, SESSION_CAP, SessionScenario, require_cli};
use harness_tools::Verb;
use serde_json::json;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const CALLS: usize = 500;
const WARMUP: usize = 20;
const CYCLES: usize = 100;
const TARGET_RSS_KIB: f64 = 4.0 * 1024.0;
const TARGET_ADDED_US: f64 = 200.0;
/// What may be in the run directory after the runners stopped.
const KEPT: [&str; 7] =
    ["run.json", "bundle", "session", "turns", "unslop.jsonl", "state", "runner.lock"];

fn main() -> Result<()> {
    let runner = Path::new(env!("CARGO_BIN_EXE_harness-runner"));
    for sibling in ["harness-gate", "harness-mcp", "harness-unslop"] {
        binary_beside(env!("CARGO_BIN_EXE_harness-runner"), sibling)?;
    }
    let bin = runner.parent().ok_or("the runner has no directory")?;
    let pi = require_cli(Cli::Pi).ok_or("Pi is not installed; run cargo xtask setup")?;
    let scenario = SessionScenario::new(&pi, bin)?;
    scenario.broker().answer(
        "tasks",
        BrokerAnswer::result(json!({"tasks": [{"ref": "web-1", "title": "Ship"}], "total": 1})),
    );

    eprintln!("bench runner: idle RSS ...");
    let child = start(&scenario, runner)?;
    std::thread::sleep(Duration::from_millis(300));
    let idle = Memory::of(child.id())?;
    stop(child)?;

    eprintln!("bench runner: {CALLS} tool calls through tools.sock and straight to the broker ...");
    let child = start(&scenario, runner)?;
    let socket = scenario.run_dir().join("tools.sock");
    let broker = UnixBroker::new(BrokerConfig {
        socket: scenario.broker().socket().to_path_buf(),
        timeout: Duration::from_secs(10),
    });
    let cap = Capability::new(SESSION_CAP)?;
    let args = json!({"done": false, "limit": 50, "descriptions": false});
    let time_socket = || -> Result<f64> {
        let started = Instant::now();
        let mut stream = UnixStream::connect(&socket)?;
        stream.write_all(b"{\"tool\":\"list_tasks\",\"args\":{}}\n")?;
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line)?;
        if !line.contains("\"ok\":true") {
            return Err(format!("the tool call failed: {line}").into());
        }
        Ok(started.elapsed().as_secs_f64() * 1e6)
    };
    let time_direct = || -> Result<f64> {
        let started = Instant::now();
        broker.call(&cap, Verb::Tasks, &args)?;
        Ok(started.elapsed().as_secs_f64() * 1e6)
    };
    let (mut through, mut direct) = (Vec::with_capacity(CALLS), Vec::with_capacity(CALLS));
    for round in 0..WARMUP + CALLS {
        // Take turns going first, so that noise hits both alike.
        let (a, b) = if round % 2 == 0 {
            (time_socket()?, time_direct()?)
        } else {
            let b = time_direct()?;
            (time_socket()?, b)
        };
        if round >= WARMUP {
            through.push(a);
            direct.push(b);
        }
    }
    stop(child)?;
    let (through, direct) = (median(through), median(direct));

    eprintln!("bench runner: {CYCLES} runners started and stopped in a row ...");
    let started = Instant::now();
    for _ in 0..CYCLES {
        stop(start(&scenario, runner)?)?;
    }
    let cycle_ms = started.elapsed().as_secs_f64() * 1e3 / CYCLES as f64;
    let leftovers = leftovers(scenario.run_dir())?;

    println!(
        "| benchmark | median | floor / reference | result |\n| --- | ---: | --- | ---: |\n\
         | idle RSS, once the runner polls | {:.2} MiB | peak {:.2} MiB | anonymous {:.2} MiB, file-backed (code, shared by every runner) {:.2} MiB |\n\
         | list_tasks through `tools.sock` (runner → broker) | {through:.1} µs | straight to the \
         broker {direct:.1} µs | adds {:.1} µs |\n\
         | {CYCLES} runners started and stopped in a row | {cycle_ms:.1} ms per start and stop | \
         | {} left behind |\n",
        idle.rss as f64 / 1024.0,
        idle.peak as f64 / 1024.0,
        idle.anon as f64 / 1024.0,
        idle.file as f64 / 1024.0,
        through - direct,
        if leftovers.is_empty() { "nothing".to_owned() } else { leftovers.join(", ") },
    );
    println!(
        "Each start waits for the runner's first `message.read`; each stop is SIGTERM and the \
         wait for exit 0 (`role.release` included). After the {CYCLES} cycles no process whose \
         command line names the run directory is alive, `tools.sock` is gone, and the run \
         directory holds only {}. The tool calls alternate with the direct calls ({CALLS} each, \
         after {WARMUP} warm-up), each on a new connection, as the MCP server and the Pi \
         extension make them.",
        KEPT.map(|name| format!("`{name}`")).join(", ")
    );
    let idle_row = ("runner", "idle RSS");
    println!("{}", Row::at_most(idle_row, Unit::Kib, idle.rss as f64, None, TARGET_RSS_KIB));
    let call_row = ("runner", "a typed tool call through tools.sock");
    let floor = ("the broker straight", direct);
    println!("{}", Row::added(call_row, Unit::Us, through, floor, TARGET_ADDED_US));
    let (cycles_row, left) = (("runner", "100 runners started and stopped"), leftovers.len());
    let median = format!("{cycle_ms:.1} ms each");
    let outcome = format!("{left} left behind");
    println!("{}", Row::check(cycles_row, median, outcome, "nothing left behind", left == 0));
    Ok(())
}

fn start(scenario: &SessionScenario, runner: &Path) -> Result<Child> {
    let polls = scenario.broker().calls_of("message.read").len();
    let mut child = scenario.spawn_runner(runner)?;
    let started = Instant::now();
    while scenario.broker().calls_of("message.read").len() == polls {
        if let Some(status) = child.try_wait()? {
            return Err(format!("the runner exited ({status}) before polling").into());
        }
        if started.elapsed() > Duration::from_secs(20) {
            return Err("the runner did not poll in 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(child)
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

/// What the runners left: live processes naming the run directory, unexpected files.
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
        if !KEPT.contains(&name.as_str()) {
            found.push(name);
        }
    }
    Ok(found)
}
