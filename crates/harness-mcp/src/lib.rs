//! The MCP stdio server Claude Code starts for the typed tools (server name `mosaic`).
//!
//! [`serve`] reads the bundle's tools.json, lists its tools with their schemas, and forwards every
//! `tools/call` to the runner's tool socket, returning the reply text, or `isError` with the
//! error text (`refused: <code>`, the reply-cap error, …). It holds no capability and checks no
//! arguments: the tool socket does both. It is built on the official SDK, `rmcp`, with a
//! transport of its own ([`LineTransport`]) so that malformed input gets a JSON-RPC error and the
//! server keeps serving, and it answers Claude Code 2.1.296's `server/discover` probe with an
//! error at once, which sends Claude Code straight on to `initialize`.
//!
//! stdout carries only the protocol; diagnostics go to stderr. It does not start processes and
//! does not read the capability, which never leaves the runner.

#![deny(clippy::print_stdout)]

mod config;
mod handler;
mod socket_client;
mod test_hooks;
mod transport;

pub use config::{BUNDLE_ENV, ConfigError, McpConfig, SOCKET_ENV};
pub use handler::{McpError, MosaicServer, SERVER_NAME, serve, serve_on};
pub use test_hooks::panic_for_test;
pub use transport::{LineTransport, MAX_LINE_BYTES};
