//! Tidy tests of xtask's own source: what a reader of `xtask/src` may take for granted.

#![allow(clippy::unwrap_used, reason = "a test fails loudly")]

use std::path::Path;

fn source(file: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(file)).unwrap()
}

/// The usage text names every subcommand the dispatcher in `run` accepts, each at the start of a
/// line of its command list, so that `cargo xtask help` describes every command there is.
#[test]
fn usage_names_every_subcommand() {
    let main = source("main.rs");
    let usage = main.split_once("const USAGE: &str = \"").unwrap().1.split_once("\";").unwrap().0;
    let dispatcher = main.split_once("fn run()").unwrap().1.split_once("\n}\n").unwrap().0;
    let mut names: Vec<&str> = Vec::new();
    for arm in dispatcher.lines().map(str::trim).filter(|line| line.starts_with('[')) {
        names.extend(arm.split('"').skip(1).step_by(2).filter(|name| !name.starts_with('-')));
    }
    assert!(names.contains(&"bench") && names.contains(&"help"), "{names:?}");
    for name in names {
        assert!(
            usage.lines().any(|line| line.trim_start().split(' ').next() == Some(name)),
            "the usage text does not describe `{name}`"
        );
    }
}

/// Every other file of xtask reaches cargo and the target directory through `cargo.rs`, which asks
/// cargo for the target directory, so that no command can read a stale or a default one.
#[test]
fn only_cargo_rs_finds_cargo_or_the_target_dir() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() == "cargo.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for needle in ["\"target/", "\"target\"", "(\"CARGO\")", "\"CARGO_TARGET_DIR\""] {
            assert!(!text.contains(needle), "{} contains {needle}", path.display());
        }
    }
}

/// `.ci/run` runs exactly the README's set-up commands, in the README's order: the main job first,
/// so that a fresh clone's first command cannot fail unseen behind the tests.
#[test]
fn ci_runs_the_readme_commands_in_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block = readme.split_once("```sh\n").unwrap().1.split_once("```").unwrap().0;
    let readme_commands: Vec<&str> = block
        .lines()
        .filter(|line| line.starts_with("cargo "))
        .map(|line| line.split_once('#').map_or(line, |(command, _)| command).trim())
        .collect();
    assert_eq!(readme_commands, ["cargo xtask demo", "cargo xtask ci"]);
    let script = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let ci_commands: Vec<&str> = script
        .lines()
        .map(|line| line.trim().trim_start_matches("exec ").trim())
        .filter(|line| line.starts_with("cargo "))
        .collect();
    assert_eq!(ci_commands, readme_commands, ".ci/run and the README's commands differ");
}
