//! The machine-readable contracts in docs/schemas/: each JSON Schema is generated from the Rust
//! type that reads or writes that JSON, and the committed file must be what the type generates
//! today. After changing one of these types, regenerate them with
//!
//! ```text
//! UPDATE_SCHEMAS=1 cargo test -p harness-runner --test schemas
//! ```
//!
//! Every JSON example of the docs labelled `<!-- schema: NAME.json -->` must validate against
//! docs/schemas/NAME.json.
//!
//! The test lives in harness-runner because that crate sees every type: run.json's and the
//! broker results' (here), the bundle's, the broker envelope's and the tool socket's.

#![allow(clippy::unwrap_used, reason = "test code fails by panicking")]

use std::path::{Path, PathBuf};

use schemars::{Schema, schema_for};
use serde_json::{Value, json};

/// Every schema, by its file name in docs/schemas/.
fn schemas() -> Vec<(&'static str, Schema)> {
    vec![
        ("bundle-request.json", schema_for!(harness_bundle::RequestFile)),
        ("resolved-instance.json", schema_for!(harness_tools::ResolvedInstance)),
        ("manifest.json", schema_for!(harness_bundle::Manifest)),
        ("policy.json", schema_for!(harness_bundle::Policy)),
        ("tools.json", schema_for!(harness_tools::ToolsFile)),
        ("run.json", schema_for!(harness_runner::RunFile)),
        ("broker-request.json", schema_for!(harness_bus::BrokerRequest<'static>)),
        ("broker-reply.json", schema_for!(harness_bus::BrokerReply)),
        ("message-read-result.json", schema_for!(harness_bus::MessageReadResult)),
        ("state-result.json", schema_for!(harness_bus::StateResult)),
        ("tool-request.json", schema_for!(harness_tools::ToolRequest)),
        ("tool-reply.json", schema_for!(harness_tools::ToolReply)),
        ("doctor-check.json", schema_for!(harness_runner::DoctorCheck)),
    ]
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn schema_dir() -> PathBuf {
    root().join("docs/schemas")
}

/// The schema as it is committed: pretty JSON, keys sorted (serde_json's map), one trailing
/// newline.
fn render(schema: &Schema) -> String {
    let mut text = serde_json::to_string_pretty(schema).unwrap();
    text.push('\n');
    text
}

fn validator(name: &str) -> jsonschema::Validator {
    let path = schema_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("no schema {}: {error}", path.display()));
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

#[test]
fn committed_schemas_are_what_their_types_generate() {
    let update = std::env::var_os("UPDATE_SCHEMAS").is_some();
    let mut drifted = Vec::new();
    for (name, schema) in schemas() {
        let path = schema_dir().join(name);
        let text = render(&schema);
        if update {
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            drifted.push(name);
        }
    }
    assert!(
        drifted.is_empty(),
        "docs/schemas/ differs from the Rust types for {drifted:?}; regenerate with \
         UPDATE_SCHEMAS=1 cargo test -p harness-runner --test schemas"
    );
    // No stale schema: every .json file there is one the types generate.
    let names: Vec<&str> = schemas().iter().map(|(name, _)| *name).collect();
    for entry in std::fs::read_dir(schema_dir()).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        if file.ends_with(".json") {
            assert!(names.contains(&file.as_str()), "docs/schemas/{file} has no type");
        }
    }
}

#[test]
fn the_schema_readme_lists_every_schema() {
    let readme = std::fs::read_to_string(schema_dir().join("README.md")).unwrap();
    for (name, _) in schemas() {
        assert!(readme.contains(&format!("`{name}`")), "docs/schemas/README.md misses {name}");
    }
}

/// One labelled example of the docs.
struct Example {
    doc: String,
    line: usize,
    schema: String,
    documents: Vec<Value>,
}

/// The ```json blocks of `text` that follow a `<!-- schema: NAME -->` line (blank lines
/// between allowed). A block is one JSON document, or JSON lines (one document a line).
fn labelled_examples(doc: &str, text: &str) -> Vec<Example> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let Some(schema) = line
            .trim()
            .strip_prefix("<!-- schema:")
            .and_then(|rest| rest.strip_suffix("-->"))
            .map(str::trim)
        else {
            continue;
        };
        let mut at = index + 1;
        while at < lines.len() && lines[at].trim().is_empty() {
            at += 1;
        }
        assert_eq!(
            lines.get(at).map(|l| l.trim()),
            Some("```json"),
            "{doc}:{}: the schema label is not followed by a ```json block",
            index + 1
        );
        let end = (at + 1..lines.len())
            .find(|&i| lines[i].trim() == "```")
            .unwrap_or_else(|| panic!("{doc}:{}: the block never ends", at + 1));
        let body = lines[at + 1..end].join("\n");
        let documents = match serde_json::from_str::<Value>(&body) {
            Ok(value) => vec![value],
            Err(_) => lines[at + 1..end]
                .iter()
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    serde_json::from_str(l).unwrap_or_else(|error| {
                        panic!("{doc}:{}: the example is not JSON: {error}", at + 2)
                    })
                })
                .collect(),
        };
        out.push(Example {
            doc: doc.to_owned(),
            line: at + 1,
            schema: schema.to_owned(),
            documents,
        });
    }
    out
}

/// Reads `document` with the Rust type behind the schema `name`, where the code reads that JSON.
fn read_as(name: &str, document: &Value) -> Result<(), String> {
    fn read<T: serde::de::DeserializeOwned>(document: &Value) -> Result<(), String> {
        serde_json::from_value::<T>(document.clone()).map(drop).map_err(|e| e.to_string())
    }
    match name {
        "bundle-request.json" => read::<harness_bundle::RequestFile>(document),
        "resolved-instance.json" => read::<harness_tools::ResolvedInstance>(document),
        "tools.json" => read::<harness_tools::ToolsFile>(document),
        "run.json" => read::<harness_runner::RunFile>(document),
        "broker-reply.json" => read::<harness_bus::BrokerReply>(document),
        "message-read-result.json" => read::<harness_bus::MessageReadResult>(document),
        "state-result.json" => read::<harness_bus::StateResult>(document),
        "tool-request.json" => read::<harness_tools::ToolRequest>(document),
        "tool-reply.json" => read::<harness_tools::ToolReply>(document),
        "doctor-check.json" => read::<harness_runner::DoctorCheck>(document),
        // Written by the code, not read from JSON by it: the schema alone holds them.
        "manifest.json" | "policy.json" | "broker-request.json" => Ok(()),
        other => Err(format!("no type reads {other}")),
    }
}

#[test]
fn every_labelled_example_in_the_docs_validates_against_its_schema() {
    let mut examples = Vec::new();
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "md") {
            let doc = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
            examples.extend(labelled_examples(&doc, &std::fs::read_to_string(&path).unwrap()));
        }
    }
    let mut failures = Vec::new();
    for example in &examples {
        let validator = validator(&example.schema);
        for document in &example.documents {
            for error in validator.iter_errors(document) {
                failures.push(format!(
                    "{}:{} ({}): {error} at {}",
                    example.doc,
                    example.line,
                    example.schema,
                    error.instance_path()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // The code reads each example too: what the schema accepts, the type that reads it takes.
    for example in &examples {
        for document in &example.documents {
            let read = read_as(&example.schema, document);
            assert!(read.is_ok(), "{}:{}: {read:?}", example.doc, example.line);
        }
    }
    // The docs the contracts are specified in (and the host's guide) carry labelled examples, and every
    // file or message a host writes or reads has at least one.
    for doc in ["docs/bundle.md", "docs/runner.md", "docs/protocol.md", "docs/host.md"] {
        assert!(examples.iter().any(|e| e.doc == doc), "{doc} has no labelled example");
    }
    for schema in [
        "bundle-request.json",
        "run.json",
        "broker-request.json",
        "broker-reply.json",
        "message-read-result.json",
        "state-result.json",
        "tool-request.json",
        "tool-reply.json",
    ] {
        assert!(examples.iter().any(|e| e.schema == schema), "no example is labelled {schema}");
    }
}

/// The schemas refuse what the types refuse, so a schema that accepts anything cannot pass the
/// examples test: each document here is one its Rust type rejects too.
#[test]
fn the_schemas_refuse_what_the_types_refuse() {
    let run = |extra: Value| {
        let mut base = json!({"broker": "/b", "workspace": "/w", "cli": "/c", "bundleDigest": "d"});
        base.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        base
    };
    let message = |message: Value| json!({ "message": message });
    let good = json!({"id": "7", "from": "a", "kind": "message", "sentAt": "t", "text": "x"});
    let cases: Vec<(&str, Value, bool)> = vec![
        ("run.json", run(json!({})), true),
        ("run.json", json!({"broker": "/b", "workspace": "/w", "cli": "/c"}), false),
        ("run.json", run(json!({"extra": 1})), false),
        ("run.json", run(json!({"confine": "sometimes"})), false),
        ("run.json", run(json!({"turnTimeout": -1})), false),
        ("broker-reply.json", json!({"id": 1, "ok": true, "result": null}), true),
        ("broker-reply.json", json!({"id": 1, "ok": false, "code": "run-ended"}), true),
        ("broker-reply.json", json!({"id": 1, "ok": false, "code": "Bad Code"}), false),
        ("broker-reply.json", json!({"id": 1, "ok": false}), false),
        // A request's id is at least 1, so a reply echoing one is too.
        ("broker-reply.json", json!({"id": 0, "ok": true, "result": null}), false),
        ("broker-reply.json", json!({"id": 0, "ok": false, "code": "run-ended"}), false),
        ("run.json", run(json!({"pollInterval": 0.01})), true),
        ("run.json", run(json!({"pollInterval": 60})), true),
        ("run.json", run(json!({"pollInterval": 0})), false),
        ("run.json", run(json!({"pollInterval": 61})), false),
        ("doctor-check.json", json!({"name": "node 24", "ok": true, "reason": null}), true),
        ("doctor-check.json", json!({"name": "run.json", "ok": false, "reason": "why"}), true),
        ("doctor-check.json", json!({"name": "run.json", "ok": "no", "reason": null}), false),
        ("doctor-check.json", json!({"name": "x", "ok": true, "reason": null, "more": 1}), false),
        ("broker-request.json", json!({"id": 1, "cap": "c", "verb": "state", "args": {}}), true),
        ("broker-request.json", json!({"id": 1, "cap": "c", "verb": "nope", "args": {}}), false),
        ("message-read-result.json", json!({"message": null}), true),
        ("message-read-result.json", message(good.clone()), true),
        (
            "message-read-result.json",
            message(json!({"id": 7, "from": "a", "kind": "message", "sentAt": "t", "text": "x"})),
            false,
        ),
        (
            "message-read-result.json",
            message(json!({"id": "7", "from": "a", "kind": "note", "sentAt": "t", "text": "x"})),
            false,
        ),
        (
            "message-read-result.json",
            message(json!({"id": "7", "from": "a", "kind": "message", "text": "x"})),
            false,
        ),
        (
            "message-read-result.json",
            message(json!({"id": "", "from": "a", "kind": "message", "sentAt": "t", "text": "x"})),
            false,
        ),
        (
            "message-read-result.json",
            message(json!({"id": "7", "from": "", "kind": "message", "sentAt": "t", "text": "x"})),
            false,
        ),
        ("state-result.json", json!({"launch": {}}), false),
        ("tool-reply.json", json!({"ok": false, "error": "nope", "text": "x"}), false),
        ("tool-request.json", json!({"tool": "list_tasks", "args": {}, "cap": "c"}), false),
    ];
    for (name, document, valid) in cases {
        assert_eq!(validator(name).is_valid(&document), valid, "{name} and {document}");
    }
    // The same documents through the runner's own types agree with the message schema.
    let parsed: Result<harness_bus::MessageReadResult, _> = serde_json::from_value(message(good));
    assert!(parsed.unwrap().message.is_some());
}
