//! A test environment: a fake install prefix (small files standing for the binaries, so that
//! digests are stable), a copy of the fixture skills, and a directory for bundles.

use std::collections::BTreeMap;
use std::path::Path;

use camino::Utf8PathBuf;
use harness_adapters::{HarnessModule, InstallLayout, module};
use harness_bundle::{BundleRequest, CredentialStatus, Route, SessionInfo};
use harness_tools::ResolvedInstance;

pub(crate) struct Env {
    _dir: tempfile::TempDir,
    pub(crate) root: Utf8PathBuf,
    pub(crate) layout: InstallLayout,
    pub(crate) skills: Utf8PathBuf,
    pub(crate) workspace: Utf8PathBuf,
    pub(crate) out: Utf8PathBuf,
}

pub(crate) fn workspace_root() -> Utf8PathBuf {
    camino::Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize_utf8().unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

impl Env {
    pub(crate) fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::try_from(dir.path().canonicalize().unwrap()).unwrap();
        let layout = InstallLayout::under(&root.join("prefix"));
        for (path, text) in [
            (&layout.gate, "fake harness-gate"),
            (&layout.mcp, "fake harness-mcp"),
            (&layout.unslop, "fake harness-unslop"),
            (&layout.runner, "fake harness-runner"),
            (&layout.harness, "fake harness"),
            (&layout.pi_extension, "fake extension"),
            (&layout.pi_unslop_extension, "fake unslop extension"),
            (&layout.unslop_lists, "{\"fake\": true}"),
            (&layout.adapters.join("pi.sh"), "fake pi adapter"),
            (&layout.adapters.join("claude-code.sh"), "fake claude-code adapter"),
        ] {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let skills = root.join("skills-enabled");
        copy_dir(
            workspace_root().join("fixtures/bundle/skills-enabled").as_std_path(),
            skills.as_std_path(),
        );
        let workspace = root.join("ws");
        std::fs::create_dir_all(&workspace).unwrap();
        let out = root.join("out");
        std::fs::create_dir_all(&out).unwrap();
        Env { _dir: dir, root, layout, skills, workspace, out }
    }

    pub(crate) fn bundle_dir(&self) -> Utf8PathBuf {
        self.out.join("bundle")
    }

    /// Returns true if and only if `out` holds nothing at all: no bundle, no partial sibling.
    pub(crate) fn out_is_empty(&self) -> bool {
        std::fs::read_dir(&self.out).unwrap().next().is_none()
    }

    /// Replaces every temporary path with a stable marker, and every sha256 (digests of files
    /// that hold those paths differ from run to run; the verify tests check digests instead).
    pub(crate) fn redact(&self, text: &str) -> String {
        let text = text.replace(self.root.as_str(), "[ROOT]");
        let mut out = String::with_capacity(text.len());
        let mut run = String::new();
        for c in text.chars() {
            if c.is_ascii_hexdigit() && !c.is_ascii_uppercase() {
                run.push(c);
                continue;
            }
            out.push_str(if run.len() == 64 { "[sha256]" } else { &run });
            run.clear();
            out.push(c);
        }
        out.push_str(if run.len() == 64 { "[sha256]" } else { &run });
        out
    }
}

pub(crate) fn resolved(name: &str) -> ResolvedInstance {
    let path = workspace_root().join(format!("fixtures/resolved/{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|error| panic!("{path}: {error}"))
}

pub(crate) fn contract(name: &str) -> String {
    std::fs::read_to_string(workspace_root().join(format!("fixtures/bundle/contracts/{name}.md")))
        .unwrap_or_else(|_| format!("# Role contract: {name}\n"))
}

/// The request for `resolved` on `route`, the module named by that route's harness var.
pub(crate) fn request<'a>(
    env: &Env,
    resolved: &'a ResolvedInstance,
    route: Route,
) -> BundleRequest<'a> {
    let harness_var = route.vars()[0];
    request_with(env, resolved, route, module(&resolved.vars[harness_var]).unwrap())
}

/// The request for `resolved` on `route`, with the module `harness`.
pub(crate) fn request_with<'a>(
    env: &Env,
    resolved: &'a ResolvedInstance,
    route: Route,
    harness: &'static dyn HarnessModule,
) -> BundleRequest<'a> {
    BundleRequest {
        dir: env.bundle_dir(),
        resolved,
        contract: contract(&resolved.role),
        arbiter: BTreeMap::from([
            ("delivery".to_owned(), "acme-cos".to_owned()),
            ("technical".to_owned(), "acme-cto".to_owned()),
        ]),
        tracker: resolved.tracker.clone(),
        credentials: resolved
            .services
            .iter()
            .map(|service| CredentialStatus {
                service: service.clone(),
                status: "usable".to_owned(),
            })
            .collect(),
        session: SessionInfo {
            run: "run-0001".to_owned(),
            launched_by: "jo (human)".to_owned(),
            workspace: env.workspace.clone(),
        },
        harness,
        route,
        route_reason: match route {
            Route::Primary => "the primary route is healthy".to_owned(),
            Route::Fallback => "the primary provider answered 529 three times".to_owned(),
        },
        harness_version: harness.version().to_owned(),
        cli_version: harness.cli_version().to_owned(),
        models: resolved.launch.models.clone(),
        land: None,
        skills_dir: env.skills.clone(),
        install: env.layout.clone(),
        network: "host".to_owned(),
    }
}

/// Every file of a bundle, sorted, with its mode and text, temporary paths redacted.
pub(crate) fn render_bundle(env: &Env, dir: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let mut files = Vec::new();
    collect(dir, dir, &mut files);
    files.sort();
    let mut out = String::new();
    for rel in files {
        let path = dir.join(&rel);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        let text = std::fs::read_to_string(&path).unwrap();
        out.push_str(&format!("===== {rel} ({mode:o}) =====\n{}\n", env.redact(&text)));
    }
    out
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, out);
        } else {
            out.push(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
}
