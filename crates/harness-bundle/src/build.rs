//! `build_bundle`: one bundle, written once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use camino::Utf8PathBuf;
use harness_adapters::InstallLayout;
use harness_adapters::{Asset, GATE_TIMEOUT_SECS, ModuleContext};
use harness_tools::{CATALOGUE, ToolsFile, tools_for};

use crate::bundle_files::{Manifest, ManifestAsset, Policy, ReliesOn};
use crate::error::BundleError;
use crate::prompt::{self, SessionTools};
use crate::request::BundleRequest;
use crate::routes::session_model;
use crate::skills;
use crate::staging::{Staging, hex_sha256};

/// The manifest's `bundleVersion`.
pub const BUNDLE_VERSION: u32 = 1;

/// What a build returns: where the bundle is, and its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// The bundle directory (the request's `dir`).
    pub dir: Utf8PathBuf,
    /// The bundle's digest: the lowercase hex sha256 of its manifest.json. The host puts it in
    /// run.json (`bundleDigest`); the runner refuses a bundle whose manifest does not hash to it.
    pub digest: String,
}

/// Builds the bundle `request` describes into `request.dir`, which must not exist; returns it
/// with its digest.
///
/// Every refusal (docs/bundle.md lists the codes) and every failure leaves nothing behind: the
/// bundle is assembled in a temporary sibling and renamed into place only when whole.
pub fn build_bundle(request: &BundleRequest<'_>) -> Result<Built, BundleError> {
    let resolved = request.resolved;
    check_paths(request, Check::Absolute)?;
    // Before the normal form: a prefix that is no install is named as such, however spelled.
    check_install(&request.install)?;
    check_paths(request, Check::Normal)?;
    let route = session_model(&resolved.vars, &request.models, request.route)?;
    if route.harness != request.harness.name() {
        return Err(BundleError::NoRoute(format!(
            "the {} route names the harness {:?}, but the module given is {:?}",
            request.route.name(),
            route.harness,
            request.harness.name()
        )));
    }
    check_workspace(request)?;
    // land_work follows the resolved instance's landHeld; a request may only repeat it.
    if let Some(land) = request.land
        && land != resolved.land_held
    {
        return Err(BundleError::LandMismatch { requested: land, held: resolved.land_held });
    }
    if request.contract.contains('\0') {
        return Err(BundleError::Contract(
            "holds a NUL byte, which cannot go through a command-line argument".to_owned(),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(skill) = resolved.skills.iter().find(|skill| !seen.insert(skill.as_str())) {
        return Err(BundleError::DuplicateSkill { skill: skill.clone() });
    }
    let skills = skills::read_skills(request.skills_dir.as_std_path(), &resolved.skills)?;
    let tools = tools_for(resolved);
    let typed_raw: Vec<String> = tools.tools.iter().map(|tool| tool.name.clone()).collect();
    let typed: Vec<String> =
        typed_raw.iter().map(|name| request.harness.typed_tool_name(name)).collect();
    let builtin = request.harness.builtin_tools(&resolved.limits.tools);
    // The prompt's skill text is the bundle's own copy: the very bytes written to skills/ below,
    // read once from the skills directory (O_NOFOLLOW) and never again, so a skill deactivated
    // or changed after this point leaves the run's copy and prompt as they are.
    let section_tools = SessionTools { builtin: &builtin, typed: &typed, typed_raw: &typed_raw };
    let prompt = prompt::render(request, &section_tools, &skills);
    if prompt.len() > PROMPT_BYTES {
        return Err(BundleError::PromptTooLarge { bytes: prompt.len(), limit: PROMPT_BYTES });
    }
    let assets = asset_digests(request)?;

    let mut staging = Staging::new(request.dir.as_std_path())?;
    for skill in &skills {
        for file in &skill.files {
            staging.write(&format!("skills/{}/{}", skill.name, file.rel), file.text.as_bytes())?;
        }
    }
    staging.write("prompt.md", prompt.as_bytes())?;
    staging.write(
        "policy.json",
        &sorted_json_bytes("policy.json", &policy(request, &builtin, &typed_raw))?,
    )?;
    staging.write("tools.json", &json_bytes("tools.json", &tools)?)?;
    let cx = ModuleContext {
        bundle_dir: &request.dir,
        workspace: &request.session.workspace,
        layout: &request.install,
        typed: &typed_raw,
        builtin: &builtin,
    };
    let files = request
        .harness
        .files(&cx)
        .map_err(|source| BundleError::Serialize { what: "the harness's files", source })?;
    for (name, bytes) in files {
        staging.write(name, &bytes)?;
    }
    let manifest =
        manifest(request, &route, &builtin, &typed_raw, &tools, staging.digests(), &assets)?;
    let manifest = sorted_json_bytes("manifest.json", &manifest)?;
    staging.write("manifest.json", &manifest)?;
    staging.commit()?;
    Ok(Built { dir: request.dir.clone(), digest: hex_sha256(&manifest) })
}

/// The most bytes prompt.md may have: the adapters pass it as one command-line argument
/// (`--system-prompt "$(cat prompt.md)"`), and Linux takes at most 128 KiB (`MAX_ARG_STRLEN`,
/// the terminating NUL included) in one argument; 8 KiB are left for the rest of the command
/// line and the environment.
pub const PROMPT_BYTES: usize = 120 * 1024;

/// Refuses a relative bundle directory or install path, or one holding `.` or `..`: the
/// bundle's files point at each other and at the install by these paths, they are used from
/// the workspace, not from here, and a harness's own permission rules match them as text.
fn check_paths(request: &BundleRequest<'_>, check: Check) -> Result<(), BundleError> {
    let mut paths = vec![("dir", request.dir.as_path())];
    paths.extend(request.install.paths());
    for (field, path) in paths {
        match check {
            Check::Absolute if !path.is_absolute() => {
                return Err(BundleError::NotAbsolute { field, path: path.into() });
            }
            Check::Normal => {
                let dots = |c: &camino::Utf8Component<'_>| {
                    matches!(c, camino::Utf8Component::CurDir | camino::Utf8Component::ParentDir)
                };
                // `components()` drops a `.` inside a path, so the text is looked at too.
                if path.components().any(|c| dots(&c)) || path.as_str().split('/').any(|s| s == ".")
                {
                    return Err(BundleError::NotNormal { field, path: path.to_owned() });
                }
            }
            Check::Absolute => {}
        }
    }
    Ok(())
}

/// Which of [`check_paths`]'s checks to make.
#[derive(Clone, Copy)]
enum Check {
    /// Every path absolute (`path-not-absolute`).
    Absolute,
    /// No `.` or `..` in any (`path-not-normal`).
    Normal,
}

/// Refuses an install that is not whole (`install-invalid`): a bundle points at every binary and
/// asset of it, and a prefix `cargo xtask dist` did not install into is the usual cause, which
/// the error says. `build_bundle` checks this first; `harness doctor` reports it as is.
pub fn check_install(install: &InstallLayout) -> Result<(), BundleError> {
    let missing = install.missing();
    let Some(first) = missing.first() else { return Ok(()) };
    Err(BundleError::Install {
        prefix: install.prefix().map(|prefix| prefix.to_owned()),
        missing: missing.len(),
        of: install.files().len(),
        first: first.clone(),
    })
}

/// Refuses a workspace the gate cannot confine a session to: relative, missing, not a
/// directory, `/`, or not in normal form (the policy's workspace must be the path every check
/// resolves to: no `.`, `..`, repeated or trailing `/`, no symlink on the way). A bundle inside
/// the workspace is refused too: the session's file tools could then rewrite its policy.
fn check_workspace(request: &BundleRequest<'_>) -> Result<(), BundleError> {
    let path = &request.session.workspace;
    let problem = |problem: String| BundleError::Workspace { path: path.into(), problem };
    if !path.is_absolute() {
        return Err(BundleError::NotAbsolute { field: "session.workspace", path: path.into() });
    }
    let resolved = match std::fs::canonicalize(path) {
        Ok(resolved) => resolved,
        Err(error) => return Err(problem(format!("cannot be resolved: {error}"))),
    };
    if !resolved.is_dir() {
        return Err(problem("is not a directory".to_owned()));
    }
    if resolved == Path::new("/") {
        return Err(problem("is / (the gate would allow the whole machine)".to_owned()));
    }
    if resolved.as_os_str() != path.as_os_str() {
        return Err(problem(format!(
            "is not in normal form: it resolves to {resolved:?}; give that path"
        )));
    }
    // The bundle does not exist yet: its parent, resolved, says where it will be.
    let parent = request.dir.parent().and_then(|parent| std::fs::canonicalize(parent).ok());
    if request.dir.starts_with(&resolved)
        || parent.is_some_and(|parent| parent.starts_with(&resolved))
    {
        return Err(problem(format!(
            "holds the bundle directory {:?}: the session could rewrite its policy",
            request.dir
        )));
    }
    Ok(())
}

/// Serializes `value` pretty-printed with a trailing newline; an error fails the build (an
/// empty policy or settings file would fail open).
fn json_bytes(what: &'static str, value: &impl serde::Serialize) -> Result<Vec<u8>, BundleError> {
    let mut bytes = serde_json::to_vec_pretty(value)
        .map_err(|source| BundleError::Serialize { what, source })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// As [`json_bytes`], with every object's keys sorted (through a `Value`): policy.json's and
/// manifest.json's bytes, and so the digest, do not depend on the order of their struct's fields.
fn sorted_json_bytes(
    what: &'static str,
    value: &impl serde::Serialize,
) -> Result<Vec<u8>, BundleError> {
    let value =
        serde_json::to_value(value).map_err(|source| BundleError::Serialize { what, source })?;
    json_bytes(what, &value)
}

fn policy(request: &BundleRequest<'_>, builtin: &[String], typed: &[String]) -> Policy {
    Policy {
        harness: request.harness.name().to_owned(),
        workspace: request.session.workspace.clone(),
        tools: builtin.to_vec(),
        typed: typed.to_vec(),
        network: request.network.clone(),
        services: request.resolved.services.clone(),
        credentials: request.credentials.clone(),
    }
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
    assets: &BTreeMap<&'static str, (Utf8PathBuf, String)>,
) -> Result<Manifest, BundleError> {
    let resolved = request.resolved;
    let harness_typed: Vec<String> =
        typed.iter().map(|name| request.harness.typed_tool_name(name)).collect();
    let relies_on = request
        .harness
        .relies_on()
        .iter()
        .map(|line| ReliesOn {
            line: line.line,
            topic: line.topic.to_owned(),
            how: line.how.to_owned(),
        })
        .collect();
    let assets = assets
        .iter()
        .map(|(role, (path, digest))| {
            ((*role).to_owned(), ManifestAsset { path: path.clone(), sha256: digest.clone() })
        })
        .collect();
    let resolved_json = serde_json::to_vec(resolved)
        .map_err(|source| BundleError::Serialize { what: "the resolved instance", source })?;
    Ok(Manifest {
        bundle_version: BUNDLE_VERSION,
        instance: resolved.instance.clone(),
        run: request.session.run.clone(),
        resolved_digest: hex_sha256(&resolved_json),
        harness: request.harness.name().to_owned(),
        provider: route.provider.clone(),
        model: route.model.clone(),
        model_key: route.model_key.clone(),
        thinking: route.thinking.clone(),
        route: request.route.name().to_owned(),
        route_reason: request.route_reason.clone(),
        harness_version: request.harness_version.clone(),
        cli_version: request.cli_version.clone(),
        builtin_tools: builtin.to_vec(),
        typed_tools: typed.to_vec(),
        cli_tools: request.harness.cli_tools(builtin, &harness_typed),
        turn_marker: request.harness.turn_marker(),
        projects: tools.projects.clone(),
        untyped_actions: untyped_actions(request, typed),
        relies_on,
        gate_timeout_seconds: GATE_TIMEOUT_SECS,
        adapter: request.harness.adapter(&request.install),
        files: files.clone(),
        assets,
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
) -> Result<BTreeMap<&'static str, (Utf8PathBuf, String)>, BundleError> {
    let mut out = BTreeMap::new();
    let mut assets = request.harness.assets(&request.install);
    // The adapter decides whether the gate runs at all: it is sealed like every other asset.
    assets.push(Asset { role: "adapter", path: request.harness.adapter(&request.install) });
    for asset in assets {
        let path = asset.path;
        let id = identity(path.as_std_path()).map_err(BundleError::io("hash", &path))?;
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
