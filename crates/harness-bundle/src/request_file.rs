//! The JSON form of a bundle request, for `harness bundle build --request FILE`.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use harness_adapters::{HarnessModule, InstallLayout, module};
use harness_tools::{LaunchModel, ResolvedInstance};
use serde::Deserialize;

use crate::error::{BundleError, utf8_path};
use crate::request::{Arbiters, BundleRequest, CredentialStatus, SessionInfo};
use crate::routes::Route;

/// A value given inline (an object) or as the path of a JSON file that holds it (a string,
/// relative to the request).
// The schema's shape only: `resolved` is read from a JSON value, so that an error inside an
// inline instance names its field instead of "did not match any variant".
#[derive(Debug, schemars::JsonSchema)]
#[serde(untagged)]
#[expect(dead_code, reason = "the schema's shape only; `resolved` is read from a JSON value")]
enum Inline<T> {
    Path(#[schemars(with = "std::path::PathBuf")] Utf8PathBuf),
    Value(Box<T>),
}

/// Where the binaries and assets are installed.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Install {
    /// The install prefix (`PREFIX/bin`, `PREFIX/share/harness`).
    #[schemars(with = "std::path::PathBuf")]
    prefix: Utf8PathBuf,
}

/// The JSON file `harness bundle build --request FILE` reads (docs/bundle.md): its schema is
/// docs/schemas/bundle-request.json. Paths in it are relative to its directory.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "bundle request")]
pub struct RequestFile {
    /// The resolved instance, inline or as a path to its JSON file.
    #[schemars(with = "Inline<ResolvedInstance>")]
    resolved: serde_json::Value,
    /// The role contract (markdown) file.
    #[schemars(with = "std::path::PathBuf")]
    contract: Utf8PathBuf,
    /// The business's arbiter for each decision domain.
    #[serde(default)]
    arbiter: Arbiters,
    /// The tracker the session works in; by default the instance's.
    #[serde(default)]
    tracker: Option<String>,
    /// The credential status of the services the role needs.
    #[serde(default)]
    credentials: Vec<CredentialStatus>,
    /// The run, who launched it, the workspace.
    session: SessionInfo,
    /// The harness module; by default the route's harness var.
    #[serde(default)]
    harness: Option<String>,
    /// The route taken.
    route: Route,
    /// Why that route was taken.
    route_reason: String,
    /// The harness module's version; by default the module's own.
    #[serde(default)]
    harness_version: Option<String>,
    /// What `CLI --version` prints; by default the version the module is proven for.
    #[serde(default)]
    cli_version: Option<String>,
    /// The launch models; by default the instance's `launch.models`.
    #[serde(default)]
    models: Option<BTreeMap<String, LaunchModel>>,
    /// Whether the role gets land_work; by default the instance's `landHeld`.
    #[serde(default)]
    land: Option<bool>,
    /// The enabled skills directory.
    #[schemars(with = "std::path::PathBuf")]
    skills_dir: Utf8PathBuf,
    /// The install; by default the prefix the `harness` binary is installed under.
    #[serde(default)]
    install: Option<Install>,
    /// The policy's network field (recorded, not enforced).
    #[serde(default = "default_network")]
    network: String,
}

fn default_network() -> String {
    "host".to_owned()
}

/// A request read from a file, owning what a [`BundleRequest`] borrows.
#[derive(Debug)]
pub struct LoadedRequest {
    resolved: ResolvedInstance,
    contract: String,
    arbiter: Arbiters,
    tracker: Option<String>,
    credentials: Vec<CredentialStatus>,
    session: SessionInfo,
    harness: &'static dyn HarnessModule,
    route: Route,
    route_reason: String,
    harness_version: String,
    cli_version: String,
    models: BTreeMap<String, LaunchModel>,
    land: Option<bool>,
    skills_dir: Utf8PathBuf,
    install: InstallLayout,
    network: String,
}

impl LoadedRequest {
    /// The request for a bundle in `dir`.
    pub fn request(&self, dir: Utf8PathBuf) -> BundleRequest<'_> {
        BundleRequest {
            dir,
            resolved: &self.resolved,
            contract: self.contract.clone(),
            arbiter: self.arbiter.clone(),
            tracker: self.tracker.clone(),
            credentials: self.credentials.clone(),
            session: self.session.clone(),
            harness: self.harness,
            route: self.route,
            route_reason: self.route_reason.clone(),
            harness_version: self.harness_version.clone(),
            cli_version: self.cli_version.clone(),
            models: self.models.clone(),
            land: self.land,
            skills_dir: self.skills_dir.clone(),
            install: self.install.clone(),
            network: self.network.clone(),
        }
    }
}

fn invalid(path: &Utf8Path, what: impl std::fmt::Display) -> BundleError {
    BundleError::Request(format!("{path}: {what}"))
}

/// Reads a request file. Relative paths in it are relative to its directory; `install`
/// defaults to `default_prefix` (the prefix the `harness` binary is installed under); `harness`
/// defaults to the route's harness var; `models` to the instance's `launch.models`;
/// `cliVersion` to the module's `cli_version()`; `land` to the instance's `landHeld`.
pub fn load_request(
    path: &Utf8Path,
    default_prefix: Option<&Utf8Path>,
) -> Result<LoadedRequest, BundleError> {
    // Paths in the file are relative to its directory, which is made absolute first: a bundle's
    // files must point at absolute paths (path-not-absolute). The working directory it is
    // relative to must be UTF-8 too.
    let absolute = std::path::absolute(path).map_err(BundleError::io("resolve", path))?;
    let path = &utf8_path("the request file, made absolute", absolute)?;
    let text = std::fs::read(path).map_err(BundleError::io("read", path))?;
    let file: RequestFile = harness_tools::json::from_slice(&text)
        .map_err(|error| invalid(path, format!("not a bundle request: {error}")))?;
    let base = path.parent().unwrap_or(Utf8Path::new("."));
    let resolved: ResolvedInstance = match file.resolved {
        serde_json::Value::String(resolved_path) => {
            let resolved_path = base.join(resolved_path);
            let bytes =
                std::fs::read(&resolved_path).map_err(BundleError::io("read", &resolved_path))?;
            harness_tools::json::from_slice(&bytes).map_err(|error| {
                invalid(&resolved_path, format!("not a resolved instance: {error}"))
            })?
        }
        serde_json::Value::Object(_) => harness_tools::json::from_value(file.resolved, "resolved")
            .map_err(|error| invalid(path, format!("not a bundle request: {error}")))?,
        other => {
            let what = match other {
                serde_json::Value::Null => "null",
                serde_json::Value::Bool(_) => "a boolean",
                serde_json::Value::Number(_) => "a number",
                _ => "an array",
            };
            return Err(invalid(
                path,
                format!(
                    "not a bundle request: resolved is {what}; give a path (a string) or the instance (an object)"
                ),
            ));
        }
    };
    let contract_path = base.join(&file.contract);
    let contract =
        std::fs::read_to_string(&contract_path).map_err(BundleError::io("read", &contract_path))?;
    let harness_name = match file.harness {
        Some(name) => name,
        None => resolved.vars.get(file.route.vars()[0]).cloned().ok_or_else(|| {
            BundleError::NoRoute(format!("the instance has no {} var", file.route.vars()[0]))
        })?,
    };
    let harness = module(&harness_name)
        .ok_or_else(|| invalid(path, format!("no harness module is called {harness_name:?}")))?;
    let prefix = match (file.install, default_prefix) {
        (Some(install), _) => base.join(install.prefix),
        (None, Some(prefix)) => {
            let layout = InstallLayout::under(prefix);
            let missing = layout.missing().len();
            if missing > 0 {
                return Err(invalid(
                    path,
                    format!(
                        "no install.prefix is given, and the prefix this harness binary is installed under, {prefix:?}, is not a harness install ({missing} of its {} files are missing): give install.prefix, or run the harness of an install",
                        layout.files().len()
                    ),
                ));
            }
            prefix.to_path_buf()
        }
        (None, None) => {
            return Err(invalid(
                path,
                "no install.prefix is given, and none was found from the harness binary's location: give install.prefix",
            ));
        }
    };
    // The prefix as the kernel resolves it (no `..`, no link on the way): the manifest and
    // the CLI's permission rules hold these paths as text. One that does not resolve is left as
    // it is, for the build to refuse naming it.
    let prefix = prefix.canonicalize_utf8().unwrap_or(prefix);
    let models = file.models.unwrap_or_else(|| resolved.launch.models.clone());
    Ok(LoadedRequest {
        contract,
        arbiter: file.arbiter,
        tracker: file.tracker.or_else(|| resolved.tracker.clone()),
        credentials: file.credentials,
        session: file.session,
        harness,
        route: file.route,
        route_reason: file.route_reason,
        harness_version: file.harness_version.unwrap_or_else(|| harness.version().to_owned()),
        cli_version: file.cli_version.unwrap_or_else(|| harness.cli_version().to_owned()),
        models,
        land: file.land,
        skills_dir: base.join(file.skills_dir),
        install: InstallLayout::under(&prefix),
        network: file.network,
        resolved,
    })
}
