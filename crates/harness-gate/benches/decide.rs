//! `cargo bench -p harness-gate --bench decide`: the cost of one in-process [`decide`] call, on
//! criterion.
//!
//! The call is a typical Claude Code Read: the absolute path of an existing file three levels
//! inside a small workspace, the policy already loaded. Before criterion times anything, the
//! benchmark checks that the gate allows that Read and blocks one outside the workspace: a
//! benchmark of a gate that decides wrongly measures nothing worth having. `cargo xtask bench`
//! reads criterion's `decide/read_inside/new/estimates.json` under `CRITERION_HOME`.
//!
//! Then, outside criterion, what a search costs the gate on a 10,000-file workspace: Pi's grep
//! and find and Claude Code's Grep walk the tree for the ignore files ripgrep and fd read on
//! their own (docs/gate.md, "Ignore files"). The floor is Pi's `ls` of the same directory, the
//! same path checks without the walk, timed in turns with the searches in the same run; the
//! `bench-row` lines give each search's median over that floor's (at most 5 ms more).

#![allow(clippy::unwrap_used, reason = "a benchmark fails loudly where its setup fails")]

use std::fs;
use std::hint::black_box;
use std::path::Path;

use std::time::Instant;

use criterion::{Criterion, criterion_group};
use harness_benchkit::{Row, Unit, median, runs};
use harness_gate::{Decision, Harness, Policy, PolicyConfig, ToolCall, decide};

fn decide_read(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    for file in ["Cargo.toml", "README.md", "src/main.rs", "src/core/lib.rs", "src/core/walk.rs"] {
        let path = workspace.join(file);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "// A file of the benchmark's workspace.\n").unwrap();
    }
    fs::create_dir_all(dir.path().join("home")).unwrap();
    fs::write(dir.path().join("secret.txt"), "outside\n").unwrap();
    let policy = Policy::new(PolicyConfig {
        harness: Harness::ClaudeCode,
        workspace: workspace.to_str().unwrap().to_owned(),
        tools: ["Read", "Write", "Edit", "Grep", "Glob"].map(String::from).to_vec(),
        typed: vec!["list_tasks".to_owned()],
        home: Some(dir.path().join("home").to_str().unwrap().to_owned()),
    })
    .unwrap();
    let inside = read_call(&workspace.join("src/core/lib.rs"));
    let outside = read_call(&dir.path().join("secret.txt"));
    assert!(matches!(decide(&policy, &inside), Decision::Allow), "the typical Read was blocked");
    assert!(!decide(&policy, &outside).is_allow(), "a Read outside the workspace was allowed");

    c.benchmark_group("decide").bench_function("read_inside", |b| {
        b.iter(|| decide(black_box(&policy), black_box(&inside)))
    });
}

/// Returns the call Claude Code's PreToolUse hook receives for a Read of `path`.
fn read_call(path: &Path) -> ToolCall {
    let payload = serde_json::json!({
        "session_id": "0d4e8a52-5a3c-4f0e-9a61-6f1c2b7d9e10",
        "transcript_path": "/home/dev/.claude/projects/ws/0d4e8a52.jsonl",
        "cwd": path.parent().unwrap().to_str().unwrap(),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": { "file_path": path.to_str().unwrap() },
    });
    ToolCall::from_claude_hook_json(payload.to_string().as_bytes()).unwrap()
}

/// The files of the search benchmark's workspace: 10 directories of 10 directories of 100 files.
const FILES: usize = 10_000;

/// Builds the 10,000-file workspace (with a `.gitignore` at its root and in every second
/// directory, and git's `info/exclude`) and returns it with policies for both harnesses.
fn search_workspace(dir: &Path) -> (Policy, Policy) {
    let workspace = dir.join("big");
    fs::create_dir_all(workspace.join(".git/info")).unwrap();
    fs::write(workspace.join(".git/info/exclude"), "# git ls-files --others --exclude-from\n")
        .unwrap();
    fs::write(workspace.join(".gitignore"), "target/\n").unwrap();
    let mut made = 0;
    for top in 0..10 {
        for sub in 0..10 {
            let leaf = workspace.join(format!("crate{top}/src{sub}"));
            fs::create_dir_all(&leaf).unwrap();
            if sub % 2 == 0 {
                fs::write(leaf.join(".gitignore"), "*.tmp\n").unwrap();
            }
            for file in 0..100 {
                fs::write(leaf.join(format!("m{file}.rs")), "fn main() {}\n").unwrap();
                made += 1;
            }
        }
    }
    assert_eq!(made, FILES);
    fs::create_dir_all(dir.join("home")).unwrap();
    let policy = |harness, tools: &[&str]| {
        Policy::new(PolicyConfig {
            harness,
            workspace: workspace.to_str().unwrap().to_owned(),
            tools: tools.iter().map(|tool| (*tool).to_owned()).collect(),
            typed: Vec::new(),
            home: Some(dir.join("home").to_str().unwrap().to_owned()),
        })
        .unwrap()
    };
    (policy(Harness::Pi, &["grep", "find", "ls"]), policy(Harness::ClaudeCode, &["Grep"]))
}

/// Times each search against the `ls` floor, in turns, and prints one `bench-row` per search.
fn search_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (pi, claude) = search_workspace(dir.path());
    let call = |tool: &str, input: serde_json::Value| ToolCall { tool: tool.to_owned(), input };
    let floor = call("ls", serde_json::json!({}));
    let searches = [
        ("Pi's grep", &pi, call("grep", serde_json::json!({"pattern": "fn main"}))),
        ("Pi's find", &pi, call("find", serde_json::json!({"pattern": "*.rs"}))),
        ("Claude Code's Grep", &claude, call("Grep", serde_json::json!({"pattern": "fn main"}))),
    ];
    assert!(decide(&pi, &floor).is_allow(), "the floor's ls was blocked");
    for (name, policy, search) in &searches {
        assert!(decide(policy, search).is_allow(), "{name} of the workspace was blocked");
    }
    // An ignore file that leads out, deep in the tree, is found: the walk is not skipped.
    let deep = dir.path().join("big/crate9/src9/.ignore");
    std::os::unix::fs::symlink(dir.path().join("home"), &deep).unwrap();
    for (name, policy, search) in &searches {
        assert!(!decide(policy, search).is_allow(), "{name} missed a deep ignore link out");
    }
    fs::remove_file(&deep).unwrap();

    let time = |policy: &Policy, call: &ToolCall| {
        let started = Instant::now();
        black_box(decide(black_box(policy), black_box(call)));
        started.elapsed().as_secs_f64() * 1000.0
    };
    let rounds = runs().min(200);
    let bare = |root: &Path| {
        let started = Instant::now();
        let mut stack = vec![root.to_path_buf()];
        let mut entries = 0_usize;
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                entries += 1;
                if entry.file_type().unwrap().is_dir() {
                    stack.push(entry.path());
                }
            }
        }
        black_box(entries);
        started.elapsed().as_secs_f64() * 1000.0
    };
    let mut floor_ms = Vec::with_capacity(rounds);
    let mut bare_ms = Vec::with_capacity(rounds);
    let mut search_ms = vec![Vec::with_capacity(rounds); searches.len()];
    for round in 0..rounds + 10 {
        bare_ms.push(bare(&dir.path().join("big")));
        // The floor goes first in one round, last in the next.
        if round % 2 == 0 {
            floor_ms.push(time(&pi, &floor));
        }
        for (index, (_, policy, search)) in searches.iter().enumerate() {
            search_ms[index].push(time(policy, search));
        }
        if round % 2 == 1 {
            floor_ms.push(time(&pi, &floor));
        }
    }
    // The first ten rounds warm the caches and are dropped.
    let floor = median(floor_ms.split_off(10));
    println!(
        "decide/search_10000_files: for scale, a bare recursive std::fs::read_dir of the tree, in \
         the same rounds, {:.3} ms",
        median(bare_ms.split_off(10))
    );
    println!("decide/search_10000_files: the floor (Pi's ls of the workspace) {floor:.3} ms");
    for ((name, ..), mut samples) in searches.iter().zip(search_ms) {
        let value = median(samples.split_off(10));
        println!("decide/search_10000_files: {name} {value:.3} ms");
        let label = format!("decide() in process, {name} on a {FILES}-file workspace");
        let row = Row::added(("gate", &label), Unit::Ms, value, ("Pi's ls of it", floor), 5.0);
        println!("{row}");
    }
}

criterion_group!(benches, decide_read);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    search_rows();
}
