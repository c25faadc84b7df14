//! One tool call, as each harness hands it to the gate.

use serde::Deserialize;
use serde_json::Value;

/// A tool call: the tool's name as the harness names it, and the model's raw input.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// `read`, `Read`, `mcp__mosaic__list_tasks`, ...
    pub tool: String,
    /// The input object the model wrote; paths in it are not resolved yet.
    pub input: Value,
}

/// Why a payload is not a tool call. The gate blocks such a call.
#[derive(Debug, thiserror::Error)]
#[error("the tool call is not valid JSON of the expected shape: {0}")]
pub struct CallError(#[from] serde_json::Error);

#[derive(Deserialize)]
struct CheckPayload {
    tool: String,
    input: Value,
}

#[derive(Deserialize)]
struct ClaudeHookPayload {
    tool_name: String,
    tool_input: Value,
}

impl ToolCall {
    /// Reads `{"tool": NAME, "input": {...}}`, what Pi's extension sends to `harness-gate check`.
    pub fn from_check_json(text: &[u8]) -> Result<Self, CallError> {
        let payload: CheckPayload = serde_json::from_slice(text)?;
        Ok(Self { tool: payload.tool, input: payload.input })
    }

    /// Reads Claude Code's PreToolUse payload (`tool_name`, `tool_input`; other keys ignored).
    pub fn from_claude_hook_json(text: &[u8]) -> Result<Self, CallError> {
        let payload: ClaudeHookPayload = serde_json::from_slice(text)?;
        Ok(Self { tool: payload.tool_name, input: payload.tool_input })
    }
}
