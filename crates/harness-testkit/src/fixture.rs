//! One builder for the bundle requests the tests, benches and the demo make from the fixtures.
//!
//! A [`RoleFixture`] is a role of `fixtures/resolved/` with its contract, routed to one harness
//! and to the scripted model; [`RoleFixture::request`] is the request a host would send for it,
//! every field a test does not care about filled in. A test that cares about one field edits
//! `resolved` first, or overrides the field with struct update syntax:
//! `BundleRequest { land: Some(true), ..fixture.request(dir, workspace, layout)? }`.

use std::io;
use std::path::PathBuf;

use harness_adapters::{HarnessModule, InstallLayout, module};
use harness_bundle::{BundleRequest, Route, SessionInfo};
use harness_contract::Harness;
use harness_tools::{LaunchModel, ResolvedInstance};

use crate::clis::{utf8, workspace_root};

/// The provider and model key the fixtures route to: the scripted Messages API.
pub const SCRIPTED_PROVIDER: &str = "scripted";

/// A role fixture routed to one harness.
#[derive(Debug, Clone)]
pub struct RoleFixture {
    /// The resolved instance; edit it before [`RoleFixture::request`].
    pub resolved: ResolvedInstance,
    /// The role contract, the start of prompt.md.
    pub contract: String,
    /// The harness module the route names.
    pub harness: &'static dyn HarnessModule,
}

impl RoleFixture {
    /// `fixtures/resolved/ROLE.json` and `fixtures/bundle/contracts/ROLE.md`, routed (primary) to
    /// `harness` and to the scripted model `model` (provider [`SCRIPTED_PROVIDER`]), thinking at
    /// the lowest level the harness takes.
    pub fn load(role: &str, harness: Harness, model: &str) -> io::Result<Self> {
        let fixtures = workspace_root().join("fixtures");
        let text = std::fs::read_to_string(fixtures.join(format!("resolved/{role}.json")))?;
        let mut resolved: ResolvedInstance =
            serde_json::from_str(&text).map_err(io::Error::other)?;
        let thinking = match harness {
            Harness::Pi => "off",
            Harness::ClaudeCode => "low",
        };
        resolved.vars =
            [("harness", harness.name()), ("model", "scripted"), ("thinking", thinking)]
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value.to_owned()))
                .collect();
        resolved.launch.models = [(
            "scripted".to_owned(),
            LaunchModel { provider: SCRIPTED_PROVIDER.to_owned(), model: model.to_owned() },
        )]
        .into_iter()
        .collect();
        let harness =
            module(harness.name()).ok_or_else(|| io::Error::other("no harness module"))?;
        Ok(Self { resolved, contract: contract(role)?, harness })
    }

    /// `fixtures/resolved/ROLE.json` as it is, on the route its own vars name (the harness var
    /// picks the module), with its contract.
    pub fn as_is(role: &str) -> io::Result<Self> {
        let fixtures = workspace_root().join("fixtures");
        let text = std::fs::read_to_string(fixtures.join(format!("resolved/{role}.json")))?;
        let resolved: ResolvedInstance = serde_json::from_str(&text).map_err(io::Error::other)?;
        let name = resolved.vars.get("harness").map(String::as_str).unwrap_or_default();
        let harness = module(name).ok_or_else(|| io::Error::other("no harness module"))?;
        Ok(Self { resolved, contract: contract(role)?, harness })
    }

    /// The request a host would send for this fixture: the bundle into `dir`, the session in
    /// `workspace`, the binaries and assets of `install`, the fixtures' enabled skills, the
    /// primary route, and the harness module's own versions.
    /// The paths are taken as UTF-8 (an error names one that is not).
    pub fn request(
        &self,
        dir: impl Into<PathBuf>,
        workspace: impl Into<PathBuf>,
        install: InstallLayout,
    ) -> io::Result<BundleRequest<'_>> {
        let workspace = utf8(workspace)?;
        Ok(BundleRequest {
            dir: utf8(dir)?,
            resolved: &self.resolved,
            contract: self.contract.clone(),
            arbiter: Default::default(),
            tracker: self.resolved.tracker.clone(),
            credentials: Vec::new(),
            session: SessionInfo {
                run: "run-test-1".to_owned(),
                launched_by: "the test host".to_owned(),
                workspace,
            },
            harness: self.harness,
            route: Route::Primary,
            route_reason: "the primary route is healthy".to_owned(),
            harness_version: self.harness.version().to_owned(),
            cli_version: self.harness.cli_version().to_owned(),
            models: self.resolved.launch.models.clone(),
            land: None,
            skills_dir: workspace_root().join("fixtures/bundle/skills-enabled"),
            install,
            network: "host".to_owned(),
        })
    }
}

/// The role's contract, `fixtures/bundle/contracts/ROLE.md`, or a one-line one for a role
/// without a file there.
fn contract(role: &str) -> io::Result<String> {
    let path = workspace_root().join(format!("fixtures/bundle/contracts/{role}.md"));
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            Ok(format!("# Role contract: {role}\n"))
        }
        Err(error) => Err(error),
    }
}
