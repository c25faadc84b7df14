//! The tool socket's wire types (docs/contracts.md, contract 5): one JSON object per line each way.
//!
//! Request: `{"tool": NAME, "args": {...}}` (`args` may be left out). Reply:
//! `{"ok": true, "text": TEXT}`, where TEXT is the compact JSON the model reads, or
//! `{"ok": false, "error": KIND, "text": TEXT}`, where TEXT is the error the model reads
//! (`refused: <code>`, the reply-cap error, …) and KIND is a [`ToolErrorKind`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The largest request line the tool socket reads, newline included; a longer one is answered
/// with `request-too-large` and the connection is closed.
///
/// It is what the largest call the catalogue bounds needs, rounded up to 4 KiB: write_record
/// with every string at its longest (100000 + 300 + 200 + 200 UTF-16 code units) and every code
/// unit written as a six-byte `\uXXXX` escape, 604283 bytes in all. change_organization's objects
/// are unbounded in the catalogue (the broker checks their inside) and share this cap. The test
/// `the_request_cap_is_the_largest_bounded_call_rounded_up_to_4_kib` derives it again.
pub const MAX_REQUEST_BYTES: usize = 592 * 1024;

/// One call on the tool socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRequest {
    /// The tool's name.
    pub tool: String,
    /// Its arguments; `null` or absent counts as `{}`.
    #[serde(default)]
    pub args: Value,
}

/// Why a call produced no reply text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ToolErrorKind {
    /// The broker (or host socket) refused: the text is `refused: <code>`.
    Refused,
    /// The reply was over the cap.
    ReplyTooLarge,
    /// The tool is not in this session's tools.json.
    UnknownTool,
    /// The arguments failed the check; nothing was sent.
    BadArguments,
    /// The request line was not a tool request.
    BadRequest,
    /// The request line was over [`MAX_REQUEST_BYTES`].
    RequestTooLarge,
    /// The tool's route is not served by this runner (launch and git, for now).
    NotAvailable,
    /// The call could not be made or answered (broker unreachable, timeout, bad reply).
    Failed,
    /// The socket had no room: every connection in a call, or every slot for a long line taken
    /// (the connection is closed).
    Busy,
}

impl ToolErrorKind {
    /// Returns the kind as it goes on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Refused => "refused",
            Self::ReplyTooLarge => "reply-too-large",
            Self::UnknownTool => "unknown-tool",
            Self::BadArguments => "bad-arguments",
            Self::BadRequest => "bad-request",
            Self::RequestTooLarge => "request-too-large",
            Self::NotAvailable => "not-available",
            Self::Failed => "failed",
            Self::Busy => "busy",
        }
    }
}

/// The answer to one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolReply {
    /// True if and only if `text` is the tool's reply rather than an error.
    pub ok: bool,
    /// The error's kind, when `ok` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolErrorKind>,
    /// What the model reads.
    pub text: String,
}

impl ToolReply {
    /// A successful reply carrying the compact JSON `text`.
    pub fn success(text: String) -> Self {
        Self { ok: true, error: None, text }
    }

    /// An error of `kind` whose text the model reads.
    pub fn failure(kind: ToolErrorKind, text: impl Into<String>) -> Self {
        Self { ok: false, error: Some(kind), text: text.into() }
    }

    /// Returns the reply as one line of JSON, newline included.
    pub fn to_line(&self) -> String {
        // Serializing a struct of a bool, an enum and a string cannot fail.
        let mut line = serde_json::to_string(self).unwrap_or_else(|_| {
            r#"{"ok":false,"error":"failed","text":"failed: the reply could not be encoded"}"#
                .to_owned()
        });
        line.push('\n');
        line
    }
}
