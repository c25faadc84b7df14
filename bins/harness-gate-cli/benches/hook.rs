//! `cargo bench -p harness-gate-cli --bench hook`: what the gate costs Claude Code per tool call,
//! like for like.
//!
//! Claude Code runs the PreToolUse hook command of the bundle's settings.json through `sh -c` with
//! the payload on stdin, once per tool call. So the figure is that whole command,
//! `sh -c "timeout -k 2 10 GATE claude-hook --policy P || exit 2" < payload`, taken from the
//! settings.json that harness-adapters writes, against the same command written with `/bin/true`
//! as GATE: the same shell, the same `timeout`, the same stdin, no gate. Both run interleaved in
//! one run, with the gate and `/bin/true` spawned directly as references. Peak RSS is the gate's
//! `VmHWM`, read while ptrace holds it at its exit.
//!
//! Prints a Markdown report and a `bench-row` line per target for `cargo xtask bench`. Targets:
//! the hook at most 1.3× its floor, the gate's peak RSS at most 3 MiB.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![expect(clippy::disallowed_methods, reason = "the benchmark spawns the processes it times")]

use std::error::Error;
use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use harness_adapters::{ClaudeCode, HarnessModule as _, InstallLayout, ModuleContext};
use harness_benchkit::{Memory, Row, Samples, Unit, WARMUP_RUNS, median, runs, time_interleaved};
use nix::sys::ptrace;
use nix::sys::stat::Mode;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{Pid, mkfifo};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const TARGET_RATIO: f64 = 1.3;
const TARGET_RSS_KIB: f64 = 3.0 * 1024.0;
/// Traced runs for peak RSS, each for the gate and for the floor.
const RSS_SAMPLES: usize = 21;
/// The workspace's files; the Read is of the one three levels inside.
const FILES: &[&str] =
    &["Cargo.toml", "README.md", "src/main.rs", "src/core/lib.rs", "src/core/walk.rs"];

fn main() -> Result<()> {
    let gate = Path::new(env!("CARGO_BIN_EXE_harness-gate"));
    let runs = runs();
    let fixture = Fixture::create()?;
    let hook = fixture.hook(gate)?;
    let floor = fixture.hook(Path::new("/bin/true"))?;
    fixture.check(&hook)?;
    eprintln!("bench hook: {runs} runs each of the hook, its floor, the gate and /bin/true ...");
    let inside = fixture.path("read-inside.json");
    let mut commands = [
        (fixture.shell(&hook), inside.clone()),
        (fixture.shell(&floor), inside.clone()),
        (fixture.gate(gate), inside.clone()),
        (fixture.env(Command::new("/bin/true")), inside),
    ];
    let [hook_t, floor_t, gate_t, true_t]: [Samples; 4] =
        time_interleaved(&mut commands, runs)?.try_into().map_err(|_| "four sample sets")?;
    eprintln!("bench hook: peak RSS, {RSS_SAMPLES} traced runs each of the gate and the floor ...");
    let (rss, floor_rss) = fixture.rss(gate)?;

    let ms = |s: &Samples, q: f64| format!("{:.3} ms", s.quantile(q) * 1e3);
    let row = |name: &str, s: &Samples| {
        println!(
            "| {name} | {} | {} | {:.2}× |",
            ms(s, 0.5),
            ms(s, 0.9),
            s.median() / floor_t.median()
        );
    };
    println!("{runs} timed runs each after {WARMUP_RUNS} warm-up runs, interleaved.\n");
    println!("| process | median | p90 | × the floor |\n| --- | ---: | ---: | ---: |");
    row(
        // A `|` inside a table cell is escaped, code span or not.
        r#"the hook as settings.json runs it: `sh -c "timeout -k 2 10 GATE claude-hook --policy P \|\| exit 2" < payload`"#,
        &hook_t,
    );
    row("the floor: the same command with `/bin/true` as GATE", &floor_t);
    row("the gate spawned directly, no shell, no `timeout` (reference)", &gate_t);
    row("`/bin/true` spawned directly (reference)", &true_t);
    println!(
        "\nThe hook is {:.3} ms above its floor: that is what the gate itself costs a call.\n\
         Peak RSS of the gate: {:.2} MiB ({:.2} MiB file-backed: its binary, libc, the loader; \
         {:.2} MiB anonymous: heap, stack); the floor's {:.2} MiB. The gate binary is {:.2} MiB.\n",
        (hook_t.median() - floor_t.median()) * 1e3,
        rss.peak as f64 / 1024.0,
        rss.file as f64 / 1024.0,
        rss.anon as f64 / 1024.0,
        floor_rss as f64 / 1024.0,
        fs::metadata(gate)?.len() as f64 / (1024.0 * 1024.0),
    );
    println!("{EXPLAINED}");
    println!(
        "{}",
        Row::ratio(
            ("gate", "the PreToolUse hook as settings.json runs it"),
            Unit::Ms,
            hook_t.median() * 1e3,
            ("the same command with `/bin/true` as GATE", floor_t.median() * 1e3),
            TARGET_RATIO,
        )
    );
    println!(
        "{}",
        Row::at_most(
            ("gate", "peak RSS of the gate"),
            Unit::Kib,
            rss.peak as f64,
            Some(("the floor", floor_rss as f64)),
            TARGET_RSS_KIB,
        )
    );
    Ok(())
}

const EXPLAINED: &str = "\
What is measured:

- Each figure is the wall time from just before the spawn to just after the wait. Stdin is a file
  holding a PreToolUse payload as Claude Code 2.1.296 sends it for a Read of an existing file three
  levels inside a temporary workspace; stdout and stderr are /dev/null; the environment holds HOME
  and PATH only. The hook command is the one harness-adapters writes into settings.json, run with
  `/bin/sh -c` as Claude Code runs hook commands; the floor is that same command with the gate's
  path replaced by `/bin/true`, so the shell, `timeout` and the `|| exit 2` are on both sides.
- Before anything is timed, the hook must exit 0 for the Read inside and exit 2 naming the block
  for a Read outside the workspace, so the figure is that of a working gate.
- The four commands take turns, each going first in every fourth round; ratios are median over
  median, and the p90 shows how noisy the run was.
- Peak RSS is `VmHWM` of the gate process, read from /proc while ptrace holds it at its exit
  (`PTRACE_O_TRACEEXIT`); the floor's is the larger of a shell's before it execs `/bin/true` and
  `/bin/true`'s at its exit. `getrusage`'s `ru_maxrss` would count the parent's memory map the
  child had before its exec.";

/// A temporary bundle directory: the workspace, policy.json, the payloads and a FIFO.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn create() -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("harness-bench-hook-").tempdir()?;
        let root = dir.path();
        let workspace = root.join("ws");
        for file in FILES {
            let path = workspace.join(file);
            fs::create_dir_all(path.parent().ok_or("a file of the workspace has no parent")?)?;
            fs::write(&path, "// A file of the benchmark's workspace.\n")?;
        }
        fs::create_dir_all(root.join("home"))?;
        fs::write(root.join("secret.txt"), "outside the workspace\n")?;
        let ws = utf8(&workspace)?;
        let policy = serde_json::json!({
            "harness": "claude-code", "workspace": ws,
            "tools": ["Read", "Write", "Edit", "Grep", "Glob"], "typed": ["list_tasks"],
        });
        fs::write(root.join("policy.json"), format!("{policy}\n"))?;
        fs::write(root.join("read-inside.json"), payload(ws, &workspace.join("src/core/lib.rs"))?)?;
        fs::write(root.join("read-outside.json"), payload(ws, &root.join("secret.txt"))?)?;
        mkfifo(&root.join("payload.fifo"), Mode::S_IRUSR | Mode::S_IWUSR)?;
        Ok(Self { dir })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Returns the PreToolUse hook command of the settings.json harness-adapters writes for a
    /// bundle in this directory whose gate is `gate`.
    fn hook(&self, gate: &Path) -> Result<String> {
        let dir = harness_testkit::utf8(self.dir.path())?;
        let layout =
            InstallLayout { gate: harness_testkit::utf8(gate)?, ..InstallLayout::under(&dir) };
        let builtin = ["Read", "Write", "Edit", "Grep", "Glob"].map(String::from);
        let workspace = dir.join("ws");
        let cx = ModuleContext {
            bundle_dir: &dir,
            workspace: &workspace,
            layout: &layout,
            typed: &[],
            builtin: &builtin,
        };
        let files = ClaudeCode.files(&cx)?;
        let (_, settings) = files
            .iter()
            .find(|(name, _)| *name == "settings.json")
            .ok_or("harness-adapters wrote no settings.json")?;
        let settings: serde_json::Value = serde_json::from_slice(settings)?;
        let command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"].as_str();
        Ok(command.ok_or("settings.json has no PreToolUse hook command")?.to_owned())
    }

    /// Gives a child HOME and PATH only, every process alike.
    fn env(&self, mut cmd: Command) -> Command {
        cmd.env_clear().env("HOME", self.path("home")).env("PATH", "/usr/bin:/bin");
        cmd
    }

    fn shell(&self, script: &str) -> Command {
        let mut cmd = self.env(Command::new("/bin/sh"));
        cmd.arg("-c").arg(script);
        cmd
    }

    fn gate(&self, gate: &Path) -> Command {
        let mut cmd = self.env(Command::new(gate));
        cmd.arg("claude-hook").arg("--policy").arg(self.path("policy.json"));
        cmd
    }

    /// Fails unless the hook allows the Read inside and blocks the one outside.
    fn check(&self, hook: &str) -> Result<()> {
        for (payload, code) in [("read-inside.json", 0), ("read-outside.json", 2)] {
            let mut cmd = self.shell(hook);
            let out = cmd.stdin(File::open(self.path(payload))?).output()?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            if out.status.code() != Some(code) || (code == 2 && !stderr.contains("blocked")) {
                return Err(format!(
                    "the hook must exit {code} for {payload}, but exited {} with {stderr:?}",
                    out.status
                )
                .into());
            }
        }
        Ok(())
    }

    /// Returns the gate's memory at its exit and the floor's peak, medians of the traced runs.
    fn rss(&self, gate: &Path) -> Result<(Memory, u64)> {
        let payload = fs::read(self.path("read-inside.json"))?;
        let fifo = self.path("payload.fifo");
        let (mut gates, mut floors) = (Vec::new(), Vec::new());
        for _ in 0..RSS_SAMPLES {
            gates.push(peak_rss(&mut self.gate(gate), Feed::Stdin(&payload))?);
            let script = format!("exec /bin/true < '{}'", utf8(&fifo)?.replace('\'', r"'\''"));
            floors.push(peak_rss(&mut self.shell(&script), Feed::Fifo(&fifo, &payload))?.peak);
        }
        gates.sort_by_key(|memory| memory.peak);
        let floor = median(floors.into_iter().map(|kib| kib as f64).collect()) as u64;
        Ok((gates[RSS_SAMPLES / 2], floor))
    }
}

/// Returns a PreToolUse payload as Claude Code 2.1.296 sends it for a Read of `path`.
fn payload(workspace: &str, path: &Path) -> Result<String> {
    let payload = serde_json::json!({
        "session_id": "0d4e8a52-5a3c-4f0e-9a61-6f1c2b7d9e10",
        "transcript_path": "/home/dev/.claude/projects/ws/0d4e8a52-5a3c-4f0e-9a61-6f1c2b7d9e10.jsonl",
        "cwd": workspace, "permission_mode": "default", "hook_event_name": "PreToolUse",
        "tool_name": "Read", "tool_input": {"file_path": utf8(path)?},
    });
    Ok(format!("{payload}\n"))
}

fn utf8(path: &Path) -> Result<&str> {
    Ok(path.to_str().ok_or_else(|| format!("{} is not UTF-8", path.display()))?)
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

/// Runs `cmd` under ptrace and returns its memory figures just before it exits; for a shell that
/// execs, the peak is the larger of the shell's before the exec and the program's at its exit.
fn peak_rss(cmd: &mut Command, feed: Feed<'_>) -> Result<Memory> {
    let stdin = if let Feed::Stdin(_) = feed { Stdio::piped() } else { Stdio::null() };
    let mut child = cmd.stdin(stdin).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
    let traced = trace_to_exit(&mut child, feed);
    if traced.is_err() {
        // SIGKILL ends a process stopped under ptrace too; the errors mean it is gone already.
        let _ = child.kill();
        let _ = child.wait();
    }
    traced
}

fn trace_to_exit(child: &mut Child, feed: Feed<'_>) -> Result<Memory> {
    let pid = Pid::from_raw(i32::try_from(child.id())?);
    wait_until_blocked(pid)?;
    let before_exec = Memory::of(child.id())?;
    ptrace::seize(pid, ptrace::Options::PTRACE_O_TRACEEXIT)?;
    match feed {
        Feed::Stdin(payload) => child.stdin.take().ok_or("no stdin pipe")?.write_all(payload)?,
        Feed::Fifo(path, payload) => File::options().write(true).open(path)?.write_all(payload)?,
    }
    let mut at_exit = None;
    loop {
        match waitpid(pid, None)? {
            WaitStatus::PtraceEvent(_, _, event)
                if event == ptrace::Event::PTRACE_EVENT_EXIT as i32 =>
            {
                at_exit = Some(Memory::of(child.id())?);
                ptrace::cont(pid, None)?;
            }
            // A signal for the tracee: deliver it.
            WaitStatus::Stopped(_, signal) => ptrace::cont(pid, signal)?,
            WaitStatus::PtraceEvent(..) => ptrace::cont(pid, None)?,
            WaitStatus::Exited(_, 0) => break,
            WaitStatus::Exited(_, code) => return Err(format!("it exited with {code}").into()),
            WaitStatus::Signaled(_, signal, _) => {
                return Err(format!("killed by {signal:?}").into());
            }
            _ => {}
        }
    }
    let at_exit = at_exit.ok_or("it exited without a ptrace exit stop")?;
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
        if Instant::now() >= deadline {
            return Err(format!("it did not wait for its payload (state {state:?})").into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}
