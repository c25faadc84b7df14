//! The typed tools: the only way a role session acts on the host's message bus.
//!
//! [`CATALOGUE`] is one table with a row per tool the spec names: its name, the description the
//! model reads, its input as [`Param`]s (from which both the JSON Schema the model sees and the
//! argument check are derived), the action that grants it, and where it goes ([`Route`]: a broker
//! [`Verb`], the host's launch socket, or its git socket). [`tools_for`] picks the rows a
//! [`ResolvedInstance`] gets and [`ToolsFile`] is the bundle's `tools.json`. [`prepare_args`]
//! checks a call's arguments and fills the defaults before anything is sent, and [`reply_text`]
//! turns a result into the compact JSON the model reads, or refuses it over [`REPLY_CAP`].
//!
//! [`ToolRequest`] and [`ToolReply`] are the tool socket's wire (`docs/protocol.md`).
//!
//! This crate is pure data and checks: it opens no socket, holds no capability, starts no
//! process and does not talk MCP. The effects (the capability, the broker and host-socket
//! clients, the tool-socket server) are harness-bus; the MCP server is harness-mcp.

mod args;
mod catalogue;
pub mod json;
mod reply;
mod resolved;
mod tools_file;
mod wire;

pub use args::{ArgError, prepare_args};
pub use catalogue::{
    CATALOGUE, GitOp, Grant, Kind, ORGANIZATION_KEYS, Param, Route, THREAD_DEFINITION, ToolDef,
    Verb, shape_result, tool,
};
pub use reply::{REPLY_CAP, ReplyTooLarge, reply_len, reply_text};
pub use resolved::{
    Actions, CrossRole, FORMAT as RESOLVED_FORMAT, Launch, LaunchModel, Limits, Project,
    ResolvedError, ResolvedInstance, tools_for,
};
pub use tools_file::{ToolEntry, ToolsFile, ToolsFileError};
pub use wire::{MAX_REQUEST_BYTES, ToolErrorKind, ToolReply, ToolRequest};
