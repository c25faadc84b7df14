//! Freshly built bundles against the committed JSON Schemas (docs/schemas/): every route and
//! harness of the snapshot fixtures, so a manifest, policy or tools.json the build writes that
//! its schema does not describe fails here. The resolved-instance fixtures are checked too.

use harness_bundle::{Route, build_bundle};
use serde_json::Value;

use super::env::{Env, request, resolved, workspace_root};

fn validator(name: &str) -> jsonschema::Validator {
    let path = workspace_root().join("docs/schemas").join(name);
    let schema: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn errors(validator: &jsonschema::Validator, document: &Value) -> Vec<String> {
    validator
        .iter_errors(document)
        .map(|error| format!("{error} at {}", error.instance_path()))
        .collect()
}

#[test]
fn built_manifests_policies_and_tools_validate_against_their_schemas() {
    let mut checked = 0;
    for (fixture, route) in [
        ("chief-of-staff", Route::Primary),
        ("reviewer", Route::Fallback),
        ("pm", Route::Primary),
        ("pm", Route::Fallback),
    ] {
        let env = Env::new();
        let dir = build_bundle(&request(&env, &resolved(fixture), route)).unwrap().dir;
        for file in ["manifest.json", "policy.json", "tools.json"] {
            let document: Value =
                serde_json::from_slice(&std::fs::read(dir.join(file)).unwrap()).unwrap();
            let found = errors(&validator(file), &document);
            assert!(found.is_empty(), "{fixture} {route:?} {file}: {found:#?}");
            checked += 1;
        }
        // The schema is closed: a manifest with a field the build does not write is refused.
        let mut manifest: Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        manifest["unexpected"] = Value::Bool(true);
        assert!(!validator("manifest.json").is_valid(&manifest));
    }
    assert_eq!(checked, 12);
}

#[test]
fn the_resolved_fixtures_validate_against_their_schema() {
    let validator = validator("resolved-instance.json");
    let mut checked = 0;
    for entry in std::fs::read_dir(workspace_root().join("fixtures/resolved")).unwrap() {
        let path = entry.unwrap().path();
        let document: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let found = errors(&validator, &document);
        assert!(found.is_empty(), "{}: {found:#?}", path.display());
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} fixtures");
}
