//! The crate's boundaries, checked as tests.

use harness_testkit::workspace_root;

#[test]
fn harness_bus_has_no_async_runtime_and_starts_no_process() {
    let root = workspace_root().join("crates/harness-bus");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let dependencies = manifest.split("[dependencies]").nth(1).unwrap();
    let dependencies = dependencies.split("\n[").next().unwrap();
    assert!(!dependencies.contains("tokio"), "harness-bus must not depend on tokio");
    for entry in std::fs::read_dir(root.join("src")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("Command::new"), "{} starts a process", path.display());
        assert!(!text.contains("println!"), "{} prints to stdout", path.display());
    }
}

#[test]
fn only_harness_bus_reads_the_capability() {
    let capability = workspace_root().join("crates/harness-bus/src/capability.rs");
    let text = std::fs::read_to_string(&capability).unwrap();
    assert!(text.contains("pub(crate) fn expose"), "expose() must stay private to harness-bus");
}
