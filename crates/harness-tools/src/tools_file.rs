//! The bundle's `tools.json`: the typed tools one session was given, as the model sees them.
//!
//! ```json
//! {"tools": [{"name": "list_tasks", "description": "…", "inputSchema": {…}}, …],
//!  "projects": ["web"]}
//! ```
//!
//! `projects` names the clones the session has (push_working and fetch_review need one). The
//! tool socket and the MCP server both read this file; every name in it must be a catalogue row.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalogue::{ToolDef, tool};

/// One tool of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolEntry {
    /// The tool's name.
    pub name: String,
    /// The description the model reads.
    pub description: String,
    /// The JSON Schema of its input.
    pub input_schema: Value,
}

impl ToolEntry {
    /// Returns the entry for a catalogue row.
    pub fn from_def(def: &ToolDef) -> Self {
        Self {
            name: def.name.to_owned(),
            description: def.description.to_owned(),
            input_schema: def.input_schema(),
        }
    }
}

/// The contents of tools.json.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolsFile {
    /// The session's typed tools, in catalogue order.
    pub tools: Vec<ToolEntry>,
    /// The projects the session has a clone of.
    #[serde(default)]
    pub projects: Vec<String>,
}

/// Why tools.json could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ToolsFileError {
    /// It could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// It is not a tools.json.
    #[error("{path} is not a valid tools.json: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
    /// It names a tool the catalogue does not have.
    #[error("{path} names `{name}`, which is not a typed tool")]
    NotInCatalogue {
        /// The file.
        path: PathBuf,
        /// The name.
        name: String,
    },
    /// It names a tool twice.
    #[error("{path} names `{name}` twice")]
    Duplicate {
        /// The file.
        path: PathBuf,
        /// The name.
        name: String,
    },
}

impl ToolsFile {
    /// Reads and checks `path`: valid JSON of this shape, every name a catalogue row, no name
    /// twice.
    pub fn load(path: &Path) -> Result<Self, ToolsFileError> {
        let text = std::fs::read(path)
            .map_err(|source| ToolsFileError::Read { path: path.to_owned(), source })?;
        let file: Self = serde_json::from_slice(&text)
            .map_err(|source| ToolsFileError::Parse { path: path.to_owned(), source })?;
        file.check(path)?;
        Ok(file)
    }

    fn check(&self, path: &Path) -> Result<(), ToolsFileError> {
        for (index, entry) in self.tools.iter().enumerate() {
            if tool(&entry.name).is_none() {
                let name = entry.name.clone();
                return Err(ToolsFileError::NotInCatalogue { path: path.to_owned(), name });
            }
            if self.tools[..index].iter().any(|earlier| earlier.name == entry.name) {
                let name = entry.name.clone();
                return Err(ToolsFileError::Duplicate { path: path.to_owned(), name });
            }
        }
        Ok(())
    }

    /// Returns the catalogue row of `name` if this session has that tool.
    pub fn get(&self, name: &str) -> Option<&'static ToolDef> {
        self.tools.iter().find(|entry| entry.name == name).and_then(|entry| tool(&entry.name))
    }

    /// Returns the session's tool names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|entry| entry.name.as_str()).collect()
    }

    /// Returns the file as pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}
