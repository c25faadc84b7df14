//! `cargo bench -p harness-gate --bench decide`: the cost of one in-process [`decide`] call, on
//! criterion.
//!
//! The call is a typical Claude Code Read: the absolute path of an existing file three levels
//! inside a small workspace, the policy already loaded. Before criterion times anything, the
//! benchmark checks that the gate allows that Read and blocks one outside the workspace: a
//! benchmark of a gate that decides wrongly measures nothing worth having. `cargo xtask bench`
//! reads criterion's `decide/read_inside/new/estimates.json` under `CRITERION_HOME`.

#![allow(clippy::unwrap_used, reason = "a benchmark fails loudly where its setup fails")]

use std::fs;
use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
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

criterion_group!(benches, decide_read);
criterion_main!(benches);
