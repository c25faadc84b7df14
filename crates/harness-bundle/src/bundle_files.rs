//! The shapes of the bundle's policy.json and manifest.json: the build fills these and writes
//! them, so their JSON Schemas (docs/schemas/) are generated from what is written.

use camino::Utf8PathBuf;
use serde::Serialize;
use std::collections::BTreeMap;

use crate::request::CredentialStatus;

/// policy.json: what the gate enforces for the session.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "policy.json")]
pub struct Policy {
    /// The harness module.
    pub harness: String,
    /// The workspace the file tools are confined to, absolute and in normal form.
    #[schemars(with = "std::path::PathBuf")]
    pub workspace: Utf8PathBuf,
    /// The built-in tools the session gets, as the harness names them.
    pub tools: Vec<String>,
    /// The typed tools the session gets, by their catalogue names.
    pub typed: Vec<String>,
    /// The network mode (recorded, not enforced).
    pub network: String,
    /// The services the role needs.
    pub services: Vec<String>,
    /// The credential status of those services.
    pub credentials: Vec<CredentialStatus>,
}

/// manifest.json: what the bundle is, what it was built from, and the digest of every file and
/// installed asset it runs with. Its own sha256 is the bundle's digest.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "manifest.json")]
pub struct Manifest {
    /// The bundle format's version (1).
    pub bundle_version: u32,
    /// The instance's id.
    pub instance: String,
    /// The run the bundle was built for.
    pub run: String,
    /// The sha256 of the resolved instance's compact JSON.
    pub resolved_digest: String,
    /// The harness module.
    pub harness: String,
    /// The provider.
    pub provider: String,
    /// The provider's model id.
    pub model: String,
    /// The `launch.models` key the route's model var named.
    pub model_key: String,
    /// The thinking level.
    pub thinking: String,
    /// The route taken (`primary` or `fallback`).
    pub route: String,
    /// Why that route was taken.
    pub route_reason: String,
    /// The harness module's version.
    pub harness_version: String,
    /// What `CLI --version` prints for the CLI the session runs; the runner refuses another.
    pub cli_version: String,
    /// The built-in tools, as the harness names them.
    pub builtin_tools: Vec<String>,
    /// The typed tools, by their catalogue names.
    pub typed_tools: Vec<String>,
    /// The tool names the adapter passes to the CLI.
    pub cli_tools: Vec<String>,
    /// True if and only if a turn counts only with the turn marker.
    pub turn_marker: bool,
    /// The projects the session has a clone of.
    pub projects: Vec<String>,
    /// The actions the instance holds that no typed tool it gets spends.
    pub untyped_actions: Vec<String>,
    /// How this harness keeps each line the spec's gate relies on.
    pub relies_on: Vec<ReliesOn>,
    /// The gate's timeout, in seconds.
    pub gate_timeout_seconds: u32,
    /// The adapter script.
    #[schemars(with = "std::path::PathBuf")]
    pub adapter: Utf8PathBuf,
    /// The sha256 of every file of the bundle but the manifest, by path in the bundle.
    pub files: BTreeMap<String, String>,
    /// The installed assets, by role.
    pub assets: BTreeMap<String, ManifestAsset>,
}

/// One line of the spec's "What S6 relies on", as the harness keeps it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReliesOn {
    /// The line's number, 1 to 5.
    pub line: u8,
    /// What the line is about.
    pub topic: String,
    /// How this harness keeps it.
    pub how: String,
}

/// One installed asset: where it is and its sha256.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManifestAsset {
    /// Where it is installed.
    #[schemars(with = "std::path::PathBuf")]
    pub path: Utf8PathBuf,
    /// The lowercase hex sha256 of its bytes.
    pub sha256: String,
}
