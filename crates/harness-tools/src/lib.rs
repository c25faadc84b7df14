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
//! [`UnixBroker`] is the client of the broker protocol (DESIGN.md contract 4, `docs/protocol.md`)
//! behind the [`Broker`] trait, and [`ToolSocket`] is the runner's tool socket (contract 5): it
//! binds `RUN/tools.sock` 0600, checks every call against the bundle's tools.json, and forwards
//! it with the [`Capability`] it holds, which never reaches the client.
//!
//! This crate does not start processes, does not talk MCP (that is harness-mcp), and does not yet
//! serve the launch and git routes: those tools answer `refused: not-available` until the runner
//! implements them (`docs/protocol.md`, "What is not done").

mod args;
mod broker;
mod capability;
mod catalogue;
mod host;
mod reply;
mod resolved;
mod server;
mod tools_file;
mod wire;

pub use args::{ArgError, prepare_args};
pub use broker::{Broker, BrokerConfig, BrokerError, RefusalCode, UnixBroker};
pub use capability::{Capability, CapabilityError};
pub use catalogue::{
    CATALOGUE, GitOp, Grant, Kind, ORGANIZATION_KEYS, Param, Route, THREAD_DEFINITION, ToolDef,
    Verb, tool,
};
pub use host::{HostReply, HostSocket, HostSocketConfig};
pub use reply::{REPLY_CAP, ReplyTooLarge, reply_len, reply_text};
pub use resolved::{
    Actions, CrossRole, FORMAT as RESOLVED_FORMAT, Launch, LaunchModel, Limits, Project,
    ResolvedError, ResolvedInstance, tools_for,
};
pub use server::{
    Backend, BackendError, Backends, NotAvailable, RunningToolSocket, ServerError, ToolSocket,
    ToolSocketConfig,
};
pub use tools_file::{ToolEntry, ToolsFile, ToolsFileError};
pub use wire::{MAX_REQUEST_BYTES, ToolErrorKind, ToolReply, ToolRequest};
