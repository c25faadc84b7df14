//! `cargo bench -p harness-runner-cli --bench git`: `push_working` and `fetch_review` through the
//! release harness-runner's tool socket, each against a floor measured in the same run: the same
//! git work done straight on the clone, with the same call to the host, which is what the runner
//! did before its git got a repository of its own (docs/runner.md, "The runner's git").
//!
//! The difference is what keeping git away from the session's files costs a call: the call's
//! bare repository made and removed, the refs read by the runner, git's Landlock domain, the
//! fetched pack copied into the clone, and the tool socket's own round trip. The clone has 50
//! commits; the host is harness-testkit's fake host. Prints a Markdown report and a `bench-row`
//! line per figure for `cargo xtask bench`. Target: each call adds at most 50 ms.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::error::Error;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harness_benchkit::{Row, Unit, binary_beside, median};
use harness_bus::{Capability, HostSocket, HostSocketConfig};
use harness_testkit::{
    Cli, FakeHost, SESSION_CAP, SessionOptions, SessionScenario, git, require_cli,
};
use serde_json::{Value, json};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const CALLS: usize = 60;
const WARMUP: usize = 5;
const COMMITS: usize = 50;
const TARGET_ADDED_MS: f64 = 50.0;
const WORK_REF: &str = "work/vikunja-web-7";

fn main() -> Result<()> {
    let runner = Path::new(env!("CARGO_BIN_EXE_harness-runner"));
    for sibling in ["harness-gate", "harness-mcp", "harness-unslop"] {
        binary_beside(env!("CARGO_BIN_EXE_harness-runner"), sibling)?;
    }
    let bin = runner.parent().ok_or("the runner has no directory")?;
    let pi = require_cli(Cli::Pi).ok_or("Pi is not installed; run cargo xtask setup")?;
    let host = FakeHost::start()?;
    let mut options = SessionOptions::from_checkout(bin)?;
    options.projects = vec![harness_tools::Project { name: "web".into(), clone: true }];
    options.actions = vec!["review.verdict".to_owned(), "git.push.working".to_owned()];
    options.run_json.insert("gitSocket".to_owned(), json!(host.git_socket()));
    let scenario = SessionScenario::with_options(&pi, options)?;
    let clone = scenario.workspace().join("web");
    std::fs::create_dir_all(&clone)?;
    git(&clone, &["init", "--quiet", "-b", "feature"])?;
    for n in 0..COMMITS {
        std::fs::write(clone.join(format!("file-{}.txt", n % 10)), format!("{n}\n"))?;
        git(&clone, &["add", "."])?;
        git(&clone, &["commit", "--quiet", "-m", &format!("commit {n}")])?;
    }
    // The review: the clone's history and one commit more, from another clone.
    let scratch = tempfile::tempdir()?;
    let other = scratch.path().join("other");
    git(scratch.path(), &["clone", "--quiet", clone.to_str().ok_or("path")?, "other"])?;
    std::fs::write(other.join("review.txt"), "review\n")?;
    git(&other, &["add", "."])?;
    git(&other, &["commit", "--quiet", "-m", "review"])?;
    let working = host.working();
    let working = working.to_str().ok_or("path")?;
    git(&other, &["push", "--quiet", working, &format!("HEAD:refs/heads/{WORK_REF}")])?;
    host.review("rr-1", "web", WORK_REF);
    // The floor's clone: a copy, so both fetch into a clone that has not got the review yet.
    let floor_clone = scratch.path().join("floor");
    git(scratch.path(), &["clone", "--quiet", "--bare", clone.to_str().ok_or("path")?, "floor"])?;

    let mut child = scenario.spawn_runner(runner)?;
    let started = Instant::now();
    while scenario.broker().calls_of("message.read").is_empty() {
        if child.try_wait()?.is_some() || started.elapsed() > Duration::from_secs(20) {
            return Err("the runner did not poll".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let socket = scenario.run_dir().join("tools.sock");
    let host_socket = HostSocket::new(HostSocketConfig {
        socket: host.git_socket(),
        timeout: Duration::from_secs(60),
        max_bytes: 32 * 1024 * 1024,
    });
    let cap = Capability::new(SESSION_CAP).map_err(|error| format!("{error:?}"))?;
    let push_args = json!({"task_ref": "web-12", "project": "web", "branch": "feature"});

    let mut results = Vec::new();
    for (label, through, floor) in [
        (
            "push_working through tools.sock",
            Box::new(|| tool(&socket, "push_working", &push_args)) as Box<dyn Fn() -> Result<f64>>,
            Box::new(|| floor_push(&clone, &host_socket, &cap, scratch.path()))
                as Box<dyn Fn() -> Result<f64>>,
        ),
        (
            "fetch_review through tools.sock",
            Box::new(|| tool(&socket, "fetch_review", &json!({"request": "rr-1"}))),
            Box::new(|| floor_fetch(&floor_clone, &host_socket, &cap, scratch.path())),
        ),
    ] {
        eprintln!("bench git: {CALLS} × {label}, interleaved with its floor ...");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for round in 0..WARMUP + CALLS {
            let (x, y) = if round % 2 == 0 {
                (through()?, floor()?)
            } else {
                let y = floor()?;
                (through()?, y)
            };
            if round >= WARMUP {
                a.push(x);
                b.push(y);
            }
        }
        results.push((label, median(a), median(b)));
    }
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id())?).ok_or("no pid")?;
    rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
    child.wait()?;

    println!("| benchmark | median | floor: the same git straight on the clone | adds |");
    println!("| --- | ---: | ---: | ---: |");
    for (label, through, floor) in &results {
        println!("| {label} | {through:.1} ms | {floor:.1} ms | {:.1} ms |", through - floor);
    }
    println!(
        "\nEach call is one connection to `tools.sock` and waits for the reply; the floor runs \
         what the runner ran before it had a repository of its own (`git rev-parse` and `git \
         bundle create` in the clone, then the host call; or the host call, then `git fetch` from \
         the bundle and `git rev-parse` in a bare copy of the clone) from the bench itself, with \
         no tool socket and no Landlock domain. {CALLS} of each, interleaved, after {WARMUP} \
         warm-up; the clone has {COMMITS} commits."
    );
    for (label, through, floor) in results {
        let row = Row::added(
            ("git", label),
            Unit::Ms,
            through,
            ("the same git straight", floor),
            TARGET_ADDED_MS,
        );
        println!("{row}");
    }
    Ok(())
}

/// One tool call on the runner's socket; its duration in ms. A failed call fails the bench.
fn tool(socket: &Path, name: &str, args: &Value) -> Result<f64> {
    let started = Instant::now();
    let mut stream = UnixStream::connect(socket)?;
    stream.write_all(format!("{}\n", json!({"tool": name, "args": args})).as_bytes())?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let elapsed = started.elapsed().as_secs_f64() * 1e3;
    let reply: Value = serde_json::from_str(&line)?;
    if reply["ok"] != true {
        return Err(format!("{name} failed: {line}").into());
    }
    Ok(elapsed)
}

fn bundle_path(dir: &Path) -> PathBuf {
    let path = dir.join("floor.bundle");
    let _ = std::fs::remove_file(&path);
    path
}

/// The push as the runner made it before: git on the clone, then the host.
fn floor_push(clone: &Path, host: &HostSocket, cap: &Capability, dir: &Path) -> Result<f64> {
    let started = Instant::now();
    let commit = git(clone, &["rev-parse", "--verify", "--quiet", "refs/heads/feature^{commit}"])?;
    let bundle = bundle_path(dir);
    git(
        clone,
        &["bundle", "create", "--quiet", bundle.to_str().ok_or("path")?, "refs/heads/feature"],
    )?;
    let args =
        json!({"task_ref": "web-12", "project": "web", "branch": "feature", "commit": commit});
    host.call(cap, "working.push", &args, Some(&bundle), None)
        .map_err(|error| format!("the floor's push failed: {error:?}"))?;
    Ok(started.elapsed().as_secs_f64() * 1e3)
}

/// The fetch as the runner made it before: the host, then git on the clone.
fn floor_fetch(clone: &Path, host: &HostSocket, cap: &Capability, dir: &Path) -> Result<f64> {
    let started = Instant::now();
    let bundle = bundle_path(dir);
    host.call(cap, "working.fetch", &json!({"request": "rr-1"}), None, Some(&bundle))
        .map_err(|error| format!("the floor's fetch failed: {error:?}"))?;
    let tracking = format!("refs/remotes/working/{WORK_REF}");
    let spec = format!("+refs/heads/{WORK_REF}:{tracking}");
    git(
        clone,
        &[
            "-c",
            "fetch.fsckObjects=true",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            bundle.to_str().ok_or("path")?,
            &spec,
        ],
    )?;
    git(clone, &["rev-parse", "--verify", "--quiet", &tracking])?;
    Ok(started.elapsed().as_secs_f64() * 1e3)
}
