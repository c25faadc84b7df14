//! `cargo bench -p harness-runner-cli --bench load`: the release harness-runner under 64
//! concurrent typed tool calls, 10000 sequential ones with its memory read before and after, and
//! 50 runners live at once on this machine, each claiming, serving and stopping cleanly.
//!
//! Every runner gets a run directory of its own with a Pi bundle of the assistant fixture built by
//! harness-bundle against the checkout's install layout (no turn runs, so no CLI is needed), its
//! own capability, and the one scripted broker all of them share. A failed call, a lost call, a
//! runner that does not exit 0 or anything left behind fails the bench. Prints a Markdown report
//! and a `bench-row` line per target for `cargo xtask bench`. Targets: a burst of 64 concurrent
//! calls no slower than the same 64 in a row, at most 512 KiB of growth over the sequential calls,
//! all 50 runners clean.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![expect(clippy::disallowed_methods, reason = "the benchmark spawns the runners it measures")]

use std::error::Error;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use harness_adapters::{InstallLayout, module};
use harness_benchkit::{Memory, Row, Unit, binary_beside, median};
use harness_bundle::{BundleRequest, Route, SessionInfo, build_bundle};
use harness_testkit::{BrokerAnswer, ScriptedBroker};
use harness_tools::ResolvedInstance;
use serde_json::json;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

macro_rules! ensure {
    ($cond:expr, $($message:tt)+) => {
        if !$cond {
            return Err(format!($($message)+).into());
        }
    };
}

const CONCURRENT: usize = 64;
const BURSTS: usize = 20;
const SEQUENTIAL: usize = 10_000;
const WARMUP: usize = 200;
const RUNNERS: usize = 50;
const TARGET_BURST_RATIO: f64 = 1.0;
const TARGET_GROWTH_KIB: u64 = 512;

fn main() -> Result<()> {
    let runner = env!("CARGO_BIN_EXE_harness-runner");
    for sibling in ["harness-gate", "harness-mcp", "harness-unslop"] {
        binary_beside(runner, sibling)?;
    }
    let bin = Path::new(runner).parent().ok_or("the runner has no directory")?;
    // Canonical: the install layout must be a normal path (no `..`).
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize()?;
    let world = World::new(&root, bin)?;

    eprintln!("bench load: {BURSTS} bursts of {CONCURRENT} concurrent calls, and in a row ...");
    let first = world.start(0)?;
    let socket = world.runs[0].join("tools.sock");
    let (mut bursts, mut rows) = (Vec::with_capacity(BURSTS), Vec::with_capacity(BURSTS));
    for burst in 0..BURSTS {
        bursts.push(concurrent_burst(&socket, burst)?);
        let started = Instant::now();
        for call in 0..CONCURRENT {
            tool_call(&socket, &format!("row-{burst}-{call}"))?;
        }
        rows.push(started.elapsed().as_secs_f64() * 1e3);
    }
    world.each_once("burst-", BURSTS * CONCURRENT)?;
    world.each_once("row-", BURSTS * CONCURRENT)?;
    let (burst_ms, row_ms) = (median(bursts), median(rows));

    eprintln!("bench load: {SEQUENTIAL} sequential calls ...");
    let pid = first.id();
    let mut latencies = Vec::with_capacity(SEQUENTIAL);
    for call in 0..WARMUP {
        tool_call(&socket, &format!("warm-{call}"))?;
    }
    let before = Memory::of(pid)?.rss;
    for call in 0..SEQUENTIAL {
        let started = Instant::now();
        tool_call(&socket, &format!("seq-{call}"))?;
        latencies.push(started.elapsed().as_secs_f64() * 1e6);
    }
    let after = Memory::of(pid)?;
    world.each_once("seq-", SEQUENTIAL)?;
    let growth = after.rss.saturating_sub(before);
    let sequential_us = median(latencies);
    stop(first)?;
    world.broker_clear_check(0)?;

    eprintln!("bench load: {RUNNERS} runners at once ...");
    let started = Instant::now();
    let mut children = Vec::with_capacity(RUNNERS);
    for index in 0..RUNNERS {
        children.push(world.spawn(index)?);
    }
    for (index, child) in children.iter_mut().enumerate() {
        world.wait_polling(index, child)?;
    }
    let all_polling_ms = started.elapsed().as_secs_f64() * 1e3;
    let rss: Vec<f64> = children
        .iter()
        .map(|child| Ok(Memory::of(child.id())?.rss as f64))
        .collect::<Result<_>>()?;
    let total_rss_mib = rss.iter().sum::<f64>() / 1024.0;
    // Each serves a call while all are live, all at once.
    let barrier = Arc::new(Barrier::new(RUNNERS));
    let threads: Vec<_> = world
        .runs
        .iter()
        .enumerate()
        .map(|(index, run)| {
            let (socket, barrier) = (run.join("tools.sock"), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                tool_call(&socket, &format!("many-{index}"))
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "a caller thread panicked")??;
    }
    world.each_once("many-", RUNNERS)?;
    let stopping = Instant::now();
    for child in &children {
        signal(child, rustix::process::Signal::TERM)?;
    }
    for child in children {
        wait_exit_0(child)?;
    }
    let stop_ms = stopping.elapsed().as_secs_f64() * 1e3;
    for index in 0..RUNNERS {
        world.broker_clear_check(index)?;
    }
    let leftovers = world.leftovers()?;
    ensure!(leftovers.is_empty(), "the runners left behind: {leftovers:?}");

    println!(
        "| benchmark | median | floor / reference | result |\n| --- | ---: | --- | ---: |\n\
         | {CONCURRENT} concurrent tool calls through one runner ({BURSTS} bursts) | {burst_ms:.1} ms \
         per burst | the same {CONCURRENT} in a row {row_ms:.1} ms | ×{:.2}; {} answered, 0 lost, \
         0 errors |\n\
         | {SEQUENTIAL} sequential tool calls | {sequential_us:.1} µs per call | VmRSS after {WARMUP} \
         warm-up calls {before} KiB | VmRSS after {} KiB (+{growth} KiB), peak {} KiB |\n\
         | {RUNNERS} runners live at once | {all_polling_ms:.0} ms until all poll; {stop_ms:.0} ms \
         until all stopped | median runner VmRSS {:.2} MiB | {total_rss_mib:.1} MiB together; all \
         claimed, served, exited 0; nothing left |\n",
        burst_ms / row_ms,
        BURSTS * CONCURRENT,
        after.rss,
        after.peak,
        median(rss) / 1024.0,
    );
    println!(
        "Every call is `read_spec` on a new connection to `tools.sock`. Every call's arguments \
         reached the broker once (no call lost or doubled) and every reply was `ok`. The \
         {RUNNERS} runners are started together, each with its own capability; each claims once, \
         serves one call while all are live (the calls made at once), releases once on SIGTERM \
         and exits 0; afterwards no process names a run directory, no `tools.sock` or private \
         bind directory is left, and every `tmp/` is empty."
    );
    let burst_row = ("load", "64 concurrent tool calls through one runner");
    let floor = ("the same 64 in a row", row_ms);
    println!("{}", Row::ratio(burst_row, Unit::Ms, burst_ms, floor, TARGET_BURST_RATIO));
    let sequential_row = ("load", "10000 sequential tool calls");
    let median = format!("{sequential_us:.1} µs each");
    let outcome = format!("VmRSS {before} KiB, then +{growth} KiB");
    let target = format!("≤ +{TARGET_GROWTH_KIB} KiB");
    let met = growth <= TARGET_GROWTH_KIB;
    println!("{}", Row::check(sequential_row, median, outcome, &target, met));
    let runners_row = ("load", "50 runners live at once");
    let median = format!("{all_polling_ms:.0} ms until all poll");
    let outcome = format!("{total_rss_mib:.1} MiB together, {} left behind", leftovers.len());
    println!("{}", Row::check(runners_row, median, outcome, "all clean", leftovers.is_empty()));
    Ok(())
}

/// The run directories, their bundles and the broker they share.
struct World {
    _dir: tempfile::TempDir,
    runs: Vec<PathBuf>,
    runner: PathBuf,
    broker: ScriptedBroker,
}

/// Returns what `/bin/true --version` prints, which the bundle's seal records.
fn true_version() -> Result<String> {
    let output = Command::new("/bin/true").arg("--version").output()?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

impl World {
    fn new(root: &Path, bin: &Path) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("harness-bench-load-").tempdir()?;
        let base = dir.path().canonicalize()?;
        let layout = InstallLayout::from_checkout(
            &harness_testkit::utf8(root)?,
            &harness_testkit::utf8(bin)?,
        );
        let resolved = ResolvedInstance::load(&root.join("fixtures/resolved/assistant.json"))?;
        let skills = base.join("skills");
        std::fs::create_dir_all(&skills)?;
        let broker = ScriptedBroker::start()?;
        broker
            .answer("role.claim", BrokerAnswer::result(json!({"run": "run-1"})))
            .answer("role.release", BrokerAnswer::result(json!({})))
            .answer("message.read", BrokerAnswer::result(json!({"message": null})))
            .answer("spec.read", BrokerAnswer::result(json!({"text": "north star"})));
        // The runners' CLI is /bin/true: the bundles record what its --version prints, which the
        // runner checks at start.
        let cli_version = true_version()?;
        let mut runs = Vec::with_capacity(RUNNERS);
        for index in 0..RUNNERS {
            let run = base.join(format!("run-{index:02}"));
            let workspace = base.join(format!("ws-{index:02}"));
            std::fs::create_dir_all(&run)?;
            std::fs::create_dir_all(&workspace)?;
            let built = build_bundle(&BundleRequest {
                dir: harness_testkit::utf8(run.join("bundle"))?,
                resolved: &resolved,
                contract: "# Role contract: assistant\n".to_owned(),
                arbiter: Default::default(),
                tracker: None,
                credentials: Vec::new(),
                session: SessionInfo {
                    run: "run-1".into(),
                    launched_by: "bench".into(),
                    workspace: harness_testkit::utf8(workspace.clone())?,
                },
                harness: module("pi").ok_or("no pi module")?,
                route: Route::Primary,
                route_reason: "bench".into(),
                harness_version: "bench".into(),
                cli_version: cli_version.clone(),
                models: resolved.launch.models.clone(),
                land: None,
                skills_dir: harness_testkit::utf8(skills.clone())?,
                install: layout.clone(),
                network: "host".into(),
            })?;
            let run_json = json!({
                "broker": broker.socket(),
                "workspace": workspace,
                "bundleDigest": built.digest,
                "cli": "/bin/true",
                "brokerRetries": 30,
                "pollInterval": 0.5,
            });
            std::fs::write(run.join("run.json"), run_json.to_string())?;
            runs.push(run);
        }
        Ok(Self { _dir: dir, runs, runner: bin.join("harness-runner"), broker })
    }

    fn cap(index: usize) -> String {
        format!("cap-bench-load-{index:02}")
    }

    fn spawn(&self, index: usize) -> Result<Child> {
        let mut command = Command::new(&self.runner);
        command
            .arg(&self.runs[index])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn()?;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        stdin.write_all(format!("{{\"cap\": \"{}\"}}\n", Self::cap(index)).as_bytes())?;
        Ok(child)
    }

    fn polls(&self, index: usize) -> usize {
        let cap = Self::cap(index);
        self.broker.calls_of("message.read").iter().filter(|call| call.cap == cap).count()
    }

    fn wait_polling(&self, index: usize, child: &mut Child) -> Result<()> {
        let started = Instant::now();
        while self.polls(index) == 0 {
            if let Some(status) = child.try_wait()? {
                return Err(format!("runner {index} exited ({status}) before polling").into());
            }
            ensure!(started.elapsed() < Duration::from_secs(60), "runner {index} did not poll");
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    fn start(&self, index: usize) -> Result<Child> {
        let mut child = self.spawn(index)?;
        self.wait_polling(index, &mut child)?;
        Ok(child)
    }

    /// Checks that the broker saw exactly `count` calls whose project starts with `prefix`, each
    /// with a project of its own: no call lost, none doubled.
    fn each_once(&self, prefix: &str, count: usize) -> Result<()> {
        let projects: Vec<String> = self
            .broker
            .calls_of("spec.read")
            .iter()
            .filter_map(|call| call.args["project"].as_str().map(str::to_owned))
            .filter(|project| project.starts_with(prefix))
            .collect();
        let distinct: std::collections::BTreeSet<&String> = projects.iter().collect();
        ensure!(
            projects.len() == count && distinct.len() == count,
            "{prefix}*: the broker saw {} calls ({} distinct), not {count}",
            projects.len(),
            distinct.len()
        );
        Ok(())
    }

    /// Checks that runner `index` claimed once and released once, in total so far.
    fn broker_clear_check(&self, index: usize) -> Result<()> {
        let cap = Self::cap(index);
        let count =
            |verb: &str| self.broker.calls_of(verb).iter().filter(|call| call.cap == cap).count();
        let (claims, releases) = (count("role.claim"), count("role.release"));
        ensure!(
            claims == releases && claims >= 1,
            "runner {index}: {claims} claims, {releases} releases"
        );
        Ok(())
    }

    /// Processes naming a run directory, tool sockets, private bind directories, files in tmp/.
    fn leftovers(&self) -> Result<Vec<String>> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc")?.flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            if self.runs.iter().any(|run| cmdline.contains(&run.display().to_string())) {
                found.push(format!("process {}", entry.file_name().to_string_lossy()));
            }
        }
        for run in &self.runs {
            for entry in std::fs::read_dir(run)?.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name == "tools.sock" || name.starts_with(".tools-sock-") {
                    found.push(run.join(name).display().to_string());
                }
            }
            if let Ok(tmp) = std::fs::read_dir(run.join("tmp")) {
                found.extend(tmp.flatten().map(|entry| entry.path().display().to_string()));
            }
        }
        Ok(found)
    }
}

/// 64 calls at once on one socket; returns the burst's wall time, ms.
fn concurrent_burst(socket: &Path, burst: usize) -> Result<f64> {
    let barrier = Arc::new(Barrier::new(CONCURRENT + 1));
    let threads: Vec<_> = (0..CONCURRENT)
        .map(|call| {
            let (socket, barrier) = (socket.to_path_buf(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                tool_call(&socket, &format!("burst-{burst}-{call}"))
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    for thread in threads {
        thread.join().map_err(|_| "a caller thread panicked")??;
    }
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// One `read_spec` call on a new connection; fails unless the reply is `ok`.
fn tool_call(socket: &Path, project: &str) -> Result<()> {
    let mut stream = UnixStream::connect(socket)
        .map_err(|error| format!("cannot connect to {}: {error}", socket.display()))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let request = json!({"tool": "read_spec", "args": {"project": project}});
    stream.write_all(format!("{request}\n").as_bytes())?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    ensure!(line.starts_with("{\"ok\":true"), "the call for {project} failed: {line}");
    Ok(())
}

fn signal(child: &Child, signal: rustix::process::Signal) -> Result<()> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id())?).ok_or("no pid")?;
    rustix::process::kill_process(pid, signal)?;
    Ok(())
}

fn stop(child: Child) -> Result<()> {
    signal(&child, rustix::process::Signal::TERM)?;
    wait_exit_0(child)
}

fn wait_exit_0(child: Child) -> Result<()> {
    let output = child.wait_with_output()?;
    ensure!(
        output.status.code() == Some(0),
        "a runner stopped with {}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}
