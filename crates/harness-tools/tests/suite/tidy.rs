//! The crate's boundaries, checked as tests.

use harness_testkit::workspace_root;

#[test]
fn harness_tools_is_pure_data() {
    let root = workspace_root().join("crates/harness-tools");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let dependencies = manifest.split("[dependencies]").nth(1).unwrap();
    let dependencies = dependencies.split("\n[").next().unwrap();
    for effect in ["tokio", "rustix", "harness-bus"] {
        assert!(!dependencies.contains(effect), "harness-tools must not depend on {effect}");
    }
    for entry in std::fs::read_dir(root.join("src")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("Command::new"), "{} starts a process", path.display());
        assert!(!text.contains("println!"), "{} prints to stdout", path.display());
        assert!(!text.contains("UnixStream"), "{} opens a socket", path.display());
    }
}

#[test]
fn harness_mcp_keeps_stdout_for_the_protocol() {
    let lib = workspace_root().join("crates/harness-mcp/src/lib.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    assert!(text.contains("#![deny(clippy::print_stdout)]"), "{}", lib);
}
