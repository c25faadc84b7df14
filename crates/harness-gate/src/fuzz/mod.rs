//! The gate, generated: random trees and random calls for both harnesses, each allowed call held
//! to an oracle that shares no code with the gate's resolution (docs/gate.md, "Fuzzing").
//!
//! Compiled only with the `fuzzing` feature, which `cargo xtask fuzz` and harness-gate's own
//! tests enable: it writes trees into a scratch directory, which the gate itself never does.
//!
//! The property: no call the gate allows can make the tool open a path whose real target (by
//! the kernel's `canonicalize` of its longest existing prefix) is outside the workspace's real
//! path or goes through a symlink that does not resolve; every path the tool might open counts
//! ([`oracle::opens`]). Tree `t` of a run with seed `s` is built from [`Rng::for_tree`]`(s, t)`,
//! so the seed and the tree's index reproduce a failure whatever the number of threads.

mod generate;
mod oracle;
mod urls;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use serde_json::Value;

pub use generate::{Rng, Tree};
pub use oracle::{Open, Setting, check_open, kernel_target, opens};
pub use urls::{file_url_corpus, reaches_file_url_to_path};

use crate::{Decision, Harness, Policy, PolicyConfig, ToolCall, decide};

/// One fuzzing run.
#[derive(Debug, Clone)]
pub struct FuzzConfig {
    /// The seed every tree's generator derives from.
    pub seed: u64,
    /// How many calls in all.
    pub calls: u64,
    /// How many calls each tree gets before the next is built.
    pub calls_per_tree: u64,
    /// An existing directory the trees are built in (one subdirectory each, removed after).
    pub scratch: PathBuf,
    /// How many threads build trees and decide calls.
    pub threads: usize,
}

/// An allowed call the oracle says escapes.
#[derive(Debug, Clone)]
pub struct Escape {
    /// The run's seed.
    pub seed: u64,
    /// The tree's index in the run.
    pub tree: u64,
    /// The tree, as text.
    pub tree_text: String,
    /// The harness.
    pub harness: Harness,
    /// The tool's name.
    pub tool: String,
    /// The tool's input.
    pub input: Value,
    /// What the tool would open, and where that leads.
    pub reason: String,
}

impl fmt::Display for Escape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "ESCAPE (seed {}, tree {})", self.seed, self.tree)?;
        let harness = if self.harness == Harness::Pi { "pi" } else { "claude" };
        writeln!(f, "call: {harness} {} {}", self.tool, ascii_json(&self.input))?;
        writeln!(f, "opens: {}", generate::escape(&self.reason))?;
        write!(f, "tree:\n{}", self.tree_text)
    }
}

/// `value` as JSON with every non-ASCII character as a `\\uXXXX` escape: the line reads the
/// same on any terminal and pastes into a case (`tests/suite/tree.rs` notation).
fn ascii_json(value: &Value) -> String {
    let mut out = String::new();
    for c in value.to_string().chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// What a run saw.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Trees built.
    pub trees: u64,
    /// Calls decided.
    pub calls: u64,
    /// Calls allowed.
    pub allowed: u64,
    /// Calls blocked, by rule code.
    pub blocked: BTreeMap<&'static str, u64>,
    /// Allowed calls that open something outside (the first few).
    pub escapes: Vec<Escape>,
    /// Allowed calls that open at least one path (not typed tools).
    pub allowed_with_opens: u64,
    /// Paths checked by the oracle for allowed calls.
    pub opens_checked: u64,
}

/// How many escapes a report keeps.
const KEEP_ESCAPES: usize = 10;

impl Report {
    fn merge(&mut self, other: Report) {
        self.trees += other.trees;
        self.calls += other.calls;
        self.allowed += other.allowed;
        self.allowed_with_opens += other.allowed_with_opens;
        self.opens_checked += other.opens_checked;
        for (rule, count) in other.blocked {
            *self.blocked.entry(rule).or_default() += count;
        }
        for escape in other.escapes {
            if self.escapes.len() < KEEP_ESCAPES {
                self.escapes.push(escape);
            }
        }
    }

    /// Calls blocked in all.
    pub fn blocked_total(&self) -> u64 {
        self.blocked.values().sum()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} calls on {} trees: {} allowed ({} opening {} paths, all checked), {} blocked",
            self.calls,
            self.trees,
            self.allowed,
            self.allowed_with_opens,
            self.opens_checked,
            self.blocked_total()
        )?;
        for (rule, count) in &self.blocked {
            writeln!(f, "  blocked {rule:<22} {count}")?;
        }
        write!(f, "escapes: {}", self.escapes.len())
    }
}

/// Runs `config.calls` calls; `progress` sees the running totals after each tree. Stops early
/// after the first tree with an escape.
pub fn run(config: &FuzzConfig, progress: &mut dyn FnMut(&Report)) -> io::Result<Report> {
    let per_tree = config.calls_per_tree.max(1);
    let trees = config.calls.div_ceil(per_tree);
    let threads = config.threads.clamp(1, 64) as u64;
    let stop = AtomicBool::new(false);
    let (sender, receiver) = mpsc::channel::<io::Result<Report>>();
    let mut total = Report::default();
    let mut failure = None;
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let sender = sender.clone();
            let stop = &stop;
            scope.spawn(move || {
                let mut tree = thread;
                while tree < trees && !stop.load(Ordering::Relaxed) {
                    let calls = per_tree.min(config.calls - tree * per_tree);
                    let result = run_tree(config, tree, calls);
                    let failed = result.as_ref().map_or(true, |report| !report.escapes.is_empty());
                    if failed {
                        stop.store(true, Ordering::Relaxed);
                    }
                    if sender.send(result).is_err() {
                        return;
                    }
                    tree += threads;
                }
            });
        }
        drop(sender);
        for result in receiver {
            match result {
                Ok(report) => {
                    total.merge(report);
                    progress(&total);
                }
                Err(error) => failure = Some(error),
            }
        }
    });
    match failure {
        Some(error) => Err(error),
        None => Ok(total),
    }
}

/// Builds tree `index` and decides `calls` calls in it.
fn run_tree(config: &FuzzConfig, index: u64, calls: u64) -> io::Result<Report> {
    let dir = config.scratch.join(format!("tree-{index}"));
    if std::fs::symlink_metadata(&dir).is_ok() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir(&dir)?;
    let mut rng = Rng::for_tree(config.seed, index);
    let result = Tree::build(&dir, &mut rng).and_then(|tree| {
        let mut report = run_calls(&tree, &mut rng, calls)?;
        for escape in &mut report.escapes {
            escape.seed = config.seed;
            escape.tree = index;
        }
        Ok(report)
    });
    std::fs::remove_dir_all(&dir)?;
    result
}

/// Decides `calls` random calls in `tree` and checks each allowed one against the oracle.
pub fn run_calls(tree: &Tree, rng: &mut Rng, calls: u64) -> io::Result<Report> {
    let mut report = Report { trees: 1, ..Report::default() };
    let policy = |harness: Harness| {
        let tools: &[&str] = match harness {
            Harness::Pi => &["read", "write", "edit", "grep", "find", "ls"],
            Harness::ClaudeCode => &["Read", "Write", "Edit", "MultiEdit", "Grep", "Glob"],
        };
        Policy::new(PolicyConfig {
            harness,
            workspace: tree.workspace.clone(),
            tools: tools.iter().map(|tool| (*tool).to_owned()).collect(),
            typed: vec!["list_tasks".to_owned()],
            home: Some(tree.home.clone()),
        })
        .map_err(io::Error::other)
    };
    let pi = policy(Harness::Pi)?;
    let claude = policy(Harness::ClaudeCode)?;
    let setting = Setting {
        workspace: tree.workspace.clone(),
        workspace_real: std::fs::canonicalize(&tree.workspace)?,
        home: tree.home.clone(),
    };
    for _ in 0..calls {
        let harness = if rng.chance(50) { Harness::Pi } else { Harness::ClaudeCode };
        let (tool, input) = tree.call(harness, rng);
        let policy = if harness == Harness::Pi { &pi } else { &claude };
        let call = ToolCall { tool, input };
        report.calls += 1;
        match decide(policy, &call) {
            Decision::Block(blocked) => {
                *report.blocked.entry(blocked.rule.code()).or_default() += 1
            }
            Decision::Allow => {
                report.allowed += 1;
                let opened = opens(harness, &call.tool, &call.input, &setting);
                if !opened.is_empty() {
                    report.allowed_with_opens += 1;
                }
                for open in &opened {
                    report.opens_checked += 1;
                    if let Err(reason) = check_open(open, &setting) {
                        if report.escapes.len() < KEEP_ESCAPES {
                            report.escapes.push(Escape {
                                seed: 0,
                                tree: 0,
                                tree_text: tree.describe(),
                                harness,
                                tool: call.tool.clone(),
                                input: call.input.clone(),
                                reason,
                            });
                        }
                        break;
                    }
                }
            }
        }
    }
    Ok(report)
}
