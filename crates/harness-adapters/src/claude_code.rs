//! Claude Code 2.1.296.

use camino::{Utf8Path, Utf8PathBuf};

use harness_contract::Harness;
use serde_json::json;

use crate::{
    Asset, GATE_TIMEOUT_SECS, HarnessModule, InstallLayout, ModuleContext, S0Line, shell_quote,
};

/// The MCP server name; Claude Code shows its tools as `mcp__mosaic__NAME`.
pub use harness_contract::MCP_SERVER;

/// Claude Code's hook timeout, above the gate's own `timeout -k 2 10`.
const HOOK_TIMEOUT_SECS: u32 = 20;

/// The Claude Code module: settings.json with the gate as a wrapped PreToolUse hook and the two
/// unslop hooks, and mcp.json with the `mosaic` server.
#[derive(Debug, Clone, Copy)]
pub struct ClaudeCode;

impl ClaudeCode {
    fn settings(cx: &ModuleContext<'_>) -> serde_json::Value {
        let policy = cx.bundle_dir.join("policy.json");
        let gate = format!(
            "timeout -k 2 {GATE_TIMEOUT_SECS} {} claude-hook --policy {} || exit 2",
            shell_quote(&cx.layout.gate),
            shell_quote(&policy)
        );
        let unslop = shell_quote(&cx.layout.unslop);
        let lists = shell_quote(&cx.layout.unslop_lists);
        let stop = format!("{unslop} claude-stop --lists {lists}; exit 0");
        let prompt = format!("{unslop} claude-prompt --lists {lists}; exit 0");
        json!({
            "hooks": {
                "PreToolUse": [{"matcher": "*", "hooks": [
                    {"type": "command", "command": gate, "timeout": HOOK_TIMEOUT_SECS}
                ]}],
                "Stop": [{"hooks": [{"type": "command", "command": stop}]}],
                "UserPromptSubmit": [{"hooks": [{"type": "command", "command": prompt}]}],
            },
            "permissions": {"allow": Self::allow(cx), "deny": Self::deny(cx)},
        })
    }

    /// Exactly the built-ins the role has, and the typed tools: under `--permission-mode
    /// dontAsk` a tool missing here is denied everywhere, inside the workspace too.
    fn allow(cx: &ModuleContext<'_>) -> Vec<String> {
        let mut allow: Vec<String> = cx.builtin.to_vec();
        allow.push(format!("mcp__{MCP_SERVER}"));
        allow
    }

    /// Claude Code's own deny rules for the directories outside the workspace that the bundle
    /// knows: the bundle itself and each directory of the install layout. Edit and Write check a
    /// deny rule before they look at the disk, which happens before the PreToolUse hook runs
    /// (docs/gate.md, Limits), so these keep what those checks tell the model about the bundle
    /// and the install from reaching it. The gate stays the path check: these are a second layer.
    fn deny(cx: &ModuleContext<'_>) -> Vec<String> {
        let layout = cx.layout;
        let mut dirs: Vec<&Utf8Path> = vec![cx.bundle_dir];
        for file in [
            &layout.gate,
            &layout.mcp,
            &layout.unslop,
            &layout.pi_extension,
            &layout.pi_unslop_extension,
            &layout.unslop_lists,
        ] {
            dirs.extend(file.parent());
        }
        dirs.push(&layout.adapters);
        let mut rules = Vec::new();
        for dir in dirs {
            // A rule is for a directory beside the workspace: one that holds the workspace, or
            // lies inside it, would deny the session its own files.
            if cx.workspace.starts_with(dir) || dir.starts_with(cx.workspace) {
                continue;
            }
            // `//` starts an absolute path in a rule. A path with a character the rule syntax
            // or its gitignore-style matching gives a meaning to gets no rule rather than a
            // rule that may match something else (docs/bundle.md).
            if !is_rule_safe(dir.as_str()) {
                continue;
            }
            let text = dir.as_str().trim_end_matches('/');
            for tool in ["Read", "Edit"] {
                let rule = format!("{tool}(/{text}/**)");
                if !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
        }
        rules
    }

    fn mcp(cx: &ModuleContext<'_>) -> serde_json::Value {
        let tools = cx.bundle_dir.join("tools.json");
        json!({"mcpServers": {MCP_SERVER: {
            "type": "stdio",
            "command": cx.layout.mcp,
            "args": ["--tools", tools],
        }}})
    }
}

/// Returns true if and only if `path` is absolute and made only of characters a permission rule
/// takes literally.
fn is_rule_safe(path: &str) -> bool {
    path.starts_with('/')
        && path.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'/' | b'.' | b'_' | b'-' | b'+' | b'@' | b'%' | b',' | b'=' | b':')
        })
}

/// Serializes `value` with a trailing newline. Claude Code silently ignores an invalid settings
/// file and then runs no hook at all, so these files are never written by hand, and a
/// serialization error fails the build instead of writing an empty file.
fn to_bytes(value: &serde_json::Value) -> Result<Vec<u8>, serde_json::Error> {
    let mut bytes = serde_json::to_vec_pretty(value)?;
    bytes.push(b'\n');
    Ok(bytes)
}

impl HarnessModule for ClaudeCode {
    fn name(&self) -> &'static str {
        Harness::ClaudeCode.name()
    }

    fn version(&self) -> &'static str {
        "claude-code 2.1.296"
    }

    fn cli_version(&self) -> &'static str {
        "2.1.296 (Claude Code)"
    }

    fn cli_package(&self) -> &'static str {
        "@anthropic-ai/claude-code"
    }

    fn printed_version(&self, package_version: &str) -> String {
        format!("{package_version} (Claude Code)")
    }

    fn builtin_tools(&self, limits: &[String]) -> Vec<String> {
        // harness-contract's table, the one the gate checks paths from: Read, Write, Edit, Grep
        // and Glob for the limits read, write, edit, grep and find; bash grants nothing, since
        // the adapter runs Claude Code with --restricted, which removes Bash.
        harness_contract::granted(Harness::ClaudeCode, limits)
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    fn typed_tool_name(&self, typed: &str) -> String {
        harness_contract::typed_tool_name(Harness::ClaudeCode, typed)
    }

    fn cli_tools(&self, builtin: &[String], _typed: &[String]) -> Vec<String> {
        // --tools names built-ins only; the MCP server's tools come on top (docs/clis.md).
        builtin.to_vec()
    }

    fn turn_marker(&self) -> bool {
        false
    }

    fn files(
        &self,
        cx: &ModuleContext<'_>,
    ) -> Result<Vec<(&'static str, Vec<u8>)>, serde_json::Error> {
        Ok(vec![
            ("settings.json", to_bytes(&Self::settings(cx))?),
            ("mcp.json", to_bytes(&Self::mcp(cx))?),
        ])
    }

    fn relies_on(&self) -> [S0Line; 5] {
        S0Line::five([
            "PreToolUse command hook exits 2; --bare is never passed",
            "the hook runs as <gate> || exit 2",
            "the wrapper blocks",
            "timeout -k 2 10 <gate> || exit 2, hook timeout 20",
            "limited only by the tool limit",
        ])
    }

    fn assets(&self, layout: &InstallLayout) -> Vec<Asset> {
        vec![
            Asset { role: "gate", path: layout.gate.clone() },
            Asset { role: "mcpServer", path: layout.mcp.clone() },
            Asset { role: "unslopHook", path: layout.unslop.clone() },
            Asset { role: "unslopLists", path: layout.unslop_lists.clone() },
        ]
    }

    fn adapter(&self, layout: &InstallLayout) -> Utf8PathBuf {
        layout.adapters.join("claude-code.sh")
    }
}
