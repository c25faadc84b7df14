//! What `build_bundle` takes: everything the spec's `buildBundle` takes, as one struct.

use camino::Utf8PathBuf;
use harness_adapters::{HarnessModule, InstallLayout};
use harness_tools::{LaunchModel, ResolvedInstance};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::routes::Route;

/// Who and what this session is, beyond the resolved instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SessionInfo {
    /// The run's id.
    pub run: String,
    /// Who launched it (a human, the chief of staff, a schedule).
    pub launched_by: String,
    /// The workspace, absolute, as the launcher gives it.
    #[schemars(with = "std::path::PathBuf")]
    pub workspace: Utf8PathBuf,
}

/// The status of one service credential, as the host read it from the broker: metadata only,
/// never a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CredentialStatus {
    /// The service (`gitea`, `vikunja`, ...).
    pub service: String,
    /// `usable`, `missing`, `expired`, ... as the broker says.
    pub status: String,
}

/// The business's arbiter for each decision domain (`technical`, `delivery`), which a routed
/// `raise_decision` goes to.
pub type Arbiters = BTreeMap<String, String>;

/// Everything one bundle is built from.
#[derive(Debug, Clone)]
pub struct BundleRequest<'a> {
    /// Where the bundle goes; it must not exist yet.
    pub dir: Utf8PathBuf,
    /// The resolved role instance.
    pub resolved: &'a ResolvedInstance,
    /// The role contract (markdown), the start of prompt.md.
    pub contract: String,
    /// The business's arbiters by domain.
    pub arbiter: Arbiters,
    /// The tracker the session works in, if any, as the prompt names it.
    pub tracker: Option<String>,
    /// The credential status of the services the role needs.
    pub credentials: Vec<CredentialStatus>,
    /// The run, who launched it, the workspace.
    pub session: SessionInfo,
    /// The route's harness module.
    pub harness: &'a dyn HarnessModule,
    /// The route taken.
    pub route: Route,
    /// Why that route was taken.
    pub route_reason: String,
    /// The harness module's `version()` as the launcher read it.
    pub harness_version: String,
    /// What `CLI --version` prints (trimmed) for the CLI the session is to run: the manifest
    /// records it as `cliVersion`, and the runner refuses a CLI that prints anything else. A host
    /// passes the module's `cli_version()` (the version the gate is proven for) unless it has
    /// proven another.
    pub cli_version: String,
    /// `launch.models`: a `model` var names a key.
    pub models: BTreeMap<String, LaunchModel>,
    /// Whether the role gets land_work. `None` takes the resolved instance's `landHeld` (what
    /// the broker said); a value that disagrees with it is refused (`land-mismatch`).
    pub land: Option<bool>,
    /// `<dataRoot>/skills-enabled`.
    pub skills_dir: Utf8PathBuf,
    /// Where the binaries and assets the bundle points at are installed.
    pub install: InstallLayout,
    /// The policy's network field (recorded, not enforced: spec, Limits).
    pub network: String,
}
