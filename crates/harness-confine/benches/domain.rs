//! What confinement costs a turn: a `/bin/true` adapter spawned and reaped in the sandbox the
//! runner builds for it (policy, ruleset, every rule; user, PID, mount, network and IPC
//! namespaces with a fresh /proc, loopback up and the egress listeners handed over; the
//! Landlock domain entered in the child), against the same with `confine: "off"` and with the
//! Landlock domain alone, interleaved, medians. The budget is 3 ms per turn for the whole
//! sandbox (issue 24); the namespaces' own set-up is the whole less the Landlock domain alone.
//!
//! `cargo bench -p harness-confine --bench domain`

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_confine::{Mode, SessionPaths, prepare};

const ROUNDS: usize = 300;
const FALLBACK: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 3128);
const BUDGET: Duration = Duration::from_millis(3);

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
        // The egress of a turn of the tests: a forwarded model endpoint and the proxy.
        listen: vec!["127.0.0.1:4000".parse().unwrap_or(FALLBACK), FALLBACK],
    }
}

/// What a turn is spawned in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layers {
    Off,
    LandlockOnly,
    /// Every namespace but the network's (`"egress": "open"`).
    NoNet,
    Whole,
}

/// One turn's worth: build the sandbox, spawn `/bin/true` in it (taking the egress listeners
/// it hands over), reap it.
#[expect(clippy::disallowed_methods, reason = "the benchmark spawns the stand-in adapter")]
fn turn(paths: &SessionPaths, layers: Layers) -> Duration {
    let start = Instant::now();
    let mode = if layers == Layers::Off { Mode::Off } else { Mode::Required };
    let mut policy = paths.policy(mode);
    policy.namespaces = matches!(layers, Layers::Whole | Layers::NoNet);
    if layers == Layers::NoNet {
        policy.network = harness_confine::Network::Host;
        policy.listen.clear();
    }
    let domain = match prepare(&policy) {
        Ok(domain) => Arc::new(domain),
        Err(error) => panic!("the domain cannot be built: {error}"),
    };
    let mut command = Command::new("/bin/true");
    command.stdin(Stdio::null()).stdout(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let handoff = domain.attach(&mut command);
    let child = command.spawn();
    if let Some(handoff) = handoff {
        assert!(handoff.receive(Duration::from_secs(5)).is_ok_and(|got| got.len() == 2));
    }
    match child.and_then(|mut child| child.wait()) {
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
    let (mut off, mut landlock, mut no_net, mut whole) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..20 {
        turn(&paths, Layers::Off);
        turn(&paths, Layers::LandlockOnly);
        turn(&paths, Layers::NoNet);
        turn(&paths, Layers::Whole);
    }
    for _ in 0..ROUNDS {
        off.push(turn(&paths, Layers::Off));
        landlock.push(turn(&paths, Layers::LandlockOnly));
        no_net.push(turn(&paths, Layers::NoNet));
        whole.push(turn(&paths, Layers::Whole));
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
    let (off, landlock, no_net, whole) =
        (median(off), median(landlock), median(no_net), median(whole));
    let cost = whole.saturating_sub(off);
    let namespaces = whole.saturating_sub(landlock);
    let us = |duration: Duration| duration.as_secs_f64() * 1e6;
    println!("building the domain alone (policy, ruleset, rules): median {:.1} µs", us(build));
    println!("Landlock ABI {abi}; {ROUNDS} turns each, interleaved; /bin/true adapter");
    println!("confine \"off\":                 median {:>8.1} µs", us(off));
    println!("Landlock domain alone:          median {:>8.1} µs", us(landlock));
    println!("namespaces but the network's:   median {:>8.1} µs", us(no_net));
    println!("whole sandbox (namespaces too): median {:>8.1} µs", us(whole));
    println!("namespace set-up (whole less Landlock alone): {:.1} µs per turn", us(namespaces));
    println!(
        "sandbox cost: {:.1} µs per turn (ratio {:.2}); budget {} µs: {}",
        us(cost),
        whole.as_secs_f64() / off.as_secs_f64(),
        BUDGET.as_micros(),
        if cost <= BUDGET { "within" } else { "OVER" }
    );
}
