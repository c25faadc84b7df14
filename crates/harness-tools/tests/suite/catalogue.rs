//! The catalogue as a table: every tool the spec names, its route and grant, the constants kept
//! with the broker's list, and which tools each resolved-instance fixture gets.

use std::collections::BTreeSet;

use harness_testkit::workspace_root;
use harness_tools::{
    CATALOGUE, Grant, ORGANIZATION_KEYS, ResolvedInstance, Route, THREAD_DEFINITION, ToolsFile,
    tool, tools_for,
};
use serde_json::Value;

const SPEC_TOOLS: &[&str] = &[
    "list_tasks",
    "get_task",
    "request_staff",
    "end_run",
    "organization_revision",
    "change_organization",
    "set_name",
    "push_working",
    "request_review",
    "fetch_review",
    "review_verdict",
    "land_work",
    "task_close",
    "launch",
    "read_spec",
    "write_record",
    "raise_decision",
];

#[test]
fn every_tool_the_spec_names_is_a_row_and_nothing_else() {
    let rows: BTreeSet<&str> = CATALOGUE.iter().map(|t| t.name).collect();
    let spec: BTreeSet<&str> = SPEC_TOOLS.iter().copied().collect();
    assert_eq!(rows, spec);
    assert_eq!(rows.len(), CATALOGUE.len(), "a name appears twice");
}

/// One row: tool, route as `route:verb`, grant's action (or `-`).
fn check_route(name: &str, expect: &str) {
    let def = tool(name).unwrap();
    let action = def.grant.action().unwrap_or("-");
    let actual = format!("{}:{} {action}", def.route.name(), def.route.verb());
    assert_eq!(actual, expect, "{name}");
}

#[test]
fn routes_and_grants() {
    check_route("list_tasks", "broker:tasks -");
    check_route("get_task", "broker:task.get -");
    check_route("request_staff", "broker:staff.request message.send");
    check_route("end_run", "broker:role.revoke role.end");
    check_route("organization_revision", "broker:organization.revision organization.change");
    check_route("change_organization", "broker:organization.set organization.change");
    check_route("set_name", "broker:name.set instance.name");
    check_route("push_working", "git:working.push git.push.working");
    check_route("request_review", "broker:review.request review.request");
    check_route("fetch_review", "git:working.fetch review.verdict");
    check_route("review_verdict", "broker:review.verdict review.verdict");
    check_route("land_work", "git:working.land git.merge.protected");
    check_route("task_close", "broker:task.close task.close");
    check_route("launch", "launch:launch role.launch");
    check_route("read_spec", "broker:spec.read -");
    check_route("write_record", "broker:record.write record.write");
    check_route("raise_decision", "broker:decision.raise -");
    assert_eq!(tool("read_spec").unwrap().grant, Grant::Everyone);
    assert_eq!(tool("list_tasks").unwrap().grant, Grant::Tracker);
    assert!(matches!(tool("push_working").unwrap().route, Route::Git(_)));
}

#[test]
fn descriptions_say_what_the_spec_says() {
    let end_run = tool("end_run").unwrap().description;
    for words in ["role.revoke", "1 to 500 characters", "never a decision", "role-end-refused"] {
        assert!(end_run.contains(words), "end_run's description lacks {words:?}: {end_run}");
    }
    assert!(end_run.contains("assistant"), "{end_run}");
    let change = tool("change_organization").unwrap().description;
    for words in
        ["organization_revision", "revision-conflict", "limits, models, instances and assistants"]
    {
        assert!(change.contains(words), "change_organization lacks {words:?}: {change}");
    }
    let land = tool("land_work").unwrap().description;
    assert!(land.contains("land-busy") && land.contains("RESULT"), "{land}");
}

#[test]
fn every_schema_is_a_closed_object_naming_its_required_fields() {
    for def in CATALOGUE {
        let schema = def.input_schema();
        assert_eq!(schema["type"], "object", "{}", def.name);
        assert_eq!(schema["additionalProperties"], false, "{}", def.name);
        let properties = schema["properties"].as_object().unwrap();
        for param in def.params {
            let property = &properties[param.name];
            assert!(property["description"].is_string(), "{}.{}", def.name, param.name);
        }
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().map(|v| v.as_str().unwrap()).collect())
            .unwrap_or_default();
        let expected: Vec<&str> =
            def.params.iter().filter(|p| p.required).map(|p| p.name).collect();
        assert_eq!(required, expected, "{}", def.name);
        assert!(!def.description.is_empty());
    }
    let assistants =
        &tool("change_organization").unwrap().input_schema()["properties"]["assistants"];
    assert_eq!(
        assistants["items"]["properties"]["definition"]["enum"],
        serde_json::json!([THREAD_DEFINITION])
    );
}

#[test]
fn organization_keys_match_the_brokers_list_in_fixtures() {
    let path = workspace_root().join("fixtures/broker/organization-keys.json");
    let broker: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let keys: Vec<&str> = broker["organizationKeys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(ORGANIZATION_KEYS, keys.as_slice(), "ORGANIZATION_KEYS differs from {}", path);
    assert_eq!(broker["threadDefinition"], THREAD_DEFINITION, "THREAD_DEFINITION differs");
    let properties = tool("change_organization").unwrap().input_schema()["properties"].clone();
    for key in ORGANIZATION_KEYS {
        assert!(properties.get(*key).is_some(), "change_organization's schema lacks {key}");
    }
}

/// Loads `fixtures/resolved/NAME.json` and returns its tools, space-separated, and its projects.
fn tools_of(name: &str) -> (String, Vec<String>) {
    let path = workspace_root().join(format!("fixtures/resolved/{name}.json"));
    let resolved = ResolvedInstance::load(path.as_std_path()).unwrap();
    let file = tools_for(&resolved);
    (file.names().join(" "), file.projects)
}

#[test]
fn which_tools_each_fixture_gets() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "pm",
            "list_tasks get_task request_staff push_working request_review task_close read_spec \
             raise_decision",
            &["web"],
        ),
        (
            "chief-of-staff",
            "list_tasks get_task end_run organization_revision change_organization set_name \
             launch read_spec raise_decision",
            &[],
        ),
        (
            "reviewer",
            "land_work fetch_review review_verdict read_spec write_record raise_decision",
            &["web"],
        ),
        ("assistant", "read_spec raise_decision", &[]),
    ];
    for (fixture, tools, projects) in cases {
        let expected: String = tools.split_whitespace().collect::<Vec<_>>().join(" ");
        let (actual, actual_projects) = tools_of(fixture);
        assert_eq!(actual, expected, "{fixture}");
        assert_eq!(actual_projects, *projects, "{fixture}");
    }
}

#[test]
fn push_and_fetch_need_a_clone_and_land_needs_land_held() {
    let path = workspace_root().join("fixtures/resolved/reviewer.json");
    let mut resolved = ResolvedInstance::load(path.as_std_path()).unwrap();
    resolved.projects.iter_mut().for_each(|p| p.clone = false);
    resolved.actions.within_role.push("git.push.working".into());
    let names = tools_for(&resolved).names().join(" ");
    assert!(!names.contains("fetch_review") && !names.contains("push_working"), "{names}");
    assert!(names.contains("land_work"), "land_work goes with or without a clone: {names}");
    resolved.land_held = false;
    let names = tools_for(&resolved).names().join(" ");
    assert!(!names.contains("land_work"), "holding git.merge.protected is not landHeld: {names}");
}

#[test]
fn tools_json_round_trips_and_refuses_strangers() {
    let dir = tempfile::tempdir().unwrap();
    let path = workspace_root().join("fixtures/resolved/pm.json");
    let file = tools_for(&ResolvedInstance::load(path.as_std_path()).unwrap());
    let written = dir.path().join("tools.json");
    std::fs::write(&written, file.to_json()).unwrap();
    assert_eq!(ToolsFile::load(&written).unwrap(), file);
    let text = file.to_json();
    assert!(text.contains("\"inputSchema\""), "{text}");

    let stranger = dir.path().join("stranger.json");
    std::fs::write(
        &stranger,
        r#"{"tools": [{"name": "rm_rf", "description": "", "inputSchema": {}}]}"#,
    )
    .unwrap();
    let error = ToolsFile::load(&stranger).unwrap_err().to_string();
    assert!(error.contains("rm_rf") && error.contains("not a typed tool"), "{error}");
}

/// The most bytes `kind` takes as compact JSON, every string at its longest and every UTF-16
/// code unit of it written as the longest escape there is (`\uXXXX`, six bytes), or `None` for a
/// kind the catalogue leaves unbounded (an object, a revision).
fn most_bytes(kind: &harness_tools::Kind) -> Option<usize> {
    use harness_tools::Kind;
    Some(match kind {
        Kind::Str { max, .. } => 2 + 6 * max,
        Kind::Int { min, max } => min.to_string().len().max(max.to_string().len()),
        Kind::Bool => "false".len(),
        Kind::Enum(values) => values.iter().map(|value| 2 + value.len()).max()?,
        Kind::Revision | Kind::Object => return None,
        Kind::List { item, max, .. } => 2 + max * (most_bytes(item)? + 1),
        Kind::Record(params) => most_record_bytes(params)?,
        Kind::Nullable(inner) => most_bytes(inner)?.max("null".len()),
    })
}

fn most_record_bytes(params: &[harness_tools::Param]) -> Option<usize> {
    let fields: Option<Vec<usize>> = params
        .iter()
        .map(|param| Some(2 + param.name.len() + 1 + most_bytes(&param.kind)? + 1))
        .collect();
    Some(2 + fields?.iter().sum::<usize>())
}

/// The request cap is what the largest call the catalogue bounds needs, rounded up to 4 KiB:
/// `{"tool":"NAME","args":ARGS}` and the newline, ARGS at its longest. change_organization's
/// objects are the broker's to bound; the cap is theirs too (docs/protocol.md, section 2).
#[test]
fn the_request_cap_is_the_largest_bounded_call_rounded_up_to_4_kib() {
    let mut unbounded = Vec::new();
    let mut largest = (0, "");
    for tool in CATALOGUE {
        match most_record_bytes(tool.params) {
            Some(args) => {
                let line = r#"{"tool":""#.len() + tool.name.len() + r#"","args":"#.len() + args + 2;
                largest = largest.max((line, tool.name));
            }
            None => unbounded.push(tool.name),
        }
    }
    assert_eq!(unbounded, ["change_organization"]);
    assert_eq!(largest.1, "write_record");
    assert!(largest.0 <= harness_tools::MAX_REQUEST_BYTES, "{largest:?}");
    assert_eq!(harness_tools::MAX_REQUEST_BYTES, largest.0.div_ceil(4096) * 4096, "{largest:?}");
}
