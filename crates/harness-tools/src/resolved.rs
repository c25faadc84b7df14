//! A resolved role instance, as the host resolves it before a launch, and the typed tools it gets.
//!
//! The fixture format (`fixtures/resolved/*.json`) is documented in `docs/resolved-instance.md`.
//! This crate reads only what picks the tools (actions, tracker, clones, definition, landHeld);
//! the rest is there for the bundle, which builds from the same files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::catalogue::{CATALOGUE, Grant};
use crate::tools_file::{ToolEntry, ToolsFile};

/// The value of `format` this version reads.
pub const FORMAT: &str = "harness.resolved/1";

/// One resolved role instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResolvedInstance {
    /// Always `harness.resolved/1`.
    pub format: String,
    /// The business the instance belongs to.
    pub business: String,
    /// The instance's id.
    pub instance: String,
    /// The role it fills.
    pub role: String,
    /// The role definition it was resolved from (`pm`, `chief-of-staff`, `assistant`, …).
    pub definition: String,
    /// Its name, if it has one.
    #[serde(default)]
    pub name: Option<String>,
    /// Its vars: `harness`, `model`, `thinking`, and for a fallback route `fallback.harness`,
    /// `fallback.model`, `fallback.thinking`, plus any others the role uses.
    pub vars: BTreeMap<String, String>,
    /// Its limits.
    pub limits: Limits,
    /// The actions it holds.
    pub actions: Actions,
    /// The tracker it uses, if any ("tracker holders" get list_tasks and get_task).
    #[serde(default)]
    pub tracker: Option<String>,
    /// The projects it works on.
    #[serde(default)]
    pub projects: Vec<Project>,
    /// The skills its role file lists.
    #[serde(default)]
    pub skills: Vec<String>,
    /// The services it needs (each needs a usable role token).
    #[serde(default)]
    pub services: Vec<String>,
    /// Its launch block.
    pub launch: Launch,
    /// What the broker's landHeld said at build time: true if and only if the role holds an
    /// approved merge decision it could land.
    #[serde(default)]
    pub land_held: bool,
}

/// An instance's limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// The built-in tools, as Pi names them (`read`, `grep`, `find`, `ls`, `write`, `edit`,
    /// `bash`).
    pub tools: Vec<String>,
}

/// The actions an instance holds.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Actions {
    /// Actions held over its own role.
    #[serde(default)]
    pub within_role: Vec<String>,
    /// Actions held over other roles.
    #[serde(default)]
    pub cross_role: Vec<CrossRole>,
}

/// An action held over other roles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrossRole {
    /// The action.
    pub action: String,
    /// The roles it is held over.
    pub roles: Vec<String>,
}

/// A project an instance works on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Project {
    /// The project's name.
    pub name: String,
    /// True if and only if the session gets a clone of it in its workspace.
    #[serde(default)]
    pub clone: bool,
}

/// An instance's launch block.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// The launch models: a `model` var names a key, the entry gives provider and model.
    #[serde(default)]
    pub models: BTreeMap<String, LaunchModel>,
    /// The instances this one may launch (its launch tool's offer).
    #[serde(default)]
    pub instances: Vec<String>,
}

/// One launch model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LaunchModel {
    /// The provider.
    pub provider: String,
    /// The provider's model id.
    pub model: String,
}

/// Why a resolved instance could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ResolvedError {
    /// It could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// It is not a resolved instance.
    #[error("{path} is not a resolved instance: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
    /// Its `format` is not one this version reads.
    #[error("{path} has format {found:?}; this version reads {FORMAT:?}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What it said.
        found: String,
    },
}

impl ResolvedInstance {
    /// Reads `path` and checks its format.
    pub fn load(path: &Path) -> Result<Self, ResolvedError> {
        let text = std::fs::read(path)
            .map_err(|source| ResolvedError::Read { path: path.to_owned(), source })?;
        let resolved: Self = serde_json::from_slice(&text)
            .map_err(|source| ResolvedError::Parse { path: path.to_owned(), source })?;
        if resolved.format != FORMAT {
            return Err(ResolvedError::Format { path: path.to_owned(), found: resolved.format });
        }
        Ok(resolved)
    }

    /// Returns true if and only if the instance holds `action`, within-role or cross-role.
    pub fn holds(&self, action: &str) -> bool {
        self.actions.within_role.iter().any(|held| held == action)
            || self.actions.cross_role.iter().any(|held| held.action == action)
    }

    /// Returns the projects the session gets a clone of.
    pub fn clones(&self) -> Vec<&str> {
        self.projects.iter().filter(|p| p.clone).map(|p| p.name.as_str()).collect()
    }

    /// Returns true if and only if the instance gets the tool with this grant.
    pub fn granted(&self, grant: Grant) -> bool {
        match grant {
            Grant::Everyone => true,
            Grant::Tracker => self.tracker.is_some(),
            Grant::Action(action) => self.holds(action),
            Grant::ActionWithClone(action) => self.holds(action) && !self.clones().is_empty(),
            Grant::ActionForDefinition { action, definition } => {
                self.holds(action) && self.definition == definition
            }
            Grant::LandHeld => self.land_held,
        }
    }
}

/// Returns the tools.json of `resolved`: the catalogue rows it is granted, in catalogue order,
/// and its clones.
pub fn tools_for(resolved: &ResolvedInstance) -> ToolsFile {
    ToolsFile {
        tools: CATALOGUE
            .iter()
            .filter(|def| resolved.granted(def.grant))
            .map(ToolEntry::from_def)
            .collect(),
        projects: resolved.clones().into_iter().map(str::to_owned).collect(),
    }
}
