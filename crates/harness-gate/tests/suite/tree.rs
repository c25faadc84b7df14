//! A tiny notation for a directory tree and a call, and the decision rendered as text.
//!
//! A tree is one entry per line, relative to a fresh temporary root:
//! `dir/` makes a directory, `name` a file, `name -> target` a symlink (the target verbatim but for `$ROOT`),
//! and `@workspace path` names the workspace as given (default `ws`). A call is
//! `HARNESS TOOL JSON`, with `$ROOT`, `$WS` (the workspace as given) and `$HOME` replaced in the
//! JSON. The decision renders as `allow` or `block <rule code>`.

use std::path::{Path, PathBuf};

use harness_gate::{Decision, Harness, Policy, PolicyConfig, ToolCall, decide};

pub(crate) struct Tree {
    _dir: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) workspace: String,
}

impl Tree {
    pub(crate) fn build(spec: &str) -> Tree {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        let mut workspace = "ws".to_owned();
        for line in spec.lines().map(str::trim).filter(|line| !line.is_empty()) {
            if let Some(name) = line.strip_prefix("@workspace ") {
                workspace = name.to_owned();
            } else if let Some((link, target)) = line.split_once(" -> ") {
                let link = root.join(link);
                make_parent(&link);
                let target = target.replace("$ROOT", &root.display().to_string());
                std::os::unix::fs::symlink(target, &link).expect("symlink");
            } else if let Some(name) = line.strip_suffix('/') {
                std::fs::create_dir_all(root.join(name)).expect("dir");
            } else {
                let file = root.join(line);
                make_parent(&file);
                std::fs::write(&file, b"x").expect("file");
            }
        }
        let workspace = format!("{}/{workspace}", root.display());
        Tree { _dir: dir, root, workspace }
    }

    pub(crate) fn home(&self) -> String {
        format!("{}/home", self.root.display())
    }

    pub(crate) fn expand(&self, text: &str) -> String {
        text.replace("$ROOT", &self.root.display().to_string())
            .replace("$WS", &self.workspace)
            .replace("$HOME", &self.home())
    }

    pub(crate) fn policy(&self, harness: Harness) -> Policy {
        let (tools, typed) = match harness {
            Harness::Pi => (
                vec!["read", "write", "edit", "grep", "find", "ls", "frobnicate"],
                vec!["list_tasks", "end_run"],
            ),
            Harness::ClaudeCode => (
                vec![
                    "Read",
                    "Write",
                    "Edit",
                    "MultiEdit",
                    "NotebookEdit",
                    "Grep",
                    "Glob",
                    "Frobnicate",
                ],
                vec!["list_tasks", "end_run"],
            ),
        };
        Policy::new(PolicyConfig {
            harness,
            workspace: self.workspace.clone(),
            tools: tools.into_iter().map(str::to_owned).collect(),
            typed: typed.into_iter().map(str::to_owned).collect(),
            home: Some(self.home()),
        })
        .expect("policy")
    }

    /// Runs `HARNESS TOOL JSON` and renders the decision.
    pub(crate) fn decide(&self, call: &str) -> String {
        let mut parts = call.splitn(3, ' ');
        let harness = match parts.next() {
            Some("pi") => Harness::Pi,
            Some("claude") => Harness::ClaudeCode,
            other => panic!("unknown harness {other:?} in {call:?}"),
        };
        let tool = parts.next().expect("tool").to_owned();
        let input = serde_json::from_str(&self.expand(parts.next().unwrap_or("{}")))
            .unwrap_or_else(|error| panic!("bad JSON in {call:?}: {error}"));
        render(&decide(&self.policy(harness), &ToolCall { tool, input }))
    }
}

fn make_parent(path: &Path) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("parent dir");
    }
}

pub(crate) fn render(decision: &Decision) -> String {
    match decision {
        Decision::Allow => "allow".to_owned(),
        Decision::Block(blocked) => format!("block {}", blocked.rule.code()),
    }
}

/// Builds `tree`, decides `call`, and compares with `expect`; a failure shows the reason.
#[track_caller]
pub(crate) fn check(tree: &str, call: &str, expect: &str) {
    let built = Tree::build(tree);
    let got = built.decide(call);
    if got != expect {
        let harness = if call.starts_with("pi ") { Harness::Pi } else { Harness::ClaudeCode };
        let mut parts = call.splitn(3, ' ').skip(1);
        let tool = parts.next().unwrap_or_default().to_owned();
        let input = serde_json::from_str(&built.expand(parts.next().unwrap_or("{}"))).unwrap();
        let detail = decide(&built.policy(harness), &ToolCall { tool, input });
        panic!("call {call:?}\ntree:\n{tree}\nexpected {expect}, got {got}: {detail:?}");
    }
}
