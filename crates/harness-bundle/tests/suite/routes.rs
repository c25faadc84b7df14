//! Routes: the instance's vars only.

use std::collections::BTreeMap;

use harness_bundle::{Route, build_bundle, has_fallback, session_model};
use harness_tools::LaunchModel;

use super::env::{Env, request, request_with, resolved};

fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn models() -> BTreeMap<String, LaunchModel> {
    [("sonnet", "anthropic", "claude-sonnet-5"), ("local", "scripted", "scripted-model")]
        .into_iter()
        .map(|(key, provider, model)| {
            (key.to_owned(), LaunchModel { provider: provider.to_owned(), model: model.to_owned() })
        })
        .collect()
}

#[test]
fn primary_and_fallback_read_their_own_vars() {
    let v = vars(&[
        ("harness", "pi"),
        ("model", "local"),
        ("thinking", "low"),
        ("fallback.harness", "claude-code"),
        ("fallback.model", "sonnet"),
        ("fallback.thinking", "high"),
    ]);
    let primary = session_model(&v, &models(), Route::Primary).unwrap();
    assert_eq!(
        (
            primary.harness.as_str(),
            primary.provider.as_str(),
            primary.model.as_str(),
            primary.thinking.as_str()
        ),
        ("pi", "scripted", "scripted-model", "low")
    );
    let fallback = session_model(&v, &models(), Route::Fallback).unwrap();
    assert_eq!((fallback.harness.as_str(), fallback.model_key.as_str()), ("claude-code", "sonnet"));
    assert!(has_fallback(&v));
}

#[test]
fn a_missing_var_is_no_route_naming_it() {
    type Case<'a> = (&'a [(&'a str, &'a str)], Route, &'a str);
    let cases: &[Case<'_>] = &[
        (&[("model", "local"), ("thinking", "low")], Route::Primary, "harness"),
        (&[("harness", "pi"), ("thinking", "low")], Route::Primary, "model"),
        (&[("harness", "pi"), ("model", "local")], Route::Primary, "thinking"),
        (&[("harness", "pi"), ("model", "local"), ("thinking", "")], Route::Primary, "thinking"),
        (
            &[("fallback.harness", "pi"), ("fallback.thinking", "low")],
            Route::Fallback,
            "fallback.model",
        ),
        // The primary vars never fill the fallback route.
        (
            &[("harness", "pi"), ("model", "local"), ("thinking", "low")],
            Route::Fallback,
            "fallback.harness",
        ),
    ];
    for (pairs, route, var) in cases {
        let error = session_model(&vars(pairs), &models(), *route).unwrap_err();
        assert_eq!(error.code(), "no-route");
        assert!(error.to_string().contains(&format!("no {var} var")), "{error}");
    }
}

#[test]
fn a_model_key_launch_models_lacks_is_no_route() {
    let v = vars(&[("harness", "pi"), ("model", "gpt"), ("thinking", "low")]);
    let error = session_model(&v, &models(), Route::Primary).unwrap_err();
    assert_eq!(error.code(), "no-route");
    assert!(error.to_string().contains("\"gpt\""), "{error}");
}

#[test]
fn has_fallback_says_whether_the_instance_states_one() {
    assert!(!has_fallback(&vars(&[("harness", "pi"), ("model", "local"), ("thinking", "low")])));
    assert!(has_fallback(&vars(&[("fallback.model", "local")])));
}

#[test]
fn execution_vars_never_fill_a_route() {
    // An instance whose only model is the system's execution block has no route.
    let env = Env::new();
    let mut instance = resolved("assistant");
    instance.vars = vars(&[("execution.adapter", "pi"), ("execution.model", "haiku")]);
    let pi = harness_adapters::module("pi").unwrap();
    let error = build_bundle(&request_with(&env, &instance, Route::Primary, pi)).unwrap_err();
    assert_eq!(error.code(), "no-route", "{error}");
    assert!(env.out_is_empty());
}

#[test]
fn a_route_naming_another_harness_than_the_module_is_refused() {
    let env = Env::new();
    let instance = resolved("pm");
    let mut req = request(&env, &instance, Route::Primary);
    req.harness = harness_adapters::module("pi").unwrap();
    let error = build_bundle(&req).unwrap_err();
    assert_eq!(error.code(), "no-route", "{error}");
    assert!(env.out_is_empty());
}
