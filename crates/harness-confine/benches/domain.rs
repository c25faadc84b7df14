//! What confinement costs a turn: a `/bin/true` adapter spawned and reaped, with the domain built
//! for it (policy, ruleset, every rule, entered in the child) against the same with
//! `confine: "off"`, interleaved, medians. The budget is 1 ms per turn (issue 16).
//!
//! `cargo bench -p harness-confine --bench domain`

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_confine::{Mode, SessionPaths, prepare};

const ROUNDS: usize = 300;
const BUDGET: Duration = Duration::from_millis(1);

/// A run like the runner's: workspace, session directory, bundle, request, unslop log.
fn session_paths(root: &Path) -> SessionPaths {
    let run = root.join("run");
    for dir in ["workspace", "run/session/tmp", "run/bundle", "run/turns"] {
        let _ = std::fs::create_dir_all(root.join(dir));
    }
    let _ = std::fs::write(run.join("turns/0001.request"), "Go\n");
    let _ = std::fs::write(run.join("unslop.jsonl"), "");
    SessionPaths {
        workspace: root.join("workspace"),
        session_dir: run.join("session"),
        bundle: run.join("bundle"),
        read_files: vec![run.join("turns/0001.request")],
        append_files: vec![run.join("unslop.jsonl")],
        programs: vec!["/bin/true".into(), "/bin/sh".into()],
        installations: vec!["/bin/true".into()],
        scratch: Vec::new(),
        sockets: vec![run.join("tools.sock")],
        search_path: std::env::var_os("PATH"),
        connect_ports: None,
        network: harness_confine::Network::Loopback,
        listen: Vec::new(),
    }
}

/// One turn's worth: build the domain under `mode`, spawn `/bin/true` in it, reap it.
#[expect(clippy::disallowed_methods, reason = "the benchmark spawns the stand-in adapter")]
fn turn(paths: &SessionPaths, mode: Mode) -> Duration {
    let start = Instant::now();
    let domain = match prepare(&paths.policy(mode)) {
        Ok(domain) => Arc::new(domain),
        Err(error) => panic!("the domain cannot be built: {error}"),
    };
    let mut command = Command::new("/bin/true");
    command.stdin(Stdio::null()).stdout(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    domain.attach(&mut command);
    match command.status() {
        Ok(status) if status.success() => {}
        other => panic!("/bin/true did not run: {other:?}"),
    }
    start.elapsed()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(error) => panic!("no temporary directory: {error}"),
    };
    let paths = session_paths(dir.path());
    let abi = harness_confine::kernel_abi();
    let (mut off, mut on) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for _ in 0..20 {
        turn(&paths, Mode::Off);
        turn(&paths, Mode::BestEffort);
    }
    for _ in 0..ROUNDS {
        off.push(turn(&paths, Mode::Off));
        on.push(turn(&paths, Mode::BestEffort));
    }
    let build: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            let built = prepare(&paths.policy(Mode::BestEffort));
            let elapsed = start.elapsed();
            assert!(built.is_ok_and(|domain| domain.confines() || abi == 0));
            elapsed
        })
        .collect();
    let build = median(build);
    let (off, on) = (median(off), median(on));
    let cost = on.saturating_sub(off);
    println!(
        "building the domain alone (policy, ruleset, rules): median {:.1} µs",
        build.as_secs_f64() * 1e6
    );
    println!("Landlock ABI {abi}; {ROUNDS} turns each, interleaved; /bin/true adapter");
    println!("confine \"off\":         median {:>8.1} µs", off.as_secs_f64() * 1e6);
    println!("confine \"best-effort\": median {:>8.1} µs", on.as_secs_f64() * 1e6);
    println!(
        "domain cost: {:.1} µs per turn (ratio {:.2}); budget {} µs: {}",
        cost.as_secs_f64() * 1e6,
        on.as_secs_f64() / off.as_secs_f64(),
        BUDGET.as_micros(),
        if cost <= BUDGET { "within" } else { "OVER" }
    );
}
