//! `cargo bench -p harness-unslop-cli --bench stop_hook`: what Claude Code's Stop hook costs per
//! reply.
//!
//! Claude Code starts `harness-unslop claude-stop` once per reply, so the figure is a whole
//! process: spawn, read a Stop payload holding a 32 KiB reply, load and compile the default
//! lists.json, check, append a line to the log, exit. It is timed against the floor
//! `sh -c 'exec /bin/true < payload'` and a bare `/bin/true` with the same stdin, all interleaved.
//!
//! Prints a Markdown report and a `bench-row` line for `cargo xtask bench`. Target: the flagged
//! reply's hook at most 2× the floor.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![expect(clippy::disallowed_methods, reason = "the benchmark spawns the processes it times")]

use std::error::Error;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

use harness_adapters::InstallLayout;
use harness_benchkit::{Row, Samples, Unit, WARMUP_RUNS, runs, time_interleaved};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const TARGET_RATIO: f64 = 2.0;
/// The reply's size: the spec's 32 KB.
const REPLY_BYTES: usize = 32 * 1024;
/// Prose of the kind an agent's reply holds, free of every pattern of the default list.
const CLEAN_PARAGRAPH: &str = "The runner reads the next message from the broker, builds the \
    request with the current state at the top, and starts the adapter in its own process group. \
    When the turn exits 0 the answer goes back to the sender as a RESULT; when it fails, the \
    sender learns why. The tests start both CLIs against the scripted model and compare the \
    requests it recorded with what the bundle promised.\n\n";
/// Sentences with tells of the default list, spread through the flagged reply.
const SLOP_SENTENCES: &[&str] = &[
    "Let us delve into the details of the gate. ",
    "It's important to note that the hooks never block. ",
    "The test suite stands as a testament to our care. ",
    "Logging plays a crucial role in the runner. ",
];

fn main() -> Result<()> {
    let hook = Path::new(env!("CARGO_BIN_EXE_harness-unslop"));
    let workspace = camino::Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lists = InstallLayout::from_checkout(&workspace, camino::Utf8Path::new("")).unslop_lists;
    let runs = runs();
    let dir = tempfile::Builder::new().prefix("harness-bench-unslop-").tempdir()?;
    let path = |name: &str| dir.path().join(name);
    fs::create_dir(path("home"))?;
    fs::write(path("flagged.json"), stop_payload(&reply(true)))?;
    fs::write(path("clean.json"), stop_payload(&reply(false)))?;
    let env = |mut cmd: Command| {
        cmd.env_clear().env("HOME", path("home")).env("PATH", "/usr/bin:/bin");
        cmd
    };
    let stop_hook = || {
        let mut cmd = env(Command::new(hook));
        cmd.arg("claude-stop").arg("--lists").arg(&lists).env("MOSAIC_UNSLOP_LOG", path("log"));
        cmd
    };
    // The benchmark must measure a working check: the flagged reply is logged `flagged`, the
    // clean one `checked`.
    for (payload, event) in [("flagged.json", "flagged"), ("clean.json", "checked")] {
        let status = stop_hook().stdin(File::open(path(payload))?).status()?;
        let log = fs::read_to_string(path("log"))?;
        let last = log.lines().last().unwrap_or_default();
        if !status.success() || !last.contains(&format!("\"event\":\"{event}\"")) {
            return Err(format!("the Stop hook must log {event} for {payload}: {last:?}").into());
        }
    }
    let entries =
        serde_json::from_str::<serde_json::Value>(&fs::read_to_string(&lists)?)?["entries"]
            .as_array()
            .map_or(0, Vec::len);

    eprintln!(
        "bench stop_hook: {runs} runs each of the hook (two replies), the floor, /bin/true ..."
    );
    let mut floor = env(Command::new("/bin/sh"));
    let quoted = path("flagged.json").to_str().ok_or("a non-UTF-8 path")?.replace('\'', r"'\''");
    floor.arg("-c").arg(format!("exec /bin/true < '{quoted}'"));
    let mut commands: [(Command, PathBuf); 4] = [
        (stop_hook(), path("flagged.json")),
        (stop_hook(), path("clean.json")),
        (env(Command::new("/bin/true")), path("flagged.json")),
        (floor, path("flagged.json")),
    ];
    let [flagged, clean, bare, floor]: [Samples; 4] =
        time_interleaved(&mut commands, runs)?.try_into().map_err(|_| "four sample sets")?;

    println!(
        "{runs} timed runs each after {WARMUP_RUNS} warm-up runs, interleaved. The hook binary is \
         {:.2} MiB; the default list has {entries} entries.\n",
        fs::metadata(hook)?.len() as f64 / (1024.0 * 1024.0)
    );
    println!("| process | median | p90 | × bare `/bin/true` | × the floor |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (name, s) in [
        ("Stop hook, a flagged 32 KiB reply (`claude-stop`)", &flagged),
        ("Stop hook, a clean 32 KiB reply", &clean),
        ("bare `/bin/true`, the same stdin (reference)", &bare),
        ("the floor: `sh -c 'exec /bin/true < payload'`", &floor),
    ] {
        println!(
            "| {name} | {:.3} ms | {:.3} ms | {:.2}× | {:.2}× |",
            s.median() * 1e3,
            s.quantile(0.9) * 1e3,
            s.median() / bare.median(),
            s.median() / floor.median()
        );
    }
    println!("\n{EXPLAINED}");
    println!(
        "{}",
        Row::ratio(
            ("unslop", "the Stop hook on a 32 KiB flagged reply"),
            Unit::Ms,
            flagged.median() * 1e3,
            ("`sh -c 'exec /bin/true < payload'`", floor.median() * 1e3),
            TARGET_RATIO,
        )
    );
    Ok(())
}

const EXPLAINED: &str = "\
What is measured:

- Each figure is the wall time from just before the spawn to just after the wait of
  `harness-unslop claude-stop --lists lists.json` (the default list), with `MOSAIC_UNSLOP_LOG` set.
  Its stdin is a file holding a Stop payload as Claude Code 2.1.296 sends it, whose
  `last_assistant_message` is a 32 KiB reply: paragraphs of ordinary technical prose, with four
  tells of the default list spread through it in the flagged case and none in the clean one.
  Each run reads the payload, loads and compiles the whole list, checks the reply and appends its
  line to the log; before any run is timed, the benchmark checks that the hook logs `flagged` and
  `checked` respectively. Stdout and stderr are /dev/null; the environment holds HOME, PATH and
  the log only.
- The floor the target is set against is `sh -c 'exec /bin/true < payload'`: a process started
  with the payload on its stdin. Bare `/bin/true` is the cheapest process there is.
- All four take turns, each going first in every fourth round; ratios are median over median.
- Where the time goes, measured in process: parsing the list's patterns takes about 0.4 ms,
  building their NFA 0.1 ms, and the lazy DFA's pass over 32 KiB 0.2 ms. A precompiled full DFA
  would skip the parse and the build, but for this list it is 54 MB and takes 8 s to build, so the
  hook compiles the list in each process.";

/// Returns a reply of [`REPLY_BYTES`]: clean paragraphs, with a tell every eighth one if `slop`.
fn reply(slop: bool) -> String {
    let mut out = String::with_capacity(REPLY_BYTES + CLEAN_PARAGRAPH.len());
    let mut n = 0;
    while out.len() < REPLY_BYTES {
        if slop && n % 8 == 3 {
            out.push_str(SLOP_SENTENCES[n / 8 % SLOP_SENTENCES.len()]);
        }
        out.push_str(CLEAN_PARAGRAPH);
        n += 1;
    }
    out.truncate(REPLY_BYTES);
    out
}

/// Returns a Stop payload as Claude Code 2.1.296 sends it.
fn stop_payload(reply: &str) -> String {
    serde_json::json!({
        "session_id": "0d4e8a52-5a3c-4f0e-9a61-6f1c2b7d9e10",
        "transcript_path": "/home/dev/.claude/projects/ws/0d4e8a52-5a3c-4f0e-9a61-6f1c2b7d9e10.jsonl",
        "cwd": "/home/dev/ws",
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": false,
        "last_assistant_message": reply,
        "background_tasks": [],
        "session_crons": [],
    })
    .to_string()
}
