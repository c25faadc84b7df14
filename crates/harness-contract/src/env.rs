//! The adapter environment (contract 7): the `MOSAIC_*` variables the runner sets for a turn and
//! the adapter scripts, the Pi extensions, the MCP server and the hooks read.

/// One variable of the adapter's environment. The runner builds the environment from nothing
/// (`env_clear`), so these, `PATH` and run.json's `passEnv` are all a turn sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AdapterEnv {
    /// The agent CLI (run.json's `cli`).
    Cli,
    /// The bundle directory.
    Bundle,
    /// The run directory.
    Run,
    /// The workspace; the adapter runs there.
    Workspace,
    /// `RUN/session`: the CLI's home, config and sessions.
    SessionDir,
    /// The session's id (a UUID; Claude Code needs one).
    SessionId,
    /// The turn's number, from 1 (1 creates the CLI's session, later turns resume it).
    Turn,
    /// The route's provider.
    Provider,
    /// The route's model id.
    Model,
    /// The route's thinking level.
    Thinking,
    /// The manifest's `cliTools`, comma-separated (empty: no built-in tools).
    Tools,
    /// The file holding the turn's request text.
    Request,
    /// The runner's tool socket.
    ToolsSock,
    /// Where Pi's extension writes the turn marker at `agent_end`.
    TurnMarker,
    /// The unslop log; set last so nothing can move it.
    UnslopLog,
    /// Set to `1` for the runner's launch preflight: the adapter runs the CLI's `--version`
    /// inside the turn's sandbox instead of a turn.
    Preflight,
    /// An installed asset the manifest names, by its role.
    Asset(AssetRole),
}

impl AdapterEnv {
    /// Every variable, assets included.
    pub const ALL: [Self; 23] = [
        Self::Cli,
        Self::Bundle,
        Self::Run,
        Self::Workspace,
        Self::SessionDir,
        Self::SessionId,
        Self::Turn,
        Self::Provider,
        Self::Model,
        Self::Thinking,
        Self::Tools,
        Self::Request,
        Self::ToolsSock,
        Self::TurnMarker,
        Self::UnslopLog,
        Self::Preflight,
        Self::Asset(AssetRole::Gate),
        Self::Asset(AssetRole::Extension),
        Self::Asset(AssetRole::UnslopExtension),
        Self::Asset(AssetRole::UnslopBin),
        Self::Asset(AssetRole::UnslopLists),
        Self::Asset(AssetRole::McpServer),
        Self::Asset(AssetRole::UnslopHook),
    ];

    /// The variable's name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Cli => "MOSAIC_CLI",
            Self::Bundle => "MOSAIC_BUNDLE",
            Self::Run => "MOSAIC_RUN",
            Self::Workspace => "MOSAIC_WORKSPACE",
            Self::SessionDir => "MOSAIC_SESSION_DIR",
            Self::SessionId => "MOSAIC_SESSION_ID",
            Self::Turn => "MOSAIC_TURN",
            Self::Provider => "MOSAIC_PROVIDER",
            Self::Model => "MOSAIC_MODEL",
            Self::Thinking => "MOSAIC_THINKING",
            Self::Tools => "MOSAIC_TOOLS",
            Self::Request => "MOSAIC_REQUEST",
            Self::ToolsSock => "MOSAIC_TOOLS_SOCK",
            Self::TurnMarker => "MOSAIC_TURN_MARKER",
            Self::UnslopLog => "MOSAIC_UNSLOP_LOG",
            Self::Preflight => "MOSAIC_PREFLIGHT",
            Self::Asset(role) => role.env_name(),
        }
    }

    /// The variable named `name`, or `None` for a name that is not part of the contract.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|var| var.name() == name)
    }
}

/// An installed file the bundle's manifest records with its sha256 (`assets` in manifest.json),
/// and which the runner passes to the adapter as a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AssetRole {
    /// `harness-gate`.
    Gate,
    /// Pi's extension: the gate on every tool call, the typed tools, the turn marker.
    Extension,
    /// Pi's second extension: the unslop check.
    UnslopExtension,
    /// `harness-unslop`, as Pi's unslop extension calls it.
    UnslopBin,
    /// The unslop check's lists.json.
    UnslopLists,
    /// `harness-mcp`, the MCP server Claude Code starts.
    McpServer,
    /// `harness-unslop`, as Claude Code's Stop and UserPromptSubmit hooks run it.
    UnslopHook,
}

impl AssetRole {
    /// Every role.
    pub const ALL: [Self; 7] = [
        Self::Gate,
        Self::Extension,
        Self::UnslopExtension,
        Self::UnslopBin,
        Self::UnslopLists,
        Self::McpServer,
        Self::UnslopHook,
    ];

    /// The role's key in manifest.json's `assets`.
    pub const fn key(self) -> &'static str {
        match self {
            Self::Gate => "gate",
            Self::Extension => "extension",
            Self::UnslopExtension => "unslopExtension",
            Self::UnslopBin => "unslopBin",
            Self::UnslopLists => "unslopLists",
            Self::McpServer => "mcpServer",
            Self::UnslopHook => "unslopHook",
        }
    }

    /// The role whose manifest key is `key`, or `None`.
    pub fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|role| role.key() == key)
    }

    /// The adapter variable that carries the asset's path.
    pub const fn env_name(self) -> &'static str {
        match self {
            Self::Gate => "MOSAIC_GATE",
            Self::Extension => "MOSAIC_EXTENSION",
            Self::UnslopExtension => "MOSAIC_UNSLOP_EXTENSION",
            Self::UnslopBin => "MOSAIC_UNSLOP_BIN",
            Self::UnslopLists => "MOSAIC_UNSLOP_LISTS",
            Self::McpServer => "MOSAIC_MCP_SERVER",
            Self::UnslopHook => "MOSAIC_UNSLOP_HOOK",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut names: Vec<&str> = AdapterEnv::ALL.iter().map(|var| var.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), AdapterEnv::ALL.len());
        for var in AdapterEnv::ALL {
            assert_eq!(AdapterEnv::from_name(var.name()), Some(var));
            assert!(var.name().starts_with("MOSAIC_"), "{}", var.name());
        }
        for role in AssetRole::ALL {
            assert_eq!(AssetRole::from_key(role.key()), Some(role));
            assert!(AdapterEnv::ALL.contains(&AdapterEnv::Asset(role)));
        }
    }

    /// The asset variable is the manifest key in upper snake case, so a reader of manifest.json
    /// can tell which variable carries which asset.
    #[test]
    fn asset_variables_follow_their_keys() {
        for role in AssetRole::ALL {
            let mut snake = String::from("MOSAIC_");
            for c in role.key().chars() {
                if c.is_ascii_uppercase() {
                    snake.push('_');
                }
                snake.push(c.to_ascii_uppercase());
            }
            assert_eq!(role.env_name(), snake);
        }
    }
}
