//! `cargo xtask bench`: what the gate costs per tool call, measured against a floor in the same run.
//!
//! Claude Code starts `harness-gate claude-hook` once per tool call, so the figure that matters is a
//! whole process: spawn, read the policy and the payload, decide, exit. It is compared with the
//! cheapest process the same spawn can start through a shell (`sh -c 'exec /bin/true < payload'`)
//! and with a bare `/bin/true`, all interleaved so that a noisy neighbour on a shared machine slows
//! them alike. Peak RSS is the process's `VmHWM`, read while ptrace holds it at its exit; the
//! in-process `decide()` cost comes from the `decide` bench target of harness-gate.
//!
//! A missed target is printed as MISSED but does not fail the command: the machine is shared and
//! noisy, and the numbers are recorded as measured in `docs/performance.md`, between this
//! benchmark's markers, so that other benchmarks can keep sections of their own in that file.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, Result, bail, ensure};
use nix::sys::ptrace;
use nix::sys::stat::Mode;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{Pid, mkfifo};

use crate::process;

const USAGE: &str =
    "usage: cargo xtask bench [--runs N] [--only gate|bundle|runner|unslop|tools|load]";

/// The sections, in the order a full run measures them.
const SECTIONS: [&str; 6] = ["gate", "bundle", "runner", "unslop", "tools", "load"];

/// Runs of each process timed, unless `--runs` says otherwise.
const DEFAULT_RUNS: usize = 500;
/// Runs of each thrown away first, so that page cache and dentry cache are warm for all.
const WARMUP_RUNS: usize = 20;
/// Traced runs for peak RSS, each for the gate and for the floor.
const RSS_SAMPLES: usize = 21;

const TARGET_RATIO: f64 = 1.3;
const TARGET_RSS_KIB: u64 = 3 * 1024;
const TARGET_DECIDE_US: f64 = 20.0;

const DOC: &str = "docs/performance.md";
const DOC_HEADER: &str = "\
# Performance

Each section below is written by the command it names, between its `<!-- bench:NAME:start -->` and
`<!-- bench:NAME:end -->` markers; rerun the command rather than editing inside them.
";

/// The decide bench's machine-readable line starts with this.
const DECIDE_RESULT: &str = "bench-result decide_read_us=";

/// The files of the temporary workspace; the Read is of the one three levels inside.
const WORKSPACE_FILES: &[&str] =
    &["Cargo.toml", "README.md", "src/main.rs", "src/core/lib.rs", "src/core/walk.rs"];
const READ_INSIDE: &str = "src/core/lib.rs";

/// One line of the summary table every run of `cargo xtask bench` prints and writes: a
/// benchmark's median, what it is compared against, the ratio, the target and the verdict.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) section: &'static str,
    pub(crate) bench: String,
    pub(crate) median: String,
    pub(crate) reference: String,
    pub(crate) ratio: String,
    pub(crate) target: String,
    pub(crate) met: bool,
}

impl Row {
    pub(crate) fn new(
        section: &'static str,
        bench: impl Into<String>,
        median: impl Into<String>,
        reference: impl Into<String>,
        ratio: impl Into<String>,
        target: impl Into<String>,
        met: bool,
    ) -> Self {
        Self {
            section,
            bench: bench.into(),
            median: median.into(),
            reference: reference.into(),
            ratio: ratio.into(),
            target: target.into(),
            met,
        }
    }
}

/// The summary of one run: one table of every benchmark's median and ratio.
fn summary(rows: &[Row]) -> String {
    let mut out = String::from(
        "## Summary\n\n\
         The last `cargo xtask bench` run, one row per benchmark; each section below has the details, \
         p90s and what was measured. Medians; ratios are median over the floor's median measured in the \
         same run.\n\n\
         | section | benchmark | median | floor / reference | ratio | target | result |\n\
         | --- | --- | ---: | --- | ---: | --- | --- |\n",
    );
    for row in rows {
        let verdict = if row.met { "pass" } else { "**MISSED**" };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {verdict} |\n",
            row.section, row.bench, row.median, row.reference, row.ratio, row.target
        ));
    }
    out
}

/// Runs `cargo xtask bench ARGS`.
pub(crate) fn run(root: &Path, args: &[&str]) -> Result<()> {
    let mut runs = DEFAULT_RUNS;
    let mut only: Option<&str> = None;
    let mut rest = args;
    while let [flag, value, tail @ ..] = rest {
        match *flag {
            "--runs" => {
                runs = value.parse().with_context(|| format!("--runs {value:?}\n{USAGE}"))?
            }
            "--only" if SECTIONS.contains(value) => only = Some(value),
            _ => bail!("unknown arguments `{}`\n{USAGE}", args.join(" ")),
        }
        rest = tail;
    }
    ensure!(rest.is_empty(), "unknown arguments `{}`\n{USAGE}", args.join(" "));
    ensure!(runs >= 10, "--runs must be at least 10 for a median and a p90 to mean much");
    let mut rows = Vec::new();
    for section in SECTIONS.iter().filter(|section| only.is_none_or(|only| only == **section)) {
        rows.extend(match *section {
            "gate" => bench(root, runs)?,
            "bundle" => crate::bench_bundle::run(root)?,
            "runner" => crate::bench_runner::run(root)?,
            "unslop" => crate::bench_unslop::run(root, runs)?,
            "load" => crate::bench_load::run(root)?,
            _ => crate::bench_tools::run(root, runs)?,
        });
    }
    let table = summary(&rows);
    println!("{table}");
    if only.is_none() {
        write_section(&root.join(DOC), "summary", &table)?;
    }
    Ok(())
}

fn bench(root: &Path, runs: usize) -> Result<Vec<Row>> {
    let load_before = load_average();
    eprintln!("bench: building harness-gate (release) and the decide bench ...");
    process::run_visible(cargo(root).args(["build", "--release", "-p", "harness-gate-cli"]))?;
    process::run_visible(cargo(root).args([
        "bench",
        "-p",
        "harness-gate",
        "--bench",
        "decide",
        "--no-run",
    ]))?;
    let gate = target_dir(root).join("release/harness-gate");
    ensure!(gate.is_file(), "{} is missing after the build", gate.display());

    let fixture = Fixture::create()?;
    fixture.check_gate(&gate)?;

    eprintln!(
        "bench: {runs} runs each of the gate, the floor and a bare /bin/true, interleaved ..."
    );
    let timing = time_processes(&fixture, &gate, runs)?;
    eprintln!("bench: peak RSS, {RSS_SAMPLES} traced runs each of the gate and the floor ...");
    let rss = measure_rss(&fixture, &gate)?;
    eprintln!("bench: decide() in process ...");
    let decide = decide_bench(root)?;
    let load_after = load_average();

    let report = Report {
        runs,
        timing,
        rss,
        decide,
        gate_size: fs::metadata(&gate).map(|meta| meta.len()).unwrap_or(0),
        load_before,
        load_after,
    };
    let table = report.table();
    println!("{table}");
    let missed = report.missed();
    if missed.is_empty() {
        eprintln!("bench: every target met");
    } else {
        eprintln!("bench: MISSED: {} (recorded as measured; not a failure)", missed.join("; "));
    }
    write_doc(&root.join(DOC), &report.section(&table))?;
    eprintln!("bench: wrote {DOC}");
    Ok(report.rows())
}

/// A temporary workspace, its policy and the payloads, with the environment every process gets.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn create() -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("harness-bench-").tempdir()?;
        let root = dir.path();
        let workspace = root.join("ws");
        for file in WORKSPACE_FILES {
            let path = workspace.join(file);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write(&path, "// A file of the benchmark's workspace.\n")?;
        }
        fs::create_dir_all(root.join("home"))?;
        fs::write(root.join("secret.txt"), "outside the workspace\n")?;
        let workspace = text(&workspace)?;
        let policy = format!(
            "{{\"harness\":\"claude-code\",\"workspace\":{},\
             \"tools\":[\"Read\",\"Write\",\"Edit\",\"Grep\",\"Glob\"],\"typed\":[\"list_tasks\"]}}\n",
            json_string(workspace)
        );
        fs::write(root.join("policy.json"), policy)?;
        let inside = read_payload(workspace, &format!("{workspace}/{READ_INSIDE}"));
        let outside = read_payload(workspace, text(&root.join("secret.txt"))?);
        mkfifo(&root.join("payload.fifo"), Mode::S_IRUSR | Mode::S_IWUSR)
            .context("cannot make the floor's FIFO")?;
        let fixture = Self { dir };
        fs::write(fixture.inside(), inside)?;
        fs::write(fixture.outside(), outside)?;
        Ok(fixture)
    }

    fn policy(&self) -> PathBuf {
        self.dir.path().join("policy.json")
    }

    fn inside(&self) -> PathBuf {
        self.dir.path().join("read-inside.json")
    }

    fn outside(&self) -> PathBuf {
        self.dir.path().join("read-outside.json")
    }

    /// A named pipe the traced floor reads its payload from, so that it waits for the tracer.
    fn fifo(&self) -> PathBuf {
        self.dir.path().join("payload.fifo")
    }

    /// Returns the command for the gate, its stdin not set yet.
    fn gate_command(&self, gate: &Path) -> Command {
        let mut cmd = process::command(gate);
        cmd.arg("claude-hook").arg("--policy").arg(self.policy());
        self.environment(&mut cmd);
        cmd
    }

    /// Returns the floor: a shell that replaces itself with `/bin/true` reading `payload`.
    fn floor_command(&self, payload: &Path) -> Result<Command> {
        let mut cmd = process::command("/bin/sh");
        let quoted = text(payload)?.replace('\'', r"'\''");
        cmd.arg("-c").arg(format!("exec /bin/true < '{quoted}'"));
        self.environment(&mut cmd);
        Ok(cmd)
    }

    /// Returns the bare reference: `/bin/true` spawned directly, no shell.
    fn bare_command(&self) -> Command {
        let mut cmd = process::command("/bin/true");
        self.environment(&mut cmd);
        cmd
    }

    /// Gives a child an empty environment but HOME and PATH, every process alike.
    fn environment(&self, cmd: &mut Command) {
        cmd.env_clear().env("HOME", self.dir.path().join("home")).env("PATH", "/usr/bin:/bin");
    }

    /// Fails unless the gate allows the typical Read and blocks one outside the workspace, so that
    /// the benchmark is known to measure a working gate.
    fn check_gate(&self, gate: &Path) -> Result<()> {
        let timeout = Duration::from_secs(30);
        let mut inside = self.gate_command(gate);
        inside.stdin(File::open(self.inside())?);
        process::run_captured(&mut inside, timeout)
            .context("the gate must allow the typical Read")?;

        let mut outside = self.gate_command(gate);
        outside.stdin(File::open(self.outside())?);
        let (status, captured) = process::run_captured_any_status(&mut outside, timeout)?;
        ensure!(
            status.code() == Some(2) && captured.stderr.contains("blocked"),
            "the gate must block a Read outside the workspace with exit 2, but `{}` exited with \
             {status} and printed {:?} on stderr",
            process::display(&outside),
            captured.stderr.trim()
        );
        Ok(())
    }
}

/// Returns a PreToolUse payload as Claude Code 2.1.296 sends it for a Read of `path`.
fn read_payload(workspace: &str, path: &str) -> String {
    format!(
        "{{\"session_id\":\"0d4e8a52-5a3c-4f0e-9a61-6f1c2b7d9e10\",\
         \"transcript_path\":\"/home/dev/.claude/projects/ws/0d4e8a52-5a3c-4f0e-9a61-6f1c2b7d9e10.jsonl\",\
         \"cwd\":{},\"permission_mode\":\"default\",\"hook_event_name\":\"PreToolUse\",\
         \"tool_name\":\"Read\",\"tool_input\":{{\"file_path\":{}}}}}\n",
        json_string(workspace),
        json_string(path)
    )
}

/// Returns `text` as a JSON string; the fixture's paths need no more escaping than this.
fn json_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn text(path: &Path) -> Result<&str> {
    path.to_str().with_context(|| format!("{} is not UTF-8", path.display()))
}

/// Wall times in seconds, sorted.
#[derive(Debug)]
struct Samples(Vec<f64>);

impl Samples {
    fn new(mut values: Vec<f64>) -> Self {
        values.sort_by(f64::total_cmp);
        Self(values)
    }

    /// Returns the nearest-rank quantile `q` (0.5 for the median).
    fn quantile(&self, q: f64) -> f64 {
        let rank = (q * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1]
    }
}

#[derive(Debug)]
struct Timing {
    gate: Samples,
    floor: Samples,
    bare: Samples,
}

/// Times `runs` each of the gate, the floor and the bare `/bin/true`, rotating which goes first.
fn time_processes(fixture: &Fixture, gate: &Path, runs: usize) -> Result<Timing> {
    let mut commands = [
        fixture.gate_command(gate),
        fixture.floor_command(&fixture.inside())?,
        fixture.bare_command(),
    ];
    for cmd in &mut commands {
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
    }
    let mut times: [Vec<f64>; 3] = std::array::from_fn(|_| Vec::with_capacity(runs));
    for run in 0..WARMUP_RUNS + runs {
        for turn in 0..commands.len() {
            let which = (run + turn) % commands.len();
            let cmd = &mut commands[which];
            // Opening the payload is outside the time; each process gets a fresh descriptor.
            cmd.stdin(File::open(fixture.inside())?);
            let (status, took) = process::run_timed(cmd)?;
            if !status.success() {
                bail!("`{}` exited with {status} on run {run}", process::display(cmd));
            }
            if run >= WARMUP_RUNS {
                times[which].push(took.as_secs_f64());
            }
        }
    }
    let [gate, floor, bare] = times.map(Samples::new);
    Ok(Timing { gate, floor, bare })
}

/// Memory figures of a process from /proc/PID/status, in KiB.
#[derive(Debug, Clone, Copy, Default)]
struct Memory {
    /// `VmHWM`: the peak resident set size.
    peak: u64,
    /// `RssAnon`: heap, stack and other anonymous pages.
    anon: u64,
    /// `RssFile`: pages of the executable, the shared libraries and other mapped files.
    file: u64,
}

/// Peak RSS figures, medians over the traced runs.
#[derive(Debug)]
struct Rss {
    gate: Memory,
    floor: u64,
}

/// How a traced process gets its payload. Either way it is blocked waiting for it when the tracer
/// attaches, so that it can neither exec nor exit untraced.
#[derive(Clone, Copy)]
enum Feed<'a> {
    /// The payload is written to a pipe on its stdin.
    Stdin(&'a [u8]),
    /// The payload is written to a named pipe it opens.
    Fifo(&'a Path, &'a [u8]),
}

fn measure_rss(fixture: &Fixture, gate: &Path) -> Result<Rss> {
    let payload = fs::read(fixture.inside())?;
    let fifo = fixture.fifo();
    let mut gate_samples = Vec::with_capacity(RSS_SAMPLES);
    let mut floor_samples = Vec::with_capacity(RSS_SAMPLES);
    for _ in 0..RSS_SAMPLES {
        gate_samples.push(peak_rss(&mut fixture.gate_command(gate), Feed::Stdin(&payload))?);
        let mut floor = fixture.floor_command(&fifo)?;
        floor.stdin(File::open(fixture.inside())?);
        floor_samples.push(peak_rss(&mut floor, Feed::Fifo(&fifo, &payload))?.peak);
    }
    gate_samples.sort_by_key(|memory| memory.peak);
    Ok(Rss {
        gate: gate_samples.get(RSS_SAMPLES / 2).copied().unwrap_or_default(),
        floor: median(floor_samples),
    })
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

/// Runs `cmd` under ptrace and returns its memory figures just before it exits.
///
/// `getrusage`'s `ru_maxrss` (and `wait4`'s) would be simpler but counts, into a child's peak, the
/// memory map the child had before its `exec`, which for a spawned child is its parent's: a child of
/// xtask (3 MiB and more) cannot be seen below that. `VmHWM` read at the ptrace exit stop is the
/// peak of the program's own memory map only; for the floor, the shell's peak is read before it
/// execs `/bin/true`, and the larger of the two counts.
fn peak_rss(cmd: &mut Command, feed: Feed<'_>) -> Result<Memory> {
    if let Feed::Stdin(_) = feed {
        cmd.stdin(Stdio::piped());
    }
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = process::spawn(cmd)?;
    let traced = trace_to_exit(&mut child, feed);
    if traced.is_err() {
        // SIGKILL ends a process stopped under ptrace too; the errors mean it is gone already.
        let _ = child.kill();
        let _ = child.wait();
    }
    traced.with_context(|| format!("cannot measure the peak RSS of `{}`", process::display(cmd)))
}

fn trace_to_exit(child: &mut Child, feed: Feed<'_>) -> Result<Memory> {
    let pid = Pid::from_raw(i32::try_from(child.id())?);
    wait_until_blocked(pid)?;
    let before_exec = memory(pid)?;
    ptrace::seize(pid, ptrace::Options::PTRACE_O_TRACEEXIT)
        .context("ptrace(PTRACE_SEIZE) failed: the peak RSS needs ptrace on a child")?;
    match feed {
        Feed::Stdin(payload) => {
            let mut stdin = child.stdin.take().context("the child has no stdin pipe")?;
            stdin.write_all(payload)?;
        }
        Feed::Fifo(path, payload) => File::options().write(true).open(path)?.write_all(payload)?,
    }
    let mut at_exit = None;
    loop {
        match waitpid(pid, None)? {
            WaitStatus::PtraceEvent(_, _, event)
                if event == ptrace::Event::PTRACE_EVENT_EXIT as i32 =>
            {
                at_exit = Some(memory(pid)?);
                ptrace::cont(pid, None)?;
            }
            // A signal for the tracee: deliver it.
            WaitStatus::Stopped(_, signal) => ptrace::cont(pid, signal)?,
            WaitStatus::PtraceEvent(..) => ptrace::cont(pid, None)?,
            WaitStatus::Exited(_, 0) => break,
            WaitStatus::Exited(_, code) => bail!("it exited with {code}"),
            WaitStatus::Signaled(_, signal, _) => bail!("it was killed by {signal:?}"),
            _ => {}
        }
    }
    let at_exit = at_exit.context("it exited without a ptrace exit stop")?;
    Ok(Memory { peak: before_exec.peak.max(at_exit.peak), ..at_exit })
}

/// Waits until `pid` sleeps: blocked reading its stdin pipe or opening the FIFO, the only places
/// the gate and the floor sleep before they have their payload.
fn wait_until_blocked(pid: Pid) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
        if state == Some("S") {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "it did not wait for its payload (state {state:?})");
        thread::sleep(Duration::from_micros(200));
    }
}

/// Reads the memory figures of `pid` from /proc/PID/status.
fn memory(pid: Pid) -> Result<Memory> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .with_context(|| format!("/proc/{pid}/status has no {name} line"))
    };
    Ok(Memory { peak: field("VmHWM")?, anon: field("RssAnon")?, file: field("RssFile")? })
}

/// Runs the decide bench (built already) and returns its median in µs per call.
fn decide_bench(root: &Path) -> Result<Decide> {
    let mut cmd = cargo(root);
    cmd.args(["bench", "--quiet", "-p", "harness-gate", "--bench", "decide"]);
    let output = process::run_captured(&mut cmd, Duration::from_secs(600))?;
    output
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix(DECIDE_RESULT))
        .and_then(parse_decide)
        .with_context(|| {
            format!(
                "`{}` printed no `{DECIDE_RESULT}…` line:\n{}",
                process::display(&cmd),
                output.stdout
            )
        })
}

/// The decide bench's figures, in µs per call.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Decide {
    median: f64,
    p90: f64,
}

/// Reads what follows [`DECIDE_RESULT`]: `MEDIAN p90_us=P90`.
fn parse_decide(rest: &str) -> Option<Decide> {
    let mut words = rest.split_whitespace();
    let median = words.next()?.parse().ok()?;
    let p90 = words.next()?.strip_prefix("p90_us=")?.parse().ok()?;
    Some(Decide { median, p90 })
}

/// Returns a command for the cargo that runs xtask, in the workspace root.
pub(crate) fn cargo(root: &Path) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = process::command(cargo);
    cmd.current_dir(root);
    cmd
}

pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |dir| root.join(dir))
}

#[derive(Debug)]
struct Report {
    runs: usize,
    timing: Timing,
    rss: Rss,
    decide: Decide,
    gate_size: u64,
    load_before: String,
    load_after: String,
}

impl Report {
    /// Returns the gate's median over the floor's: the figure with a target.
    fn ratio(&self) -> f64 {
        self.timing.gate.quantile(0.5) / self.timing.floor.quantile(0.5)
    }

    /// The summary's rows.
    fn rows(&self) -> Vec<Row> {
        let floor = self.timing.floor.quantile(0.5);
        let rss_ratio = self.rss.gate.peak as f64 / self.rss.floor.max(1) as f64;
        vec![
            Row::new(
                "gate",
                "harness-gate claude-hook, a process per call",
                ms(self.timing.gate.quantile(0.5)),
                format!("`sh -c 'exec /bin/true < payload'` {}", ms(floor)),
                format!("{:.2}×", self.ratio()),
                format!("≤ {TARGET_RATIO}×"),
                self.ratio() <= TARGET_RATIO,
            ),
            Row::new(
                "gate",
                "peak RSS of the gate",
                mib(self.rss.gate.peak),
                format!("the floor {}", mib(self.rss.floor)),
                format!("{rss_ratio:.2}×"),
                format!("≤ {}", mib(TARGET_RSS_KIB)),
                self.rss.gate.peak <= TARGET_RSS_KIB,
            ),
            Row::new(
                "gate",
                "decide() in process, a Read",
                format!("{:.2} µs", self.decide.median),
                "",
                "",
                format!("≤ {TARGET_DECIDE_US} µs"),
                self.decide.median <= TARGET_DECIDE_US,
            ),
        ]
    }

    fn missed(&self) -> Vec<String> {
        let mut missed = Vec::new();
        if self.ratio() > TARGET_RATIO {
            missed.push(format!("gate process {:.2}× the floor > {TARGET_RATIO}×", self.ratio()));
        }
        if self.rss.gate.peak > TARGET_RSS_KIB {
            missed.push(format!("peak RSS {} > {}", mib(self.rss.gate.peak), mib(TARGET_RSS_KIB)));
        }
        if self.decide.median > TARGET_DECIDE_US {
            missed.push(format!("decide() {:.2} µs > {TARGET_DECIDE_US} µs", self.decide.median));
        }
        missed
    }

    /// Returns the results as one Markdown table.
    fn table(&self) -> String {
        let verdict = |met: bool| if met { "pass" } else { "**MISSED**" };
        let Timing { gate, floor, bare } = &self.timing;
        let median = |samples: &Samples| ms(samples.quantile(0.5));
        let p90 = |samples: &Samples| ms(samples.quantile(0.9));
        let mut out = String::from(
            "| benchmark | median | p90 | floor / reference | ratio | target | result |\n\
             | --- | ---: | ---: | --- | ---: | --- | --- |\n",
        );
        let _ = writeln!(
            out,
            "| gate, process per call (`claude-hook`, a Read inside) | {} | {} | floor {} (p90 {}) \
             | {:.2}× | ≤ {TARGET_RATIO}× floor | {} |",
            median(gate),
            p90(gate),
            median(floor),
            p90(floor),
            self.ratio(),
            verdict(self.ratio() <= TARGET_RATIO)
        );
        let _ = writeln!(
            out,
            "| bare `/bin/true`, spawned directly (reference) | {} | {} | gate {} | gate {:.2}× \
             | none | |",
            median(bare),
            p90(bare),
            median(gate),
            gate.quantile(0.5) / bare.quantile(0.5)
        );
        let _ = writeln!(
            out,
            "| peak RSS of the gate process | {} | | floor {} | {:.2}× | ≤ {} | {} |",
            mib(self.rss.gate.peak),
            mib(self.rss.floor),
            self.rss.gate.peak as f64 / self.rss.floor.max(1) as f64,
            mib(TARGET_RSS_KIB),
            verdict(self.rss.gate.peak <= TARGET_RSS_KIB)
        );
        let _ = writeln!(
            out,
            "| `decide()` in process, the same Read | {:.2} µs | {:.2} µs | | \
             | ≤ {TARGET_DECIDE_US} µs | {} |",
            self.decide.median,
            self.decide.p90,
            verdict(self.decide.median <= TARGET_DECIDE_US)
        );
        out
    }

    /// Returns the section between the markers: how, where and when, the table, and what it means.
    fn section(&self, table: &str) -> String {
        format!(
            "## The gate\n\
             \n\
             Reproduce with `cargo xtask bench` (`--runs N` for other than {DEFAULT_RUNS} runs).\n\
             Measured {date} on {machine}.\n\
             The machine is shared with other jobs: the load average was {load_before} before and \
             {load_after} after.\n\
             {runs} timed runs each, after {WARMUP_RUNS} warm-up runs; peak RSS is the median of \
             {RSS_SAMPLES} traced runs each.\n\
             The gate binary, `target/release/harness-gate` in the release profile, is {size}.\n\
             At its exit the gate held {file} of file-backed pages (its binary, libc, the loader) \
             and {anon} of anonymous ones (heap, stack).\n\
             \n\
             {table}\n\
             {ROWS_EXPLAINED}",
            date = utc_now(),
            machine = machine(),
            load_before = self.load_before,
            load_after = self.load_after,
            runs = self.runs,
            size = mib(self.gate_size / 1024),
            file = mib(self.rss.gate.file),
            anon = mib(self.rss.gate.anon),
        )
    }
}

/// What each row of the table measures, as the doc says it below the table.
const ROWS_EXPLAINED: &str = "\
What each row measures:

- **Gate, process per call.**
  The wall time from just before the spawn to just after the wait of
  `harness-gate claude-hook --policy policy.json`.
  Its stdin is a file holding a PreToolUse payload as Claude Code 2.1.296 sends it for a Read of an
  existing file three levels inside a temporary workspace; stdout and stderr are /dev/null, and the
  environment holds HOME and PATH only.
  Every run must exit 0, and before any is timed a Read outside the workspace must exit 2, so the
  figure is that of a working gate.
  The floor is `sh -c 'exec /bin/true < payload.json'`, spawned the same way with the same stdin.
  The gate, the floor and the bare reference take turns, each going first in every third round, so
  that noise from other jobs hits all three alike.
  The ratio is median over median; the p90 shows how noisy the run was.
- **Bare `/bin/true`.**
  The cheapest process the same spawn can start, without the floor's shell: how far the gate is
  from no work at all, for reference.
- **Peak RSS.**
  `VmHWM` of the gate process, read from /proc while ptrace holds it at its exit
  (`PTRACE_O_TRACEEXIT`); the floor's is the larger of the shell's before it execs and
  `/bin/true`'s at its exit.
  `getrusage`'s `ru_maxrss` is not used: Linux counts into it the memory map a child had before its
  `exec`, which for a spawned child is its parent's, so it cannot show a child of xtask below
  xtask's own peak (about 3 MiB for a debug build).
- **`decide()`.**
  `cargo bench -p harness-gate --bench decide`: the library call alone for the same kind of Read,
  the policy already loaded.
  The median and p90 over 201 batches of calls, each batch timed with `Instant`, in µs per call.
";

pub(crate) fn ms(seconds: f64) -> String {
    format!("{:.3} ms", seconds * 1e3)
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.2} MiB", kib as f64 / 1024.0)
}

/// Returns the CPU model, the CPUs this process may use (as `nproc` counts them) and the kernel.
pub(crate) fn machine() -> String {
    let model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, name)| name.trim().to_owned())
        })
        .unwrap_or_else(|| "an unknown CPU".to_owned());
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{model}, {cpus} CPUs (`nproc`), Linux {}", kernel.trim())
}

/// Returns the 1-minute load average, or `?` where /proc/loadavg cannot be read.
pub(crate) fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// Returns the current UTC date and time as `YYYY-MM-DD HH:MM UTC`.
pub(crate) fn utc_now() -> String {
    let seconds =
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |since| since.as_secs());
    let (days, of_day) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", of_day / 3600, of_day % 3600 / 60)
}

/// Returns the proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// The resident and peak memory of a live process, in KiB (`VmRSS`, `VmHWM`).
pub(crate) fn rss_kib(pid: u32) -> Result<(u64, u64)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse::<u64>().ok())
    };
    Ok((field("VmRSS:").context("no VmRSS")?, field("VmHWM:").context("no VmHWM")?))
}

/// The median of `values` (the upper one of an even count).
pub(crate) fn median_f64(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Puts `section` between this benchmark's markers in `path`, creating the file or the markers.
fn write_doc(path: &Path, section: &str) -> Result<()> {
    write_section(path, "gate", section)
}

/// Puts `section` between the markers `<!-- bench:NAME:start -->` and `<!-- bench:NAME:end -->`
/// in `path`, creating the file or the markers; every benchmark of `cargo xtask bench` writes
/// its own section this way.
pub(crate) fn write_section(path: &Path, name: &str, section: &str) -> Result<()> {
    let start_marker = format!("<!-- bench:{name}:start -->");
    let end_marker = format!("<!-- bench:{name}:end -->");
    let old = match fs::read_to_string(path) {
        Ok(old) => old,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => DOC_HEADER.to_owned(),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    };
    let block = format!("{start_marker}\n{section}{end_marker}");
    let new = match (old.find(&start_marker), old.find(&end_marker)) {
        (Some(start), Some(end)) if start < end => {
            format!("{}{block}{}", &old[..start], &old[end + end_marker.len()..])
        }
        (None, None) => format!("{}\n\n{block}\n", old.trim_end()),
        _ => bail!("{} has a broken pair of {start_marker} markers", path.display()),
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::write(path, new).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
    }

    #[test]
    fn decide_line_is_read() {
        let line = "bench-result decide_read_us=4.078 p90_us=4.309";
        let rest = line.strip_prefix(DECIDE_RESULT).unwrap();
        assert_eq!(parse_decide(rest), Some(Decide { median: 4.078, p90: 4.309 }));
        assert_eq!(parse_decide("4.078"), None);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let samples = Samples::new((1..=10).rev().map(f64::from).collect());
        assert_eq!(samples.quantile(0.5), 5.0);
        assert_eq!(samples.quantile(0.9), 9.0);
        assert_eq!(samples.quantile(0.0), 1.0);
    }

    #[test]
    fn doc_section_is_replaced_between_markers_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("performance.md");
        write_doc(&path, "first\n").unwrap();
        let other = "\n<!-- bench:other:start -->\nkept\n<!-- bench:other:end -->\n";
        fs::write(&path, fs::read_to_string(&path).unwrap() + other).unwrap();
        write_doc(&path, "second\n").unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# Performance"), "{text}");
        assert!(
            text.contains("<!-- bench:gate:start -->\nsecond\n<!-- bench:gate:end -->"),
            "{text}"
        );
        assert!(!text.contains("first") && text.contains("kept"), "{text}");
    }
}
