//! Every name two programs must agree on, in one place.
//!
//! The bundle writes files the runner, the gate, the MCP server, the adapter scripts and the Pi
//! extensions read; the runner sets variables the adapter scripts and hooks read; the gate and
//! the adapters must agree on each CLI's built-in tools. Each of those names is defined here once:
//! [`Harness`] and its wire names, the MCP server name and the typed-tool name rule
//! ([`typed_tool_name`]), the adapter environment ([`AdapterEnv`], contract 7 of
//! docs/ARCHITECTURE.md), the installed files a manifest hashes ([`AssetRole`]), the run directory
//! and bundle directory layouts ([`RunDir`], [`BundleDir`]), and the built-in tools of each CLI
//! with their path-bearing fields ([`builtins`]).
//!
//! This crate has no dependencies and does no I/O: it is names and pure functions. What a name
//! means (how a path is checked, what a file holds) belongs to the crate that acts on it.

mod builtins;
mod env;
mod harness;
mod layout;

pub use builtins::{BuiltinTool, PathField, PathKind, builtin, builtins, granted};
pub use env::{AdapterEnv, AssetRole};
pub use harness::{Harness, MCP_SERVER, TYPED_PREFIX_CLAUDE, typed_tool_name};
pub use layout::{BundleDir, RunDir, TurnFiles};
