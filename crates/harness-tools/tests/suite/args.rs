//! The argument checks as one-line cases: a tool, the arguments as JSON, and either the
//! arguments sent (`sent {...}`, after the defaults) or the error the model reads.

use harness_tools::{prepare_args, tool};
use serde_json::Value;

fn check(name: &str, args: &str, expect: &str) {
    let def = tool(name).unwrap_or_else(|| panic!("no tool {name}"));
    let args: Value = serde_json::from_str(args).unwrap();
    let actual = match prepare_args(def, &args) {
        Ok(sent) => format!("sent {sent}"),
        Err(error) => format!("error {error}"),
    };
    assert_eq!(actual, expect, "{name} {args}");
}

#[test]
fn list_tasks_defaults_to_open_tasks_fifty_at_a_time_without_descriptions() {
    check("list_tasks", "{}", r#"sent {"descriptions":false,"done":false,"limit":50}"#);
    check("list_tasks", "null", r#"sent {"descriptions":false,"done":false,"limit":50}"#);
    check(
        "list_tasks",
        r#"{"done": true, "label": "bug", "limit": 10}"#,
        r#"sent {"descriptions":false,"done":true,"label":"bug","limit":10}"#,
    );
    check("list_tasks", r#"{"limit": 51}"#, "error `limit` must be 1 to 50, got 51");
    check("list_tasks", r#"{"limit": 0}"#, "error `limit` must be 1 to 50, got 0");
    check("list_tasks", r#"{"limit": 1.5}"#, "error `limit` must be an integer");
    check("list_tasks", r#"{"done": "no"}"#, "error `done` must be true or false");
    check("list_tasks", r#"{"status": "open"}"#, "error `status` is not an argument of this tool");
    check("list_tasks", "[]", "error the arguments must be a JSON object");
}

#[test]
fn request_staff_takes_one_to_ten_roles_of_one_to_twenty() {
    let one = r#"{"task_ref": "T-1", "roles": [{"role": "developer", "count": 2}]}"#;
    check("request_staff", one, &format!("sent {}", serde_json::from_str::<Value>(one).unwrap()));
    check(
        "request_staff",
        r#"{"task_ref": "T-1", "roles": []}"#,
        "error `roles` must have 1 to 10 entries, got 0",
    );
    let eleven = format!(
        r#"{{"task_ref": "T-1", "roles": [{}]}}"#,
        [r#"{"role": "d", "count": 1}"#; 11].join(",")
    );
    check("request_staff", &eleven, "error `roles` must have 1 to 10 entries, got 11");
    check(
        "request_staff",
        r#"{"task_ref": "T-1", "roles": [{"role": "d", "count": 1}, {"role": "q", "count": 21}]}"#,
        "error `roles[1].count` must be 1 to 20, got 21",
    );
    check(
        "request_staff",
        r#"{"task_ref": "T-1", "roles": [{"role": "d", "count": 0}]}"#,
        "error `roles[0].count` must be 1 to 20, got 0",
    );
    check(
        "request_staff",
        r#"{"task_ref": "T-1", "roles": [{"role": "d"}]}"#,
        "error `roles[0].count` is required",
    );
    check(
        "request_staff",
        r#"{"task_ref": "T-1", "roles": [{"role": "d", "count": 1, "urgent": true}]}"#,
        "error `roles[0].urgent` is not an argument of this tool",
    );
    check(
        "request_staff",
        r#"{"roles": [{"role": "d", "count": 1}]}"#,
        "error `task_ref` is required",
    );
}

#[test]
fn end_run_takes_a_reason_of_one_to_five_hundred_characters_and_no_decision() {
    check(
        "end_run",
        r#"{"role": "pm", "reason": "done"}"#,
        r#"sent {"reason":"done","role":"pm"}"#,
    );
    check(
        "end_run",
        r#"{"role": "pm", "reason": ""}"#,
        "error `reason` must have 1 to 500 characters, got 0",
    );
    let long = format!(r#"{{"role": "pm", "reason": "{}"}}"#, "é".repeat(501));
    check("end_run", &long, "error `reason` must have 1 to 500 characters, got 501");
    let exactly = format!(r#"{{"role": "pm", "reason": "{}"}}"#, "é".repeat(500));
    assert!(
        prepare_args(tool("end_run").unwrap(), &serde_json::from_str(&exactly).unwrap()).is_ok()
    );
    check(
        "end_run",
        r#"{"role": "pm", "reason": "x", "decision": "D-1"}"#,
        "error `decision` is not an argument of this tool",
    );
}

#[test]
fn raise_decision_cites_both_spec_fields_or_neither_and_knows_two_domains() {
    check("raise_decision", r#"{"question": "Ship?"}"#, r#"sent {"question":"Ship?"}"#);
    check(
        "raise_decision",
        r#"{"question": "Ship?", "spec_path": "spec/a.md", "spec_commit": "abc", "domain": "technical"}"#,
        r#"sent {"domain":"technical","question":"Ship?","spec_commit":"abc","spec_path":"spec/a.md"}"#,
    );
    check(
        "raise_decision",
        r#"{"question": "Ship?", "spec_path": "spec/a.md"}"#,
        "error spec_path and spec_commit go together: cite both or neither",
    );
    check(
        "raise_decision",
        r#"{"question": "Ship?", "spec_commit": "abc"}"#,
        "error spec_path and spec_commit go together: cite both or neither",
    );
    check(
        "raise_decision",
        r#"{"question": "Ship?", "domain": "legal"}"#,
        "error `domain` must be one of technical, delivery",
    );
}

#[test]
fn write_record_has_no_author_and_never_writes_spec() {
    let ok = r#"{"project": "web", "path": "docs/requirements/r1.md", "record": "x"}"#;
    check(
        "write_record",
        ok,
        r#"sent {"path":"docs/requirements/r1.md","project":"web","record":"x"}"#,
    );
    check(
        "write_record",
        r#"{"project": "web", "path": "spec/north-star.md", "record": "x"}"#,
        "error spec/ is never written through write_record",
    );
    check(
        "write_record",
        r#"{"project": "web", "path": "docs/requirements/../../spec/a.md", "record": "x"}"#,
        "error path \"docs/requirements/../../spec/a.md\" must be relative and plain",
    );
    check(
        "write_record",
        r#"{"project": "web", "path": "docs/requirements/r.md", "record": "x", "author": "me"}"#,
        "error `author` is not an argument of this tool",
    );
}

#[test]
fn change_organization_needs_a_revision_and_a_key() {
    check("change_organization", r#"{"limits": {}}"#, "error `revision` is required");
    check(
        "change_organization",
        r#"{"revision": 7}"#,
        "error change_organization needs at least one of limits, models, instances, assistants",
    );
    check(
        "change_organization",
        r#"{"revision": "r7", "assistants": [{"instance": "a", "vars": {}, "tracker": null, "definition": "assistant"}]}"#,
        r#"sent {"assistants":[{"definition":"assistant","instance":"a","tracker":null,"vars":{}}],"revision":"r7"}"#,
    );
    check(
        "change_organization",
        r#"{"revision": 7, "assistants": [{"instance": "a", "vars": {}, "tracker": null, "definition": "pm"}]}"#,
        "error `assistants[0].definition` must be one of assistant",
    );
    check(
        "change_organization",
        r#"{"revision": true, "models": {}}"#,
        "error `revision` must be the revision organization_revision returned (a string or integer)",
    );
}

#[test]
fn the_other_tools_take_their_fields() {
    check("organization_revision", "{}", "sent {}");
    check("organization_revision", r#"{"x": 1}"#, "error `x` is not an argument of this tool");
    check(
        "get_task",
        r#"{"task_ref": ""}"#,
        "error `task_ref` must have 1 to 200 characters, got 0",
    );
    check(
        "review_verdict",
        r#"{"request": "R-1", "verdict": "lgtm"}"#,
        "error `verdict` must be one of approve, changes",
    );
    check(
        "land_work",
        r#"{"task_ref": "T-1", "decision": "D-9"}"#,
        r#"sent {"decision":"D-9","task_ref":"T-1"}"#,
    );
    check("set_name", r#"{"instance": "i", "name": 5}"#, "error `name` must be a string");
}

proptest::proptest! {
    /// Whatever the model sends, an accepted list_tasks call carries `done`, a `limit` of 1 to 50
    /// and `descriptions: false`, and an accepted end_run reason is 1 to 500 characters.
    #[test]
    fn accepted_calls_keep_their_bounds(
        done in proptest::option::of(proptest::bool::ANY),
        limit in proptest::option::of(-5i64..80),
        reason in ".{0,520}",
    ) {
        let mut args = serde_json::Map::new();
        if let Some(done) = done { args.insert("done".into(), done.into()); }
        if let Some(limit) = limit { args.insert("limit".into(), limit.into()); }
        if let Ok(sent) = prepare_args(tool("list_tasks").unwrap(), &Value::Object(args)) {
            proptest::prop_assert!(sent["done"].is_boolean());
            let limit = sent["limit"].as_i64().unwrap();
            proptest::prop_assert!((1..=50).contains(&limit));
            proptest::prop_assert_eq!(&sent["descriptions"], &Value::Bool(false));
        }
        let end = serde_json::json!({"role": "pm", "reason": reason});
        let accepted = prepare_args(tool("end_run").unwrap(), &end).is_ok();
        proptest::prop_assert_eq!(accepted, (1..=500).contains(&reason.encode_utf16().count()));
    }
}
