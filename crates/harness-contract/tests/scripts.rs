//! The programs outside Rust that read the adapter environment (the adapter scripts and the Pi
//! extensions) read only variables the contract defines, so a renamed or new variable cannot
//! drift between the runner that sets it and the script that reads it.

#![allow(clippy::expect_used, reason = "a test fails loudly where its setup fails")]

use std::path::{Path, PathBuf};

use harness_contract::AdapterEnv;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `MOSAIC_` name in `text` (letters, digits and `_` after the prefix).
fn mosaic_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("MOSAIC_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        // `MOSAIC_*` in a comment names the family, not a variable.
        if end > "MOSAIC_".len() {
            names.push(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// The shipped files that read the adapter environment.
fn readers() -> Vec<PathBuf> {
    let root = workspace();
    let mut files = Vec::new();
    for dir in ["crates/harness-adapters/assets/adapters", "crates/harness-adapters/assets/pi"] {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|error| panic!("{dir}: {error}"))
            .map(|entry| entry.expect("a directory entry").path())
            .collect();
        entries.sort();
        files.extend(entries);
    }
    files
}

#[test]
fn every_variable_the_scripts_read_is_in_the_contract() {
    let files = readers();
    assert!(files.len() >= 4, "found only {files:?}");
    let mut seen = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        for name in mosaic_names(&text) {
            seen += 1;
            assert!(
                AdapterEnv::from_name(&name).is_some(),
                "{} reads {name}, which the contract (harness_contract::AdapterEnv) does not define",
                file.display()
            );
        }
    }
    assert!(seen > 20, "only {seen} MOSAIC_ names found: the scan is broken");
}

#[test]
fn the_scan_finds_names_and_their_ends() {
    assert_eq!(
        mosaic_names("a $MOSAIC_TOOLS_SOCK, ${MOSAIC_TURN}x MOSAIC_NEW_1\" MOSAIC_*"),
        ["MOSAIC_TOOLS_SOCK", "MOSAIC_TURN", "MOSAIC_NEW_1"]
    );
}
