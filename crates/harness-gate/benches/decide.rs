//! `cargo bench -p harness-gate --bench decide`: the cost of one in-process [`decide`] call.
//!
//! The call is a typical Claude Code Read: the absolute path of an existing file three levels
//! inside a small workspace. Calls are timed in batches with `Instant`, so that the clock's own
//! cost is spread over many calls, and the median over batches is reported, because the machine
//! may be shared and a noisy batch should not move the figure. No criterion: one number is all
//! `cargo xtask bench` needs, and it reads the last line (`bench-result decide_read_us=…`).

use std::error::Error;
use std::fs;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use harness_gate::{Decision, Harness, Policy, PolicyConfig, ToolCall, decide};

/// How long one batch should take at least, so that `Instant`'s cost and resolution do not count.
const BATCH_TIME: Duration = Duration::from_millis(5);
/// How many batches the median is taken over.
const BATCHES: usize = 201;
/// Batches run and thrown away first, so that the dentry cache and the branch predictors are warm.
const WARMUP_BATCHES: usize = 20;

fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let workspace = dir.path().join("ws");
    for file in ["Cargo.toml", "README.md", "src/main.rs", "src/core/lib.rs", "src/core/walk.rs"] {
        let path = workspace.join(file);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&path, "// A file of the benchmark's workspace.\n")?;
    }
    fs::create_dir_all(dir.path().join("home"))?;
    fs::write(dir.path().join("secret.txt"), "outside\n")?;

    let policy = Policy::new(PolicyConfig {
        harness: Harness::ClaudeCode,
        workspace: utf8(&workspace)?.to_owned(),
        tools: ["Read", "Write", "Edit", "Grep", "Glob"].map(String::from).to_vec(),
        typed: vec!["list_tasks".to_owned()],
        home: Some(utf8(&dir.path().join("home"))?.to_owned()),
    })?;
    let inside = read_call(&workspace.join("src/core/lib.rs"))?;
    let outside = read_call(&dir.path().join("secret.txt"))?;

    // A benchmark of a gate that decides wrongly measures nothing worth having.
    if let Decision::Block(blocked) = decide(&policy, &inside) {
        return Err(format!("the typical Read was blocked: {blocked}").into());
    }
    if decide(&policy, &outside).is_allow() {
        return Err("a Read outside the workspace was allowed".into());
    }

    let calls_per_batch = calibrate(&policy, &inside);
    for _ in 0..WARMUP_BATCHES {
        batch(&policy, &inside, calls_per_batch);
    }
    let mut per_call_us: Vec<f64> = (0..BATCHES)
        .map(|_| {
            batch(&policy, &inside, calls_per_batch).as_secs_f64() * 1e6 / calls_per_batch as f64
        })
        .collect();
    per_call_us.sort_by(f64::total_cmp);
    let median = per_call_us[per_call_us.len() / 2];
    let p90 = per_call_us[per_call_us.len() * 9 / 10];
    println!(
        "decide, Claude Code Read of a file 3 levels inside: {median:.2} µs per call \
         (median of {BATCHES} batches of {calls_per_batch} calls; p90 {p90:.2} µs)"
    );
    println!("bench-result decide_read_us={median:.3} p90_us={p90:.3}");
    Ok(())
}

/// Returns the call Claude Code's PreToolUse hook receives for a Read of `path`.
fn read_call(path: &Path) -> Result<ToolCall, Box<dyn Error>> {
    let payload = serde_json::json!({
        "session_id": "0d4e8a52-5a3c-4f0e-9a61-6f1c2b7d9e10",
        "transcript_path": "/home/dev/.claude/projects/ws/0d4e8a52.jsonl",
        "cwd": path.parent().map(utf8).transpose()?,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": { "file_path": utf8(path)? },
    });
    Ok(ToolCall::from_claude_hook_json(payload.to_string().as_bytes())?)
}

fn utf8(path: &Path) -> Result<&str, Box<dyn Error>> {
    path.to_str().ok_or_else(|| format!("{} is not UTF-8", path.display()).into())
}

/// Returns how many calls make a batch last at least [`BATCH_TIME`].
fn calibrate(policy: &Policy, call: &ToolCall) -> usize {
    let mut calls = 16;
    while batch(policy, call, calls) < BATCH_TIME && calls < 1 << 24 {
        calls *= 2;
    }
    calls
}

/// Runs `calls` decisions and returns how long they took together.
fn batch(policy: &Policy, call: &ToolCall, calls: usize) -> Duration {
    let started = Instant::now();
    for _ in 0..calls {
        black_box(decide(black_box(policy), black_box(call)));
    }
    started.elapsed()
}
