//! The bundle core never names a harness (spec row 65): every harness-specific word lives in
//! harness-adapters. This fails if a source file of harness-bundle mentions one.

use super::env::workspace_root;

#[test]
fn the_bundle_core_never_names_a_harness() {
    let src = workspace_root().join("crates/harness-bundle/src");
    let mut offenders = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap().to_lowercase();
        let words: Vec<&str> = text.split(|c: char| !c.is_ascii_alphanumeric()).collect();
        for forbidden in ["claude", "pi", "anthropic", "mcp"] {
            if words.contains(&forbidden) {
                offenders.push(format!("{} names {forbidden:?}", path.display()));
            }
        }
    }
    assert!(offenders.is_empty(), "{offenders:#?}");
}
