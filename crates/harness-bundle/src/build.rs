//! `build_bundle`: one bundle, written once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use harness_adapters::{GATE_TIMEOUT_SECS, ModuleContext};
use harness_tools::{CATALOGUE, ToolsFile, tools_for};
use serde_json::{Value, json};

use crate::error::BundleError;
use crate::prompt::{self, SessionTools};
use crate::request::BundleRequest;
use crate::routes::session_model;
use crate::skills;
use crate::staging::{Staging, hex_sha256};

/// The manifest's `bundleVersion`.
pub const BUNDLE_VERSION: u32 = 1;

/// Builds the bundle `request` describes into `request.dir`, which must not exist; returns it.
///
/// Every refusal (`skill-not-enabled`, `bundle-refused`, `no-route`, `bundle-exists`) and every
/// failure leaves nothing behind: the bundle is assembled in a temporary sibling and renamed
/// into place only when whole.
pub fn build_bundle(request: &BundleRequest<'_>) -> Result<PathBuf, BundleError> {
    let resolved = request.resolved;
    let route = session_model(&resolved.vars, &request.models, request.route)?;
    if route.harness != request.harness.name() {
        return Err(BundleError::NoRoute(format!(
            "the {} route names the harness {:?}, but the module given is {:?}",
            request.route.name(),
            route.harness,
            request.harness.name()
        )));
    }
    if !request.session.workspace.is_absolute() {
        return Err(BundleError::Invalid(format!(
            "the workspace {:?} is not an absolute path",
            request.session.workspace
        )));
    }
    let skills = skills::read_skills(&request.skills_dir, &resolved.skills)?;
    let mut for_tools = resolved.clone();
    for_tools.land_held = request.land;
    let tools = tools_for(&for_tools);
    let typed_raw: Vec<String> = tools.tools.iter().map(|tool| tool.name.clone()).collect();
    let typed: Vec<String> =
        typed_raw.iter().map(|name| request.harness.typed_tool_name(name)).collect();
    let builtin = request.harness.builtin_tools(&resolved.limits.tools);
    let assets = asset_digests(request)?;

    let mut staging = Staging::new(&request.dir)?;
    for skill in &skills {
        for file in &skill.files {
            staging.write(&format!("skills/{}/{}", skill.name, file.rel), file.text.as_bytes())?;
        }
    }
    // The prompt's skill text is the bundle's own copy: the very bytes just written to
    // skills/, read once from the skills directory (O_NOFOLLOW) and never again, so a skill
    // deactivated or changed after this point leaves the run's copy and prompt as they are.
    let section_tools = SessionTools { builtin: &builtin, typed: &typed, typed_raw: &typed_raw };
    staging.write("prompt.md", prompt::render(request, &section_tools, &skills).as_bytes())?;
    staging.write("policy.json", &json_bytes(&policy(request, &builtin, &typed_raw)))?;
    staging
        .write("tools.json", &json_bytes(&serde_json::to_value(&tools).unwrap_or(Value::Null)))?;
    let cx =
        ModuleContext { bundle_dir: &request.dir, layout: &request.install, typed: &typed_raw };
    for (name, bytes) in request.harness.files(&cx) {
        staging.write(name, &bytes)?;
    }
    let manifest =
        manifest(request, &route, &builtin, &typed_raw, &tools, staging.digests(), &assets);
    staging.write("manifest.json", &json_bytes(&manifest))?;
    staging.commit()
}

/// Serializes `value` pretty-printed with a trailing newline.
fn json_bytes(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

fn policy(request: &BundleRequest<'_>, builtin: &[String], typed: &[String]) -> Value {
    json!({
        "harness": request.harness.name(),
        "workspace": request.session.workspace,
        "tools": builtin,
        "typed": typed,
        "network": request.network,
        "services": request.resolved.services,
        "credentials": request.credentials,
    })
}

/// Actions the session spends without a tool of its own: the runner sends every RESULT with
/// message.send.
const RUNNER_ACTIONS: [&str; 1] = ["message.send"];

/// The actions the instance holds that no typed tool it gets is granted by (and the runner does
/// not spend itself).
fn untyped_actions(request: &BundleRequest<'_>, typed: &[String]) -> Vec<String> {
    let mut covered: Vec<&str> = CATALOGUE
        .iter()
        .filter(|def| typed.iter().any(|name| name == def.name))
        .filter_map(|def| def.grant.action())
        .collect();
    covered.extend(RUNNER_ACTIONS);
    let resolved = request.resolved;
    let mut held: Vec<String> = resolved.actions.within_role.clone();
    held.extend(resolved.actions.cross_role.iter().map(|cross| cross.action.clone()));
    held.sort();
    held.dedup();
    held.retain(|action| !covered.contains(&action.as_str()));
    held
}

fn manifest(
    request: &BundleRequest<'_>,
    route: &crate::SessionModel,
    builtin: &[String],
    typed: &[String],
    tools: &ToolsFile,
    files: &BTreeMap<String, String>,
    assets: &BTreeMap<&'static str, (PathBuf, String)>,
) -> Value {
    let resolved = request.resolved;
    let harness_typed: Vec<String> =
        typed.iter().map(|name| request.harness.typed_tool_name(name)).collect();
    let relies_on: Vec<Value> = request
        .harness
        .relies_on()
        .iter()
        .map(|line| json!({"line": line.line, "topic": line.topic, "how": line.how}))
        .collect();
    let assets: BTreeMap<&str, Value> = assets
        .iter()
        .map(|(role, (path, digest))| (*role, json!({"path": path, "sha256": digest})))
        .collect();
    json!({
        "bundleVersion": BUNDLE_VERSION,
        "instance": resolved.instance,
        "run": request.session.run,
        "resolvedDigest": hex_sha256(&serde_json::to_vec(resolved).unwrap_or_default()),
        "harness": request.harness.name(),
        "provider": route.provider,
        "model": route.model,
        "modelKey": route.model_key,
        "thinking": route.thinking,
        "route": request.route.name(),
        "routeReason": request.route_reason,
        "harnessVersion": request.harness_version,
        "builtinTools": builtin,
        "typedTools": typed,
        "cliTools": request.harness.cli_tools(builtin, &harness_typed),
        "turnMarker": request.harness.turn_marker(),
        "projects": tools.projects,
        "untypedActions": untyped_actions(request, typed),
        "reliesOn": relies_on,
        "gateTimeoutSeconds": GATE_TIMEOUT_SECS,
        "adapter": request.harness.adapter(&request.install),
        "files": files,
        "assets": assets,
    })
}

/// A file's identity: if none of these changed, neither did its bytes (for the digest cache).
type Identity = (PathBuf, u64, u64, u64, i64, i64);

/// Digests of installed assets by identity: a host builds many bundles from one install, and a
/// binary is megabytes to hash.
static ASSET_CACHE: Mutex<BTreeMap<Identity, String>> = Mutex::new(BTreeMap::new());

fn identity(path: &Path) -> std::io::Result<Identity> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    Ok((
        path.to_path_buf(),
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime_nsec(),
        meta.ctime_nsec() ^ meta.ctime(),
    ))
}

/// The sha256 of every installed file the harness module names. A missing asset refuses the
/// bundle: a session must not be built to run a gate that is not there.
fn asset_digests(
    request: &BundleRequest<'_>,
) -> Result<BTreeMap<&'static str, (PathBuf, String)>, BundleError> {
    let mut out = BTreeMap::new();
    for asset in request.harness.assets(&request.install) {
        let path = asset.path;
        let id = identity(&path).map_err(BundleError::io("hash", &path))?;
        let cached = ASSET_CACHE.lock().ok().and_then(|cache| cache.get(&id).cloned());
        let digest = match cached {
            Some(digest) => digest,
            None => {
                let bytes = std::fs::read(&path).map_err(BundleError::io("hash", &path))?;
                let digest = hex_sha256(&bytes);
                if let Ok(mut cache) = ASSET_CACHE.lock() {
                    cache.insert(id, digest.clone());
                }
                digest
            }
        };
        out.insert(asset.role, (path, digest));
    }
    Ok(out)
}
