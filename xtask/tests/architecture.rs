//! The workspace's architecture, checked as tests so that `cargo test` keeps it (the companion of
//! tidy.rs, which holds xtask's own rules).
//!
//! Each test reads the tree as text, the packages and their dependencies as `cargo metadata`
//! gives them; none builds anything. What each one holds is an
//! Architecture Invariant of docs/ARCHITECTURE.md.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a tidy test fails loudly where the tree cannot be read"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Every file below `dir` (relative to the root) whose name ends with `suffix`, sorted.
fn files(dir: &str, suffix: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name == "target" || name.starts_with('.') || name == "node_modules" {
                continue;
            }
            if path.is_dir() {
                walk(&path, suffix, out);
            } else if name.ends_with(suffix) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join(dir), suffix, &mut out);
    out.sort();
    out
}

/// A dependency of a workspace package, as `cargo metadata` gives it.
#[derive(Debug)]
struct Dependency {
    name: String,
    /// `None` for `[dependencies]`, `Some("dev")` or `Some("build")` otherwise.
    kind: Option<String>,
    features: Vec<String>,
}

/// The workspace's packages, by name, each with its dependencies, from `cargo metadata` (cargo's
/// own reading of the manifests, `workspace = true` inheritance and renames included).
fn packages() -> BTreeMap<String, Vec<Dependency>> {
    #[expect(clippy::disallowed_methods, reason = "the test asks cargo itself")]
    let output = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline", "--manifest-path"])
        .arg(root().join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut out = BTreeMap::new();
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap().to_owned();
        if name == "xtask" {
            continue;
        }
        let dependencies = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|dependency| Dependency {
                name: dependency["name"].as_str().unwrap().to_owned(),
                kind: dependency["kind"].as_str().map(str::to_owned),
                features: dependency["features"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|feature| feature.as_str().unwrap().to_owned())
                    .collect(),
            })
            .collect();
        out.insert(name, dependencies);
    }
    out
}

/// The names of `dependencies`' `[dependencies]` (not dev or build).
fn normal(dependencies: &[Dependency]) -> Vec<&str> {
    dependencies.iter().filter(|d| d.kind.is_none()).map(|d| d.name.as_str()).collect()
}

/// The layers, lowest first. A package may depend only on packages of a lower layer, so every
/// arrow between crates points down and no cycle can form.
const LAYERS: &[&[&str]] = &[
    &["harness-contract"],
    &["harness-tools"],
    &["harness-gate", "harness-unslop", "harness-bus", "harness-confine", "harness-adapters"],
    &["harness-bundle", "harness-mcp"],
    &["harness-runner"],
    &["harness-testkit", "harness-benchkit"],
    &[
        "harness-gate-cli",
        "harness-unslop-cli",
        "harness-mcp-cli",
        "harness-runner-cli",
        "harness-cli",
    ],
];

fn layer(package: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&package))
}

#[test]
fn every_arrow_between_crates_points_down() {
    let packages = packages();
    assert!(packages.len() >= 12, "found only {:?}", packages.keys());
    for (package, dependencies) in &packages {
        let own = layer(package).unwrap_or_else(|| panic!("{package} is in no layer of LAYERS"));
        for name in normal(dependencies).into_iter().filter(|name| name.starts_with("harness-")) {
            let theirs = layer(name).unwrap_or_else(|| panic!("{name} is in no layer"));
            assert!(
                theirs < own,
                "{package} (layer {own}) depends on {name} (layer {theirs}): arrows point down only"
            );
        }
    }
}

#[test]
fn the_contract_has_no_dependencies() {
    let packages = packages();
    let contract = normal(&packages["harness-contract"]);
    assert!(contract.is_empty(), "harness-contract depends on {contract:?}");
}

/// The crates a gate process or a pure-data consumer links: no process, no async runtime, no
/// socket.
#[test]
fn pure_crates_spawn_nothing_and_pull_no_runtime() {
    let packages = packages();
    for package in ["harness-contract", "harness-gate", "harness-tools"] {
        let dependencies = normal(&packages[package]);
        for runtime in ["tokio", "async-std", "smol", "harness-bus", "harness-runner"] {
            assert!(!dependencies.contains(&runtime), "{package} depends on {runtime}");
        }
        for file in files(&format!("crates/{package}/src"), ".rs") {
            let text = read(&file);
            for effect in ["Command::new", "std::process::Command", "UnixStream", "UnixListener"] {
                assert!(!text.contains(effect), "{} uses {effect}", file.display());
            }
        }
    }
}

/// Only the runner (and xtask and tests) start processes; clippy.toml's disallowed-methods
/// backs this up, and here the libraries and binaries are held to it by name (`harness doctor`
/// runs each `--version` through `harness_runner::program_version`).
#[test]
fn only_the_runner_starts_processes_among_the_libraries_and_binaries() {
    for file in files("crates", ".rs").into_iter().chain(files("bins", ".rs")) {
        let text = file.to_string_lossy().into_owned();
        let shipped_library = text.contains("/src/")
            && !text.contains("crates/harness-runner/")
            && !text.contains("crates/harness-testkit/")
            && !text.contains("crates/harness-benchkit/");
        if shipped_library {
            let source = read(&file);
            assert!(!source.contains("Command::new"), "{} starts a process", file.display());
        }
    }
}

/// Where stdout is a protocol, nothing may print to it by accident.
#[test]
fn protocol_stdouts_deny_print() {
    for file in ["crates/harness-mcp/src/lib.rs", "bins/harness-gate-cli/src/main.rs"] {
        let text = read(&root().join(file));
        assert!(text.contains("#![deny(clippy::print_stdout)]"), "{file} must deny print_stdout");
    }
}

/// Every library's lib.rs is a table of contents that starts with what the crate is for.
#[test]
fn every_lib_rs_says_what_its_crate_is_for() {
    for file in files("crates", "lib.rs") {
        if file.parent().and_then(Path::file_name).is_some_and(|name| name == "src") {
            let text = read(&file);
            assert!(text.starts_with("//! "), "{} has no //! paragraph first", file.display());
        }
    }
}

/// Binaries are glue: parse arguments, call one library entry point, map the error.
#[test]
fn binaries_stay_under_their_line_budget() {
    for file in files("bins", "main.rs") {
        if file.to_string_lossy().contains("/src/") {
            let lines = read(&file).lines().count();
            assert!(lines <= 250, "{} has {lines} lines; the budget is 250", file.display());
        }
    }
}

/// Test hooks exist only behind the `test-hooks` feature, which only dev-dependencies enable:
/// nothing `cargo build --release` (and so `cargo xtask dist`) makes carries one.
#[test]
fn test_hooks_are_behind_the_feature_only_tests_enable() {
    for file in files("crates", ".rs").into_iter().chain(files("bins", ".rs")) {
        let path = file.to_string_lossy().into_owned();
        if !path.contains("/src/") {
            continue;
        }
        let text = read(&file);
        if text.contains("PANIC_FOR_TEST") {
            assert!(
                text.contains("feature = \"test-hooks\""),
                "{path} names a test hook without the test-hooks feature"
            );
        }
    }
    for (package, dependencies) in packages() {
        let hooked = dependencies
            .iter()
            .filter(|d| d.kind.is_none() && d.features.iter().any(|f| f == "test-hooks"))
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>();
        assert!(
            hooked.is_empty(),
            "{package} enables test-hooks of {hooked:?} in [dependencies]; only [dev-dependencies] may"
        );
    }
}

/// Tests assert: no should_panic, no ignored test, no todo or unimplemented.
#[test]
fn no_hollow_tests_or_stubs() {
    let hollow = [
        concat!("#[should", "_panic"),
        concat!("#[ig", "nore]"),
        concat!("to", "do!("),
        concat!("unimple", "mented!("),
    ];
    for group in ["crates", "bins", "xtask"] {
        for file in files(group, ".rs") {
            let text = read(&file);
            for word in hollow {
                assert!(!text.contains(word), "{} holds {word}", file.display());
            }
        }
    }
}

/// The repository stands on its own: every `docs/*.md` a file names exists, and nothing points
/// at notes outside the repository.
#[test]
fn docs_named_in_the_tree_exist_and_nothing_points_outside() {
    let outside = [
        concat!("../", "shared"),
        concat!("CLIS", ".md"),
        concat!("DESIGN", ".md"),
        concat!("STYLE", ".md"),
    ];
    let mut named = 0;
    for group in ["crates", "bins", "xtask", "docs", "examples", "tools", ".ci"] {
        for file in
            files(group, "").into_iter().filter(|f| !f.to_string_lossy().contains("/snapshots/"))
        {
            let Ok(text) = std::fs::read_to_string(&file) else { continue };
            for word in outside {
                assert!(
                    !text.contains(word),
                    "{} points outside the repository: {word}",
                    file.display()
                );
            }
            let mut rest = text.as_str();
            while let Some(at) = rest.find("docs/") {
                let tail = &rest[at + "docs/".len()..];
                let end = tail
                    .find(|c: char| {
                        !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
                    })
                    .unwrap_or(tail.len());
                let name = tail[..end].trim_end_matches('.');
                if let Some(stem) = name.strip_suffix(".md") {
                    named += 1;
                    let doc = root().join("docs").join(format!("{stem}.md"));
                    assert!(
                        doc.is_file(),
                        "{} names docs/{stem}.md, which does not exist",
                        file.display()
                    );
                }
                rest = &tail[end..];
            }
        }
    }
    assert!(named > 20, "only {named} doc names found: the scan is broken");
}

/// The README's layout, commands and docs list match the tree: every top-level directory, every
/// crate and every binary is in its layout block, every `docs/*.md` in its documentation list,
/// and every `cargo xtask` subcommand in its list of them.
#[test]
fn the_readme_matches_the_tree() {
    let readme = read(&root().join("README.md"));
    let section = |title: &str| {
        let start = readme.find(title).unwrap_or_else(|| panic!("README has no {title:?}"));
        let rest = &readme[start + title.len()..];
        rest[..rest.find("\n## ").unwrap_or(rest.len())].to_owned()
    };
    let layout = section("## Layout");
    for entry in std::fs::read_dir(root()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let tracked_dir = entry.file_type().unwrap().is_dir()
            && !name.starts_with('.')
            && !["target", "node_modules"].contains(&name.as_str());
        if tracked_dir {
            assert!(layout.contains(&format!("\n{name}/")), "the README's layout lacks {name}/");
        }
    }
    for package in packages().keys() {
        let crate_dir = root().join("crates").join(package);
        if crate_dir.is_dir() {
            assert!(layout.contains(package.as_str()), "the README's layout lacks {package}");
        }
    }
    for file in files("bins", "main.rs") {
        let cargo = read(&file.parent().unwrap().parent().unwrap().join("Cargo.toml"));
        // The `[[bin]]` section's name: what the binary is called.
        let bin = cargo.split("[[bin]]").nth(1).unwrap_or_else(|| panic!("{}", file.display()));
        let name = bin.lines().find_map(|line| line.strip_prefix("name = \"")).unwrap();
        let name = name.trim_end_matches('"');
        assert!(layout.contains(name), "the README's layout lacks the binary {name}");
    }
    let documentation = section("## Documentation");
    for doc in files("docs", ".md") {
        let name = doc.strip_prefix(root()).unwrap().to_string_lossy().into_owned();
        if !name.starts_with("docs/schemas/") {
            assert!(
                documentation.contains(&format!("`{name}`")),
                "the README does not list {name}"
            );
        }
    }
    let commands = section("## cargo xtask");
    let usage = read(&root().join("xtask/src/main.rs"));
    let usage = usage.split_once("const USAGE: &str = \"").unwrap().1.split_once("\";").unwrap().0;
    for line in usage.lines().map(str::trim_start) {
        let Some(name) = line.split(' ').next().filter(|name| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
        }) else {
            continue;
        };
        if name != "help" && line.len() > name.len() && line[name.len()..].starts_with("  ") {
            assert!(
                commands.contains(&format!("`cargo xtask {name}")),
                "the README's cargo xtask list lacks {name}"
            );
        }
    }
}
