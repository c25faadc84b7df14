//! The two agent CLIs and how each names the typed tools.

/// The agent CLIs harness runs, each through one harness module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Harness {
    /// Pi 0.85.1: the extension's `tool_call` handler calls the gate.
    Pi,
    /// Claude Code 2.1.296: the PreToolUse hook calls the gate.
    ClaudeCode,
}

impl Harness {
    /// Every harness, in a stable order.
    pub const ALL: [Self; 2] = [Self::Pi, Self::ClaudeCode];

    /// The wire name: the route's `harness` var, `policy.json`'s and `manifest.json`'s `harness`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Pi => "pi",
            Self::ClaudeCode => "claude-code",
        }
    }

    /// The harness whose wire name is `name`, or `None`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|harness| harness.name() == name)
    }

    /// The CLI version this build is written and tested for, as its `--version` names it.
    pub fn cli_version(self) -> &'static str {
        match self {
            Self::Pi => "0.85.1",
            Self::ClaudeCode => "2.1.296",
        }
    }
}

impl std::fmt::Display for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The MCP server name in Claude Code's mcp.json; Claude Code shows its tools as
/// `mcp__mosaic__NAME`.
pub const MCP_SERVER: &str = "mosaic";

/// The prefix Claude Code gives the tools of the [`MCP_SERVER`]. Claude Code keeps a server name
/// made of `[A-Za-z0-9_-]` as it is (other characters become `_`), so the prefix is the name
/// between `mcp__` and `__`.
pub const TYPED_PREFIX_CLAUDE: &str = "mcp__mosaic__";

/// A typed tool's name as the model of `harness` sees it: Pi registers the tool under its own
/// name; Claude Code shows an MCP tool as `mcp__<server>__<tool>`.
pub fn typed_tool_name(harness: Harness, typed: &str) -> String {
    match harness {
        Harness::Pi => typed.to_owned(),
        Harness::ClaudeCode => format!("{TYPED_PREFIX_CLAUDE}{typed}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip() {
        for harness in Harness::ALL {
            assert_eq!(Harness::from_name(harness.name()), Some(harness));
        }
        assert_eq!(Harness::from_name("claude"), None);
        assert_eq!(Harness::from_name("Pi"), None);
    }

    #[test]
    fn the_claude_prefix_is_the_server_name() {
        assert_eq!(TYPED_PREFIX_CLAUDE, format!("mcp__{MCP_SERVER}__"));
        assert_eq!(typed_tool_name(Harness::ClaudeCode, "get_task"), "mcp__mosaic__get_task");
        assert_eq!(typed_tool_name(Harness::Pi, "get_task"), "get_task");
    }
}
