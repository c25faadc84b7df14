//! Properties over random trees, checked against oracles that share no code with the gate:
//! `std::fs::canonicalize` of the longest existing prefix (the kernel's own resolution), and for
//! the converse a lexical fold of the path in a tree without symlinks.

use std::path::{Component, Path, PathBuf};

use harness_gate::{Decision, Harness, Policy, PolicyConfig, ToolCall, decide};
use proptest::prelude::*;
use serde_json::json;

/// Where entries of a random tree may go.
const SLOTS: &[&str] = &[
    "ws/a", "ws/b", "ws/c", "ws/a/b", "ws/a/c", "ws/b/a", "ws/a/b/c", "out/a", "out/b", "out/a/b",
];

/// Symlink targets: inside, outside, up, dangling, absolute, and `..` inside a target.
const TARGETS: &[&str] = &[
    "a",
    "b",
    "c",
    "..",
    "../..",
    "../out",
    "../out/a",
    "../../out/a",
    "missing",
    "a/missing",
    "a/../b",
    "b/../../out",
    "$ROOT/out",
    "$ROOT/ws/a",
    "$ROOT/ws",
    "/etc",
    ".",
    "c/..",
    "../ws/b",
];

/// Segments of a random path argument.
const SEGMENTS: &[&str] = &["a", "b", "c", "..", ".", "out", "ws", "missing"];

#[derive(Debug, Clone)]
enum Entry {
    File(usize),
    Dir(usize),
    Link(usize, usize),
}

fn entry() -> impl Strategy<Value = Entry> {
    prop_oneof![
        1 => (0..SLOTS.len()).prop_map(Entry::File),
        1 => (0..SLOTS.len()).prop_map(Entry::Dir),
        3 => (0..SLOTS.len(), 0..TARGETS.len()).prop_map(|(slot, target)| Entry::Link(slot, target)),
    ]
}

fn relative_path() -> impl Strategy<Value = String> {
    prop::collection::vec(0..SEGMENTS.len(), 1..6).prop_map(|segments| {
        segments.into_iter().map(|i| SEGMENTS[i]).collect::<Vec<_>>().join("/")
    })
}

struct Built {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws_real: PathBuf,
}

fn build(entries: &[Entry], with_links: bool) -> Built {
    let entries: Vec<Entry> = entries
        .iter()
        .filter(|entry| with_links || !matches!(entry, Entry::Link(..)))
        .cloned()
        .collect();
    build_with_targets(&entries, TARGETS)
}

fn build_with_targets(entries: &[Entry], targets: &[&str]) -> Built {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("ws")).unwrap();
    std::fs::create_dir_all(root.join("out")).unwrap();
    for entry in entries {
        let slot = match *entry {
            Entry::File(slot) | Entry::Dir(slot) | Entry::Link(slot, _) => slot,
        };
        let path = root.join(SLOTS[slot]);
        if std::fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        // A slot whose parent cannot be a directory (a file or link is there) is skipped.
        let parent_ok = path.parent().is_some_and(|parent| {
            std::fs::symlink_metadata(parent).map(|m| m.is_dir()).unwrap_or(false)
                || std::fs::create_dir_all(parent).is_ok()
        });
        if !parent_ok {
            continue;
        }
        let _ = match *entry {
            Entry::File(_) => std::fs::write(&path, b"x"),
            Entry::Dir(_) => std::fs::create_dir(&path),
            Entry::Link(_, target) => {
                let target = targets[target].replace("$ROOT", &root.display().to_string());
                std::os::unix::fs::symlink(target, &path)
            }
        };
    }
    let ws_real = root.join("ws");
    Built { _dir: dir, root, ws_real }
}

fn policy(built: &Built, harness: Harness) -> Policy {
    let tools = match harness {
        Harness::Pi => vec!["read".to_owned(), "write".to_owned(), "ls".to_owned()],
        Harness::ClaudeCode => vec!["Read".to_owned(), "Write".to_owned()],
    };
    Policy::new(PolicyConfig {
        harness,
        workspace: built.ws_real.display().to_string(),
        tools,
        typed: vec![],
        home: Some(built.root.join("home").display().to_string()),
    })
    .unwrap()
}

/// The kernel's answer: `Some(real target)` from the longest prefix `canonicalize` accepts, with
/// the rest appended; `None` when a name exists but cannot be resolved (a dangling link or a
/// loop) or when a `..` must be applied to names that do not exist.
fn kernel_target(path: &Path) -> Option<PathBuf> {
    let mut prefix = path.to_path_buf();
    let mut tail: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match prefix.canonicalize() {
            Ok(real) => {
                let mut target = real;
                for name in tail.iter().rev() {
                    if name == ".." {
                        return None;
                    }
                    target.push(name);
                }
                return Some(target);
            }
            Err(_) => {
                if std::fs::symlink_metadata(&prefix).is_ok_and(|m| m.file_type().is_symlink()) {
                    return None;
                }
                let name = prefix.file_name().map(ToOwned::to_owned);
                match name {
                    Some(name) => tail.push(name),
                    // A trailing `..` or `.`: keep it in the tail for the check above.
                    None => tail.push(prefix.components().next_back()?.as_os_str().to_owned()),
                }
                if !prefix.pop() {
                    return None;
                }
            }
        }
    }
}

/// Folds `.` and `..` as text, the way Pi's `path.resolve` does.
fn lexical(base: &Path, relative: &str) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in base.join(relative).components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            _ => {}
        }
    }
    out
}

fn allows(policy: &Policy, tool: &str, input: serde_json::Value) -> bool {
    let decision = decide(policy, &ToolCall { tool: tool.to_owned(), input });
    matches!(decision, Decision::Allow)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// Soundness: nothing the gate allows leads, by the kernel's own resolution, outside the
    /// workspace's real path or through a dangling link; neither the path Pi opens (lexical)
    /// nor the path as the kernel reads it unresolved.
    #[test]
    fn no_allowed_path_leads_outside(entries in prop::collection::vec(entry(), 0..10),
                                     paths in prop::collection::vec(relative_path(), 1..8)) {
        let built = build(&entries, true);
        let pi = policy(&built, Harness::Pi);
        let claude = policy(&built, Harness::ClaudeCode);
        for path in &paths {
            let absolute = format!("{}/{path}", built.ws_real.display());
            let allowed = [
                allows(&pi, "read", json!({"path": path})),
                allows(&pi, "write", json!({"path": path, "content": ""})),
                allows(&claude, "Write", json!({"file_path": absolute})),
            ];
            if !allowed.iter().any(|allowed| *allowed) {
                continue;
            }
            for opened in [lexical(&built.ws_real, path), built.ws_real.join(path)] {
                let target = kernel_target(&opened);
                prop_assert!(
                    target.as_ref().is_some_and(|target| target.starts_with(&built.ws_real)),
                    "allowed {path:?} (read/write/Write: {allowed:?}) but {opened:?} leads to {target:?}; tree {entries:?} in {:?}",
                    built.root
                );
            }
        }
    }

    /// Completeness where the answer is plain: in a tree without symlinks, a path that stays
    /// inside both as text and for the kernel (every `..` follows an existing directory) is
    /// allowed. A gate that blocks everything fails here.
    #[test]
    fn plain_paths_inside_are_allowed(entries in prop::collection::vec(entry(), 0..10),
                                      paths in prop::collection::vec(relative_path(), 1..8)) {
        let built = build(&entries, false);
        let pi = policy(&built, Harness::Pi);
        for path in &paths {
            let inside_as_text = lexical(&built.ws_real, path).starts_with(&built.ws_real);
            let kernel_ok = kernel_target(&built.ws_real.join(path))
                .is_some_and(|target| target.starts_with(&built.ws_real));
            let expected = inside_as_text && kernel_ok;
            let got = allows(&pi, "write", json!({"path": path, "content": ""}));
            prop_assert_eq!(got, expected, "write {:?} in tree {:?}", path, entries);
        }
    }
}

/// Link targets for the comparison with `openat2(RESOLVE_BENEATH)`: each either stays below the
/// workspace or leaves it for good. (A target that climbs out and back in, or an absolute one,
/// is refused by `RESOLVE_BENEATH` although it ends inside; the gate allows those by design,
/// docs/gate.md.)
const BENEATH_TARGETS: &[&str] =
    &["a", "b", "a/b", "c/..", "missing", "../out", "../out/a", "../../x"];

/// Segments of a path without `..`, where the lexical and the kernel's readings agree.
const PLAIN_SEGMENTS: &[&str] = &["a", "b", "c", "."];

fn beneath_entry() -> impl Strategy<Value = (usize, Option<usize>)> {
    (0..SLOTS.len(), prop::option::of(0..BENEATH_TARGETS.len()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Where both apply (a target that exists, no `..` in the path), the gate's walk and the
    /// kernel's `openat2(RESOLVE_BENEATH)` agree on inside versus outside.
    #[test]
    fn walk_agrees_with_openat2_beneath(
        entries in prop::collection::vec(beneath_entry(), 0..10),
        paths in prop::collection::vec(prop::collection::vec(0..PLAIN_SEGMENTS.len(), 1..5), 1..8),
    ) {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        let entries: Vec<Entry> = entries
            .into_iter()
            .map(|(slot, target)| match target {
                Some(target) => Entry::Link(slot, target),
                None => Entry::Dir(slot),
            })
            .collect();
        // Reuse the tree builder with this test's own targets.
        let built = build_with_targets(&entries, BENEATH_TARGETS);
        let pi = policy(&built, Harness::Pi);
        let ws = std::fs::File::open(&built.ws_real).unwrap();
        for segments in paths {
            let path = segments.into_iter().map(|i| PLAIN_SEGMENTS[i]).collect::<Vec<_>>().join("/");
            let exists = built.ws_real.join(&path).canonicalize().is_ok();
            if !exists {
                continue;
            }
            let kernel = rustix::fs::openat2(
                &ws,
                path.as_str(),
                OFlags::PATH | OFlags::CLOEXEC,
                Mode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
            );
            let gate = allows(&pi, "ls", json!({"path": path}));
            prop_assert_eq!(gate, kernel.is_ok(), "{:?}: openat2 {:?}; tree {:?}", path, kernel.err(), entries);
        }
    }
}
