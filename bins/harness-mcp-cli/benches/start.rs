//! `cargo bench -p harness-mcp-cli --bench start`: what harness-mcp costs Claude Code at start.
//!
//! Claude Code starts harness-mcp with every session and waits for its tool list before its first
//! request, so the figure is a whole process: spawn, read tools.json, answer the
//! `server/discover` probe, `initialize` and `tools/list`, timed from just before the spawn to the
//! `tools/list` reply, against `/bin/cat` echoing the same four lines (a spawn and the pipes,
//! nothing else), interleaved. Peak RSS is `VmHWM` after the handshake and one forwarded call,
//! read while the server still runs.
//!
//! Prints a Markdown report and a `bench-row` line per target for `cargo xtask bench`. Targets:
//! at most 10 ms to the tool list, at most 8 MiB peak RSS.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![expect(clippy::disallowed_methods, reason = "the benchmark spawns the processes it times")]

use std::error::Error;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_benchkit::{Memory, Row, Samples, Unit, WARMUP_RUNS, median, runs};
use harness_bus::{Backends, BrokerConfig, Capability, ToolSocket, ToolSocketConfig, UnixBroker};
use harness_testkit::{BrokerAnswer, ScriptedBroker};
use harness_tools::{ResolvedInstance, tools_for};
use serde_json::json;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const RSS_SAMPLES: usize = 21;
const TARGET_START_MS: f64 = 10.0;
const TARGET_RSS_KIB: f64 = 8.0 * 1024.0;
const HANDSHAKE: &str = concat!(
    r#"{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"claude-code","title":"Claude Code","version":"2.1.296"},"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}}}}}"#,
    "\n",
    r#"{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}},"clientInfo":{"name":"claude-code","version":"2.1.296"}},"jsonrpc":"2.0","id":0}"#,
    "\n",
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    "\n",
    r#"{"method":"tools/list","jsonrpc":"2.0","id":1}"#,
    "\n",
);
const CALL: &str = concat!(
    r#"{"method":"tools/call","params":{"name":"list_tasks","arguments":{}},"jsonrpc":"2.0","id":2}"#,
    "\n"
);

fn main() -> Result<()> {
    let mcp = Path::new(env!("CARGO_BIN_EXE_harness-mcp"));
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let runs = runs();
    let dir = tempfile::Builder::new().prefix("harness-bench-mcp-").tempdir()?;
    let resolved = ResolvedInstance::load(&workspace.join("fixtures/resolved/pm.json"))?;
    let tools = tools_for(&resolved);
    std::fs::create_dir(dir.path().join("bundle"))?;
    std::fs::write(dir.path().join("bundle/tools.json"), tools.to_json())?;
    let broker = ScriptedBroker::start()?;
    let tasks: Vec<_> = (1..=20)
        .map(|n| json!({"ref": format!("T-{n}"), "title": format!("Task number {n}")}))
        .collect();
    broker.answer("tasks", BrokerAnswer::result(json!({"tasks": tasks, "total": 20})));
    let client = UnixBroker::new(BrokerConfig {
        socket: broker.socket().to_owned(),
        timeout: Duration::from_secs(10),
    });
    let socket = ToolSocket::bind(ToolSocketConfig {
        path: dir.path().join("tools.sock"),
        tools,
        capability: Capability::new("cap-bench")?,
        backends: Backends::broker_only(Arc::new(client)),
    })?
    .spawn()?;
    let server = || {
        let mut cmd = Command::new(mcp);
        cmd.env_clear()
            .env("MOSAIC_BUNDLE", dir.path().join("bundle"))
            .env("MOSAIC_TOOLS_SOCK", socket.path());
        cmd
    };

    eprintln!("bench start: {runs} starts each of harness-mcp and /bin/cat, interleaved ...");
    let (mut start, mut floor) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for run in 0..WARMUP_RUNS + runs {
        let order = if run % 2 == 0 { [false, true] } else { [true, false] };
        for is_floor in order {
            let took = if is_floor {
                one_start(Command::new("/bin/cat").env_clear(), true)?
            } else {
                one_start(&mut server(), false)?
            };
            if run >= WARMUP_RUNS {
                if is_floor { floor.push(took) } else { start.push(took) }
            }
        }
    }
    let (start, floor) = (Samples::new(start), Samples::new(floor));
    eprintln!("bench start: peak RSS, {RSS_SAMPLES} runs ...");
    let rss = median((0..RSS_SAMPLES).map(|_| peak_rss(&mut server())).collect::<Result<_>>()?);
    drop(socket);

    println!(
        "{runs} timed starts each after {WARMUP_RUNS} warm-up starts, interleaved; peak RSS is \
         the median of {RSS_SAMPLES} runs.\n"
    );
    println!("| benchmark | median | p90 | floor |\n| --- | ---: | ---: | --- |");
    println!(
        "| harness-mcp, spawn to the `tools/list` reply | {:.3} ms | {:.3} ms | `/bin/cat` \
         echoing the handshake: {:.3} ms (p90 {:.3} ms) |",
        start.median() * 1e3,
        start.quantile(0.9) * 1e3,
        floor.median() * 1e3,
        floor.quantile(0.9) * 1e3
    );
    println!(
        "| peak RSS of harness-mcp after the handshake and one call | {:.2} MiB | | |\n",
        rss / 1024.0
    );
    println!("{EXPLAINED}");
    let start_row = ("tools", "harness-mcp, spawn to the tools/list reply");
    let floor_ms = ("`/bin/cat` echoing the handshake", floor.median() * 1e3);
    let start_ms = start.median() * 1e3;
    println!("{}", Row::at_most(start_row, Unit::Ms, start_ms, Some(floor_ms), TARGET_START_MS));
    let rss_row = ("tools", "peak RSS of harness-mcp");
    println!("{}", Row::at_most(rss_row, Unit::Kib, rss, None, TARGET_RSS_KIB));
    Ok(())
}

const EXPLAINED: &str = "\
What is measured:

- **Start**: from just before the spawn of harness-mcp (environment: `MOSAIC_BUNDLE` and
  `MOSAIC_TOOLS_SOCK` only; tools.json is the pm fixture's) to the moment its `tools/list` reply
  has been read. The four lines Claude Code 2.1.296 sends (`server/discover`, `initialize`,
  `notifications/initialized`, `tools/list`) are written at once. The floor is `/bin/cat` fed the
  same four lines, timed until it has echoed them: a spawn and a pipe round trip with no work.
- **Peak RSS**: `VmHWM` from /proc while harness-mcp still runs, after the handshake and one
  `tools/call` of list_tasks forwarded to the tool socket and answered (20 tasks).";

/// Reads lines until one is a reply with `id`; fails on end of output.
fn read_until_id(reader: &mut BufReader<ChildStdout>, id: i64) -> Result<String> {
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(format!("the output ended before the reply to id {id}").into());
        }
        let message: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if message["id"] == json!(id) {
            return Ok(line);
        }
    }
}

fn spawn(cmd: &mut Command) -> Result<(Child, BufReader<ChildStdout>)> {
    let mut child =
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    Ok((child, BufReader::new(stdout)))
}

fn finish(mut child: Child) -> Result<()> {
    drop(child.stdin.take());
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("it exited with {status}").into());
    }
    Ok(())
}

/// One start: spawn, write the handshake, read until the `tools/list` reply (or, for the floor,
/// the echo of its four lines); returns seconds.
fn one_start(cmd: &mut Command, floor: bool) -> Result<f64> {
    let started = Instant::now();
    let (mut child, mut reader) = spawn(cmd)?;
    child.stdin.as_mut().ok_or("no stdin")?.write_all(HANDSHAKE.as_bytes())?;
    if floor {
        let mut line = String::new();
        for _ in 0..4 {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Err("cat ended early".into());
            }
        }
    } else {
        let list = read_until_id(&mut reader, 1)?;
        if !list.contains("\"list_tasks\"") {
            return Err(format!("the tools/list reply lacks list_tasks: {list}").into());
        }
    }
    let took = started.elapsed().as_secs_f64();
    finish(child)?;
    Ok(took)
}

/// `VmHWM` of harness-mcp after the handshake and one forwarded call, in KiB.
fn peak_rss(cmd: &mut Command) -> Result<f64> {
    let (mut child, mut reader) = spawn(cmd)?;
    let stdin = child.stdin.as_mut().ok_or("no stdin")?;
    stdin.write_all(HANDSHAKE.as_bytes())?;
    stdin.write_all(CALL.as_bytes())?;
    let reply = read_until_id(&mut reader, 2)?;
    if !reply.contains("T-20") || !reply.contains("\"isError\":false") {
        return Err(format!("the call failed: {reply}").into());
    }
    let peak = Memory::of(child.id())?.peak;
    finish(child)?;
    Ok(peak as f64)
}
