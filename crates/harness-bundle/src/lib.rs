//! The launch bundle: the directory a session runs from, built once per launch by the host.
//!
//! [`build_bundle`] takes everything the spec's `buildBundle` takes and writes
//! prompt.md, skills/, policy.json, tools.json, manifest.json and the harness module's own files,
//! into a temporary sibling that is renamed into place: a bundle appears whole or not at all and
//! is never overwritten. It returns the bundle's digest, the sha256 of manifest.json, which seals
//! every file the session runs from. [`verify_bundle`] checks a bundle against its manifest and
//! digest; [`SealedBundle`] is the runner's view: verified at start, checked again before each
//! turn. This crate never follows a symlink and never names a harness itself.
//!
//! A host written in Rust depends on this crate alone: it re-exports what a [`BundleRequest`]
//! is made of, the resolved instance ([`ResolvedInstance`], its [`LaunchModel`]s), the harness
//! modules ([`module`], [`modules`], [`HarnessModule`], [`Harness`]) and where their binaries and
//! assets are installed ([`InstallLayout`]). A build returns a [`Built`], whose `digest` (a
//! lowercase hex sha256, a `String`) goes into run.json's `bundleDigest`. docs/host.md shows the
//! rest of a launch; `cargo run -p harness-bundle --example host` runs one.
//!
//! # Example
//!
//! Builds the bundle of the repository's `pm` role, on the primary route its resolved instance
//! names, into a temporary directory. The install here is a stand-in of small files (a build
//! hashes every binary and asset it points at, so they must exist); a real host uses the prefix
//! `cargo xtask dist --prefix P` installed into.
//!
//! ```
//! use harness_bundle::{
//!     BundleRequest, InstallLayout, ResolvedInstance, Route, SessionInfo, Utf8Path, build_bundle,
//!     module, modules, utf8_path, verify_bundle,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let fixtures = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
//! let temporary = tempfile::tempdir()?;
//! // The bundle's paths are text: a path from the system becomes UTF-8, or `path-not-utf8`.
//! let root = utf8_path("the temporary directory", temporary.path().to_path_buf())?;
//!
//! // The install the bundle points at; every file of the layout must exist.
//! let install = InstallLayout::under(&root.join("prefix"));
//! for (file, _mode) in install.files() {
//!     if let Some(parent) = file.parent() {
//!         std::fs::create_dir_all(parent)?;
//!     }
//!     std::fs::write(&file, format!("stand-in for {file}\n"))?;
//! }
//! let workspace = root.join("workspace");
//! std::fs::create_dir(&workspace)?;
//! // The run directory; the bundle is made inside it and must not exist yet.
//! let run = root.join("run");
//! std::fs::create_dir(&run)?;
//!
//! // The resolved instance, and the harness module its `harness` var names.
//! let text = std::fs::read_to_string(fixtures.join("resolved/pm.json"))?;
//! let resolved: ResolvedInstance = serde_json::from_str(&text)?;
//! let name = resolved.vars.get("harness").ok_or("no harness var")?;
//! let harness = module(name).ok_or("no such harness module")?;
//! assert!(modules().iter().any(|known| known.name() == harness.name()));
//!
//! let built = build_bundle(&BundleRequest {
//!     dir: run.join("bundle"),
//!     resolved: &resolved,
//!     contract: std::fs::read_to_string(fixtures.join("bundle/contracts/pm.md"))?,
//!     arbiter: Default::default(),
//!     tracker: resolved.tracker.clone(),
//!     credentials: Vec::new(),
//!     session: SessionInfo {
//!         run: "run-1".to_owned(),
//!         launched_by: "the doc example".to_owned(),
//!         workspace: workspace.clone(),
//!     },
//!     harness,
//!     route: Route::Primary,
//!     route_reason: "the primary route is healthy".to_owned(),
//!     harness_version: harness.version().to_owned(),
//!     cli_version: harness.cli_version().to_owned(),
//!     models: resolved.launch.models.clone(),
//!     land: None,
//!     skills_dir: fixtures.join("bundle/skills-enabled"),
//!     install,
//!     network: "host".to_owned(),
//! })?;
//!
//! assert_eq!(built.digest.len(), 64);
//! assert!(built.dir.join("manifest.json").is_file());
//! // The bundle checks out against its own digest, as the runner checks it at start.
//! let verification = verify_bundle(&built.dir, Some(&built.digest))?;
//! assert!(verification.mismatches.is_empty());
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod build;
mod bundle_files;
mod error;
mod prompt;
mod request;
mod request_file;
mod routes;
mod skills;
mod staging;
mod verify;

pub use build::{BUNDLE_VERSION, Built, PROMPT_BYTES, build_bundle, check_install};
pub use bundle_files::{Manifest, ManifestAsset, Policy, ReliesOn};
pub use error::{BundleError, RefusalReason, utf8_path};
pub use request::{Arbiters, BundleRequest, CredentialStatus, SessionInfo};
pub use request_file::{LoadedRequest, RequestFile, load_request};
pub use routes::{Route, SessionModel, has_fallback, session_model};
pub use skills::SKILL_BYTES;
pub use staging::hex_sha256;
pub use verify::{INSTALL_HINT, Mismatch, SealedBundle, Verification, verify_bundle};

// What a host needs to fill in a `BundleRequest`, re-exported so that a host depends on this
// crate alone: the resolved instance and its launch models, the harness modules and where their
// binaries and assets are installed, and the harness names.
pub use camino::{Utf8Path, Utf8PathBuf};
pub use harness_adapters::{HarnessModule, InstallLayout, module, modules};
pub use harness_contract::Harness;
pub use harness_tools::{
    Actions, CrossRole, Launch, LaunchModel, Limits, Project, RESOLVED_FORMAT, ResolvedError,
    ResolvedInstance,
};
