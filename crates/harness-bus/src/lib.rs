//! The typed tools' effects: everything that holds the capability or opens a socket.
//!
//! [`Capability`] holds the session's secret; its value is in no `Debug`, `Display`, error or log,
//! and only this crate can read it (for the broker's and the host's wire). [`UnixBroker`] is the
//! client of the broker protocol (`docs/protocol.md`) behind the [`Broker`] trait, so a different
//! wire is one module; [`SessionClient`] is the runner's own calls on it as types (claim, read,
//! state, send, release), with the replies' wire types ([`Message`], [`StateResult`]). [`HostSocket`] is the client of the host's launch and git sockets.
//! [`ToolSocket`] is the runner's tool socket: it binds `RUN/tools.sock` 0600, checks every call
//! against the bundle's tools.json with harness-tools' checks, and forwards it with the
//! capability it holds, which never reaches the client, to the [`Backends`] of its route.
//!
//! This crate starts no process and does not depend on an async runtime (the tool socket is one
//! `poll` loop, and a thread per call in flight); what the tools are, and their checks, is
//! harness-tools.

mod broker;
mod capability;
mod client;
mod host;
mod serve;
mod server;
mod wire;

pub use broker::{
    Broker, BrokerConfig, BrokerError, BrokerRefusal, BrokerReply, BrokerRequest, BrokerResult,
    RefusalCode, UnixBroker,
};
pub use capability::{Capability, CapabilityError};
pub use client::{Body, Incoming, SessionClient, StateError};
pub use host::{HostReply, HostSocket, HostSocketConfig};
pub use server::{
    Backend, BackendError, Backends, NotAvailable, RunningToolSocket, ServerError, ToolSocket,
    ToolSocketConfig,
};
pub use wire::{
    LaunchState, Message, MessageKind, MessageReadResult, OpenTask, OpenTasks, StateResult,
};
