//! `cargo xtask bench`, the typed-tools section: what harness-mcp costs Claude Code at start, and
//! what one tool call costs on the tool socket.
//!
//! Claude Code starts harness-mcp with every session and waits for its tool list before its
//! first request, so the figure is a whole process: spawn, read tools.json, answer the
//! `server/discover` probe, `initialize` and `tools/list`, timed from just before the spawn to the
//! `tools/list` reply, against `/bin/cat` echoing the same four lines (a spawn and the pipes,
//! nothing else), interleaved. Peak RSS is `VmHWM` after the handshake and one forwarded call,
//! read while the server still runs. The tool socket is timed in process: one client connection,
//! call after call of list_tasks through the socket to the scripted broker, against the same call
//! made directly with the broker client (the floor); then 64 clients at once.
//!
//! A missed target is printed as MISSED but does not fail the command; the numbers go into
//! `docs/performance.md` between this benchmark's own markers.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use harness_bus::{
    Backends, BrokerConfig, Capability, RunningToolSocket, ToolSocket, ToolSocketConfig, UnixBroker,
};
use harness_testkit::{BrokerAnswer, ScriptedBroker};
use harness_tools::{ResolvedInstance, tools_for};
use serde_json::json;

use crate::bench::{cargo, load_average, mib, target_dir, utc_now};
use crate::process;

const DOC: &str = "docs/performance.md";
const WARMUP_RUNS: usize = 20;
const RSS_SAMPLES: usize = 21;

const TARGET_START_MS: f64 = 10.0;
const TARGET_RSS_KIB: u64 = 8 * 1024;
const TARGET_ROUND_TRIP_US: f64 = 200.0;

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

/// Runs the typed-tools benchmark with `runs` timed starts of harness-mcp and of the floor.
pub(crate) fn run(root: &Path, runs: usize) -> Result<Vec<crate::bench::Row>> {
    let load_before = load_average();
    eprintln!("bench tools: building harness-mcp (release) ...");
    process::run_visible(cargo(root).args(["build", "--release", "-p", "harness-mcp-cli"]))?;
    process::run_visible(cargo(root).args([
        "bench",
        "-p",
        "harness-bus",
        "--bench",
        "round_trip",
        "--no-run",
    ]))?;
    let mcp = target_dir(root).join("release/harness-mcp");
    ensure!(mcp.is_file(), "{} is missing after the build", mcp.display());
    let fixture = Fixture::create(root)?;

    eprintln!("bench tools: {runs} starts each of harness-mcp and /bin/cat, interleaved ...");
    let (start, floor) = time_starts(&fixture, &mcp, runs)?;
    eprintln!("bench tools: peak RSS, {RSS_SAMPLES} runs ...");
    let rss =
        median_u64((0..RSS_SAMPLES).map(|_| peak_rss(&fixture, &mcp)).collect::<Result<_>>()?);
    eprintln!("bench tools: the tool socket's round trip and 64 clients (release bench) ...");
    let round_trip = round_trip_bench(root)?;
    let load_after = load_average();

    let report = Report { runs, start, floor, rss, round_trip, load_before, load_after };
    let table = report.table();
    println!("{table}");
    let missed = report.missed();
    if missed.is_empty() {
        eprintln!("bench tools: every target met");
    } else {
        eprintln!(
            "bench tools: MISSED: {} (recorded as measured; not a failure)",
            missed.join("; ")
        );
    }
    crate::bench::write_section(&root.join(DOC), "tools", &report.section(&table))?;
    eprintln!("bench tools: wrote {DOC}");
    Ok(report.rows())
}

/// A run directory: the pm fixture's tools.json, a scripted broker, and a tool socket.
struct Fixture {
    // Drop order: the socket first, then the broker, then the directory.
    socket: RunningToolSocket,
    /// Kept alive for the socket's calls.
    _broker: ScriptedBroker,
    dir: tempfile::TempDir,
}

impl Fixture {
    fn create(root: &Path) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("harness-bench-tools-").tempdir()?;
        let resolved = ResolvedInstance::load(&root.join("fixtures/resolved/pm.json"))?;
        let tools = tools_for(&resolved);
        std::fs::create_dir(dir.path().join("bundle"))?;
        std::fs::write(dir.path().join("bundle/tools.json"), tools.to_json())?;
        let broker = ScriptedBroker::start()?;
        let tasks: Vec<_> = (1..=20)
            .map(|n| json!({"ref": format!("T-{n}"), "title": format!("Task number {n}")}))
            .collect();
        broker.answer("tasks", BrokerAnswer::result(json!({"tasks": tasks, "total": 20})));
        let socket = ToolSocket::bind(ToolSocketConfig {
            path: dir.path().join("tools.sock"),
            tools,
            capability: Capability::new("cap-bench")?,
            backends: Backends::broker_only(Arc::new(broker_client(&broker))),
        })?
        .spawn()?;
        Ok(Self { socket, _broker: broker, dir })
    }

    fn mcp_command(&self, mcp: &Path) -> Command {
        let mut cmd = process::command(mcp);
        cmd.env_clear()
            .env("MOSAIC_BUNDLE", self.dir.path().join("bundle"))
            .env("MOSAIC_TOOLS_SOCK", self.socket.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        cmd
    }

    fn floor_command(&self) -> Command {
        let mut cmd = process::command("/bin/cat");
        cmd.env_clear().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        cmd
    }
}

fn broker_client(broker: &ScriptedBroker) -> UnixBroker {
    UnixBroker::new(BrokerConfig {
        socket: broker.socket().to_owned(),
        timeout: Duration::from_secs(10),
    })
}

/// Reads lines until one is a reply with `id`; fails on end of output.
fn read_until_id(reader: &mut BufReader<ChildStdout>, id: i64) -> Result<String> {
    let mut line = String::new();
    loop {
        line.clear();
        ensure!(reader.read_line(&mut line)? > 0, "the output ended before the reply to id {id}");
        let message: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if message["id"] == json!(id) {
            return Ok(line);
        }
    }
}

fn finish(mut child: Child) -> Result<()> {
    drop(child.stdin.take());
    let status = child.wait()?;
    ensure!(status.success(), "it exited with {status}");
    Ok(())
}

/// One start: spawn, write the handshake, read until the `tools/list` reply (or, for the floor,
/// the echo of its four lines).
fn one_start(cmd: &mut Command, floor: bool) -> Result<Duration> {
    let started = Instant::now();
    let mut child = process::spawn(cmd)?;
    child.stdin.as_mut().context("no stdin")?.write_all(HANDSHAKE.as_bytes())?;
    let mut reader = BufReader::new(child.stdout.take().context("no stdout")?);
    if floor {
        let mut line = String::new();
        for _ in 0..4 {
            line.clear();
            ensure!(reader.read_line(&mut line)? > 0, "cat ended early");
        }
    } else {
        let list = read_until_id(&mut reader, 1)?;
        ensure!(list.contains("\"list_tasks\""), "the tools/list reply lacks list_tasks: {list}");
    }
    let took = started.elapsed();
    finish(child)?;
    Ok(took)
}

fn time_starts(fixture: &Fixture, mcp: &Path, runs: usize) -> Result<(Samples, Samples)> {
    let (mut start, mut floor) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for run in 0..WARMUP_RUNS + runs {
        let order = if run % 2 == 0 { [false, true] } else { [true, false] };
        for is_floor in order {
            let took = if is_floor {
                one_start(&mut fixture.floor_command(), true)
            } else {
                one_start(&mut fixture.mcp_command(mcp), false)
            }
            .with_context(|| {
                format!("run {run} ({})", if is_floor { "floor" } else { "harness-mcp" })
            })?;
            if run >= WARMUP_RUNS {
                if is_floor { floor.push(took) } else { start.push(took) }
            }
        }
    }
    Ok((Samples::new(start), Samples::new(floor)))
}

/// `VmHWM` of harness-mcp after the handshake and one forwarded call, in KiB.
fn peak_rss(fixture: &Fixture, mcp: &Path) -> Result<u64> {
    let mut child = process::spawn(&mut fixture.mcp_command(mcp))?;
    let stdin = child.stdin.as_mut().context("no stdin")?;
    stdin.write_all(HANDSHAKE.as_bytes())?;
    stdin.write_all(CALL.as_bytes())?;
    let mut reader = BufReader::new(child.stdout.take().context("no stdout")?);
    let reply = read_until_id(&mut reader, 2)?;
    ensure!(
        reply.contains("T-20") && reply.contains("\"isError\":false"),
        "the call failed: {reply}"
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))?;
    let peak = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM line")?;
    finish(child)?;
    Ok(peak)
}

/// The round-trip bench's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RoundTrip {
    median_us: f64,
    p90_us: f64,
    direct_us: f64,
    direct_p90_us: f64,
    calls: usize,
    errors: usize,
    wall_ms: f64,
}

/// The round-trip bench's machine-readable line starts with this.
const ROUND_TRIP_RESULT: &str = "bench-result tools ";

/// Reads `round_trip_us=M p90_us=P direct_us=M p90_us=P calls=N errors=E wall_ms=W`.
fn parse_round_trip(rest: &str) -> Option<RoundTrip> {
    let values: Vec<&str> =
        rest.split_whitespace().map(|word| word.split_once('=').map_or("", |(_, v)| v)).collect();
    let [median, p90, direct, direct_p90, calls, errors, wall] = values.as_slice() else {
        return None;
    };
    Some(RoundTrip {
        median_us: median.parse().ok()?,
        p90_us: p90.parse().ok()?,
        direct_us: direct.parse().ok()?,
        direct_p90_us: direct_p90.parse().ok()?,
        calls: calls.parse().ok()?,
        errors: errors.parse().ok()?,
        wall_ms: wall.parse().ok()?,
    })
}

/// Runs the round-trip bench of harness-bus (release profile) and reads its line.
fn round_trip_bench(root: &Path) -> Result<RoundTrip> {
    let mut cmd = cargo(root);
    cmd.args(["bench", "--quiet", "-p", "harness-bus", "--bench", "round_trip"]);
    let output = process::run_captured(&mut cmd, Duration::from_secs(600))?;
    output
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix(ROUND_TRIP_RESULT))
        .and_then(parse_round_trip)
        .with_context(|| {
            format!(
                "`{}` printed no `{ROUND_TRIP_RESULT}…` line:\n{}",
                process::display(&cmd),
                output.stdout
            )
        })
}

/// Durations, sorted.
struct Samples(Vec<Duration>);

impl Samples {
    fn new(mut values: Vec<Duration>) -> Self {
        values.sort();
        Self(values)
    }

    /// Returns the nearest-rank quantile `q` in seconds.
    fn quantile(&self, q: f64) -> f64 {
        let rank = (q * self.0.len() as f64).ceil() as usize;
        self.0.get(rank.clamp(1, self.0.len().max(1)) - 1).map_or(f64::NAN, Duration::as_secs_f64)
    }
}

fn median_u64(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

struct Report {
    runs: usize,
    start: Samples,
    floor: Samples,
    rss: u64,
    round_trip: RoundTrip,
    load_before: String,
    load_after: String,
}

impl Report {
    /// The summary's rows.
    fn rows(&self) -> Vec<crate::bench::Row> {
        use crate::bench::Row;
        let start_ms = self.start.quantile(0.5) * 1e3;
        let floor_ms = self.floor.quantile(0.5) * 1e3;
        let rt = &self.round_trip;
        vec![
            Row::new(
                "tools",
                "harness-mcp, spawn to the tools/list reply",
                format!("{start_ms:.2} ms"),
                format!("`/bin/cat` echoing the handshake {floor_ms:.2} ms"),
                format!("{:.2}×", start_ms / floor_ms),
                format!("≤ {TARGET_START_MS} ms"),
                start_ms <= TARGET_START_MS,
            ),
            Row::new(
                "tools",
                "peak RSS of harness-mcp",
                mib(self.rss),
                "",
                "",
                format!("≤ {}", mib(TARGET_RSS_KIB)),
                self.rss <= TARGET_RSS_KIB,
            ),
            Row::new(
                "tools",
                "tool-socket round trip",
                format!("{:.1} µs", rt.median_us),
                format!("the broker straight {:.1} µs", rt.direct_us),
                format!("{:.2}×", rt.median_us / rt.direct_us),
                format!("≤ {TARGET_ROUND_TRIP_US} µs"),
                rt.median_us <= TARGET_ROUND_TRIP_US,
            ),
            Row::new(
                "tools",
                "64 concurrent clients",
                format!("{} calls in {:.1} ms", rt.calls, rt.wall_ms),
                "",
                "",
                "no error",
                rt.errors == 0,
            ),
        ]
    }

    fn missed(&self) -> Vec<String> {
        let mut missed = Vec::new();
        let start_ms = self.start.quantile(0.5) * 1e3;
        if start_ms > TARGET_START_MS {
            missed.push(format!("harness-mcp start {start_ms:.2} ms > {TARGET_START_MS} ms"));
        }
        if self.rss > TARGET_RSS_KIB {
            missed.push(format!("peak RSS {} > {}", mib(self.rss), mib(TARGET_RSS_KIB)));
        }
        let round_trip = self.round_trip.median_us;
        if round_trip > TARGET_ROUND_TRIP_US {
            missed.push(format!("round trip {round_trip:.0} µs > {TARGET_ROUND_TRIP_US} µs"));
        }
        if self.round_trip.errors > 0 {
            missed.push(format!("{} errors among 64 clients", self.round_trip.errors));
        }
        missed
    }

    fn table(&self) -> String {
        let verdict = |met: bool| if met { "pass" } else { "**MISSED**" };
        let ms = |s: &Samples, q| format!("{:.3} ms", s.quantile(q) * 1e3);
        let mut out = String::from(
            "| benchmark | median | p90 | floor / reference | target | result |\n\
             | --- | ---: | ---: | --- | --- | --- |\n",
        );
        let _ = writeln!(
            out,
            "| harness-mcp, spawn to the `tools/list` reply | {} | {} | `/bin/cat` echoing the \
             handshake: {} (p90 {}) | ≤ {TARGET_START_MS} ms | {} |",
            ms(&self.start, 0.5),
            ms(&self.start, 0.9),
            ms(&self.floor, 0.5),
            ms(&self.floor, 0.9),
            verdict(self.start.quantile(0.5) * 1e3 <= TARGET_START_MS)
        );
        let _ = writeln!(
            out,
            "| peak RSS of harness-mcp after the handshake and one call | {} | | | ≤ {} | {} |",
            mib(self.rss),
            mib(TARGET_RSS_KIB),
            verdict(self.rss <= TARGET_RSS_KIB)
        );
        let r = &self.round_trip;
        let _ = writeln!(
            out,
            "| tool-socket round trip, client → socket → scripted broker → client | {:.1} µs | \
             {:.1} µs | the broker client straight to the broker: {:.1} µs (p90 {:.1} µs) | \
             ≤ {TARGET_ROUND_TRIP_US} µs | {} |",
            r.median_us,
            r.p90_us,
            r.direct_us,
            r.direct_p90_us,
            verdict(r.median_us <= TARGET_ROUND_TRIP_US)
        );
        let _ = writeln!(
            out,
            "| 64 concurrent clients × 50 calls each | {} calls in {:.1} ms, {} errors | | | \
             no error | {} |",
            r.calls,
            r.wall_ms,
            r.errors,
            verdict(r.errors == 0)
        );
        out
    }

    fn section(&self, table: &str) -> String {
        format!(
            "## The typed tools: harness-mcp and the tool socket\n\
             \n\
             Reproduce with `cargo xtask bench` (`--runs N` sets the number of starts).\n\
             Measured {date}; the load average was {before} before and {after} after.\n\
             {runs} timed starts each of harness-mcp and the floor after {WARMUP_RUNS} warm-up \
             starts, interleaved; peak RSS is the median of {RSS_SAMPLES} runs; 5000 round trips \
             each through the socket and straight to the broker, alternating, after 200 warm-up \
             ones (`cargo bench -p harness-tools --bench round_trip`, release profile).\n\
             \n\
             {table}\n\
             {ROWS_EXPLAINED}",
            date = utc_now(),
            before = self.load_before,
            after = self.load_after,
            runs = self.runs,
        )
    }
}

const ROWS_EXPLAINED: &str = "\
What each row measures:

- **harness-mcp start.**
  From just before the spawn of `target/release/harness-mcp` (environment: `MOSAIC_BUNDLE` and
  `MOSAIC_TOOLS_SOCK` only; tools.json is the pm fixture's, 8 tools) to the moment its
  `tools/list` reply has been read.
  The four lines Claude Code 2.1.296 sends (`server/discover`, `initialize`,
  `notifications/initialized`, `tools/list`; CLIS.md §1.7) are written at once.
  The floor is `/bin/cat` fed the same four lines, timed until it has echoed them: a spawn and a
  pipe round trip with no work.
- **Peak RSS.**
  `VmHWM` from /proc while harness-mcp still runs, after the handshake and one `tools/call` of
  list_tasks forwarded to the tool socket and answered (20 tasks).
- **Tool-socket round trip.**
  `cargo bench -p harness-tools --bench round_trip`, in the release profile, in one process:
  one client connection to the tool socket sends `{\"tool\":\"list_tasks\",\"args\":{}}`
  and reads the reply; the socket checks the name and arguments, the broker client opens a
  connection to the scripted broker (which starts a thread per connection), and the reply (20
  tasks, compact JSON) comes back.
  The reference is the same broker call made directly with the broker client, so the difference
  is what the tool socket adds.
- **Concurrent clients.**
  64 threads each open a connection and make 50 calls; every reply must be `ok`.
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let samples = Samples::new((1..=10).rev().map(Duration::from_secs).collect());
        assert_eq!(samples.quantile(0.5), 5.0);
        assert_eq!(samples.quantile(0.9), 9.0);
    }

    #[test]
    fn the_round_trip_line_is_read() {
        let line = "bench-result tools round_trip_us=122.9 p90_us=153.2 direct_us=118.6 \
                    p90_us=135.0 calls=3200 errors=0 wall_ms=407.9";
        let parsed = parse_round_trip(line.strip_prefix(ROUND_TRIP_RESULT).unwrap()).unwrap();
        assert_eq!((parsed.median_us, parsed.calls, parsed.errors), (122.9, 3200, 0));
        assert_eq!(parse_round_trip("round_trip_us=1"), None);
    }

    #[test]
    fn the_handshake_is_four_lines_of_json() {
        let lines: Vec<serde_json::Value> =
            HANDSHAKE.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[3]["method"], "tools/list");
        let _: serde_json::Value = serde_json::from_str(CALL.trim_end()).unwrap();
    }
}
