//! The gate's view of a bundle's `policy.json`.

use std::path::PathBuf;

use serde::Deserialize;

use crate::node_path;

/// The two agent CLIs the gate answers for; `policy.json`'s `harness` is its wire name.
pub use harness_contract::Harness;

/// Why a policy cannot be used. The gate blocks every call when it has no usable policy.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The policy file could not be read.
    #[error("cannot read the policy {path:?}")]
    Read {
        /// The policy file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The policy is not JSON of the expected shape.
    #[error("the policy is not valid: {0}")]
    Json(#[from] serde_json::Error),
    /// `harness` names neither `pi` nor `claude-code`.
    #[error("the policy names an unknown harness {0:?} (expected \"pi\" or \"claude-code\")")]
    UnknownHarness(String),
    /// `workspace` is not an absolute path.
    #[error("the policy's workspace {0:?} is not an absolute path")]
    RelativeWorkspace(String),
    /// `workspace` does not lead to a directory the gate can resolve.
    #[error("the policy's workspace {path:?} cannot be resolved")]
    Workspace {
        /// The workspace as given.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The workspace resolves to `/`, which would confine nothing.
    #[error("the policy's workspace {0:?} resolves to /, which would confine nothing")]
    RootWorkspace(String),
    /// The workspace's real path is not UTF-8, so paths cannot be compared with it as text.
    #[error("the policy's workspace resolves to a path that is not UTF-8: {0:?}")]
    WorkspaceNotUtf8(PathBuf),
}

#[derive(Deserialize)]
struct PolicyFile {
    harness: String,
    workspace: String,
    tools: Vec<String>,
    typed: Vec<String>,
}

/// Everything a [`Policy`] is made from.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    /// Which CLI's tool names and payloads to expect.
    pub harness: Harness,
    /// The workspace, absolute, as given (it may lead through symlinks).
    pub workspace: String,
    /// The built-in tools, named as the harness names them.
    pub tools: Vec<String>,
    /// The typed tool names (Claude Code sees them as `mcp__mosaic__NAME`).
    pub typed: Vec<String>,
    /// What `~` expands to (`$HOME`, as Node's `os.homedir()`); `None` refuses `~` paths.
    pub home: Option<String>,
}

/// What the environment the tools run in tells ripgrep and fd to read on their own (besides
/// `HOME`, which is [`PolicyConfig::home`]): the gate, started by the CLI, has the CLI's
/// environment, which the CLI passes on to the tools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolEnv {
    /// `XDG_CONFIG_HOME`, where the global git and fd ignore files are looked for; `None` when
    /// unset or empty (then `$HOME/.config`).
    pub xdg_config_home: Option<String>,
    /// `RIPGREP_CONFIG_PATH`, a file ripgrep reads arguments from; `None` when unset or empty.
    pub ripgrep_config_path: Option<String>,
}

impl ToolEnv {
    /// Reads both variables from this process's environment.
    pub fn from_process() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        Self {
            xdg_config_home: var("XDG_CONFIG_HOME"),
            ripgrep_config_path: var("RIPGREP_CONFIG_PATH"),
        }
    }
}

/// A validated policy: the workspace exists and its real path is known.
#[derive(Debug, Clone)]
pub struct Policy {
    pub(crate) harness: Harness,
    /// The workspace as given, normalised by `path.resolve`.
    pub(crate) workspace: String,
    /// The workspace's real path: the working directory both adapters run in.
    pub(crate) workspace_real: String,
    pub(crate) tools: Vec<String>,
    pub(crate) typed: Vec<String>,
    pub(crate) home: Option<String>,
    pub(crate) tool_env: ToolEnv,
}

impl Policy {
    /// Reads `policy.json` text; keys other than harness, workspace, tools and typed are ignored.
    pub fn from_json(text: &[u8], home: Option<String>) -> Result<Self, PolicyError> {
        let file: PolicyFile = serde_json::from_slice(text)?;
        let harness =
            Harness::from_name(&file.harness).ok_or(PolicyError::UnknownHarness(file.harness))?;
        Self::new(PolicyConfig {
            harness,
            workspace: file.workspace,
            tools: file.tools,
            typed: file.typed,
            home,
        })
    }

    /// Validates a policy: the workspace must be absolute and resolve to a directory.
    pub fn new(config: PolicyConfig) -> Result<Self, PolicyError> {
        let workspace = match node_path::resolve("/", &config.workspace) {
            Some(resolved) if node_path::is_absolute(&config.workspace) => resolved,
            _ => return Err(PolicyError::RelativeWorkspace(config.workspace)),
        };
        if workspace.contains('\0') {
            return Err(PolicyError::RelativeWorkspace(config.workspace));
        }
        let real = std::fs::canonicalize(&workspace)
            .and_then(|real| {
                if real.is_dir() {
                    Ok(real)
                } else {
                    Err(std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"))
                }
            })
            .map_err(|source| PolicyError::Workspace { path: workspace.clone(), source })?;
        if real == std::path::Path::new("/") {
            return Err(PolicyError::RootWorkspace(workspace));
        }
        let workspace_real = real
            .into_os_string()
            .into_string()
            .map_err(|real| PolicyError::WorkspaceNotUtf8(PathBuf::from(real)))?;
        Ok(Self {
            harness: config.harness,
            workspace,
            workspace_real,
            tools: config.tools,
            typed: config.typed,
            home: config.home.filter(|home| !home.is_empty()),
            tool_env: ToolEnv::default(),
        })
    }

    /// The policy with the tools' environment `env` (by default, neither variable is set).
    pub fn with_tool_env(mut self, env: ToolEnv) -> Self {
        self.tool_env = env;
        self
    }

    /// The harness this policy is for.
    pub fn harness(&self) -> Harness {
        self.harness
    }
}
