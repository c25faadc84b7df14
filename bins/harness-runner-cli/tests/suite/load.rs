//! Load (issue 8, item 4), bounded for the normal test run: 64 concurrent typed tool calls
//! through one runner, 1000 sequential ones with flat memory, and 10 runners live at once.
//! `cargo xtask bench --only load` runs the full sizes (10000 sequential calls, 50 runners) on
//! the release binary and writes the figures to docs/performance.md.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use harness_testkit::BrokerAnswer;
use serde_json::json;

use super::fixture::{Fixture, assert_clean, finish, start, stderr, terminate, tool};

const LIMIT: Duration = Duration::from_secs(60);

/// The runner's resident memory, KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap()
}

fn fixture() -> Fixture {
    let fx = Fixture::new();
    fx.broker.answer("spec.read", BrokerAnswer::result(json!({"text": "north star"})));
    fx
}

#[test]
fn sixty_four_concurrent_tool_calls_are_all_answered() {
    const CALLS: usize = 64;
    let fx = fixture();
    let child = start(&fx, &[]);
    let barrier = Arc::new(Barrier::new(CALLS));
    let threads: Vec<_> = (0..CALLS)
        .map(|i| {
            let (run, barrier) = (fx.run.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                tool(&run, "read_spec", json!({"project": format!("p-{i}")}))
            })
        })
        .collect();
    for thread in threads {
        let (ok, text) = thread.join().unwrap();
        assert!(ok, "{text}");
        assert_eq!(text, r#"{"text":"north star"}"#);
    }
    // Each call reached the broker once, with its own arguments: none lost, none doubled.
    let mut projects: Vec<String> = fx
        .broker
        .calls_of("spec.read")
        .iter()
        .map(|call| call.args["project"].as_str().unwrap().to_owned())
        .collect();
    projects.sort();
    let mut expected: Vec<String> = (0..CALLS).map(|i| format!("p-{i}")).collect();
    expected.sort();
    assert_eq!(projects, expected);
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_clean(&fx.run);
}

#[test]
fn a_thousand_sequential_tool_calls_keep_memory_flat() {
    const WARMUP: usize = 100;
    const CALLS: usize = 1000;
    const BOUND_KIB: u64 = 1024;
    let fx = fixture();
    let child = start(&fx, &[]);
    for _ in 0..WARMUP {
        assert!(tool(&fx.run, "read_spec", json!({"project": "web"})).0);
    }
    let before = rss_kib(child.id());
    for i in 0..CALLS {
        let (ok, text) = tool(&fx.run, "read_spec", json!({"project": "web"}));
        assert!(ok, "call {i}: {text}");
    }
    let after = rss_kib(child.id());
    assert!(
        after <= before + BOUND_KIB,
        "VmRSS grew from {before} KiB to {after} KiB over {CALLS} calls"
    );
    assert_eq!(fx.broker.calls_of("spec.read").len(), WARMUP + CALLS);
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_clean(&fx.run);
}

#[test]
fn ten_runners_live_at_once_all_claim_serve_and_stop_cleanly() {
    const RUNNERS: usize = 10;
    let fixtures: Vec<Fixture> = (0..RUNNERS).map(|_| fixture()).collect();
    let children: Vec<_> = fixtures.iter().map(|fx| fx.spawn(&[])).collect();
    for fx in &fixtures {
        super::fixture::wait_until(LIMIT, "every runner polling", || {
            !fx.broker.calls_of("message.read").is_empty()
        });
    }
    // All live at once: each serves a call while every other is still running.
    for (fx, child) in fixtures.iter().zip(&children) {
        assert!(super::fixture::alive(child.id()));
        let (ok, text) = tool(&fx.run, "read_spec", json!({"project": "web"}));
        assert!(ok, "{text}");
        assert_eq!(fx.broker.calls_of("role.claim").len(), 1);
    }
    for child in &children {
        terminate(child);
    }
    for (fx, child) in fixtures.iter().zip(children) {
        let output = finish(child, LIMIT);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(fx.broker.calls_of("role.release").len(), 1);
        assert_clean(&fx.run);
    }
}
