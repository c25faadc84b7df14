//! Routes: which harness, model and thinking a session runs with, read from the instance's vars.

use std::collections::BTreeMap;

use harness_tools::LaunchModel;
use serde::{Deserialize, Serialize};

use crate::error::BundleError;

/// Which of the instance's two routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Route {
    /// `harness`, `model`, `thinking`.
    Primary,
    /// `fallback.harness`, `fallback.model`, `fallback.thinking`.
    Fallback,
}

impl Route {
    /// The vars this route reads, in the order they are checked (the spec's `ROUTE_VARS`).
    pub fn vars(self) -> [&'static str; 3] {
        match self {
            Self::Primary => ["harness", "model", "thinking"],
            Self::Fallback => ["fallback.harness", "fallback.model", "fallback.thinking"],
        }
    }

    /// `primary` or `fallback`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Fallback => "fallback",
        }
    }
}

/// What one route resolves to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionModel {
    /// The harness module's name, as the route's var gives it.
    pub harness: String,
    /// The `launch.models` key the var named.
    pub model_key: String,
    /// The provider, from the models entry.
    pub provider: String,
    /// The provider's model id, from the models entry.
    pub model: String,
    /// The thinking level, as the var gives it.
    pub thinking: String,
}

/// The spec's `sessionModel(resolved, models, which)`: reads one route from the instance's vars
/// only. The system's `execution.adapter` and `execution.model` never fill a missing var; they
/// are not even looked at. A missing var, or a model key `models` does not have, is `no-route`
/// naming it.
pub fn session_model(
    vars: &BTreeMap<String, String>,
    models: &BTreeMap<String, LaunchModel>,
    route: Route,
) -> Result<SessionModel, BundleError> {
    let [harness_var, model_var, thinking_var] = route.vars();
    let get = |var: &str| {
        vars.get(var)
            .filter(|value| !value.is_empty())
            .cloned()
            .ok_or_else(|| BundleError::NoRoute(format!("the instance has no {var} var")))
    };
    let harness = get(harness_var)?;
    let model_key = get(model_var)?;
    let thinking = get(thinking_var)?;
    let entry = models.get(&model_key).ok_or_else(|| {
        BundleError::NoRoute(format!(
            "{model_var} names {model_key:?}, which launch.models does not have"
        ))
    })?;
    Ok(SessionModel {
        harness,
        model_key,
        provider: entry.provider.clone(),
        model: entry.model.clone(),
        thinking,
    })
}

/// The spec's `hasFallback(resolved)`: returns true if and only if the instance states a
/// fallback, that is, holds any of the three `fallback.` vars (a partial one then fails
/// [`session_model`] naming what is missing, rather than passing for no fallback).
pub fn has_fallback(vars: &BTreeMap<String, String>) -> bool {
    Route::Fallback.vars().iter().any(|var| vars.contains_key(*var))
}
