//! Scripted peers for tests and the demo: a scripted Messages API the real CLIs can talk to, and
//! sandboxes that run those CLIs with nothing of the developer's machine in their environment.
//!
//! [`ScriptedModel`] serves `POST /v1/messages` on 127.0.0.1 from a [`Script`] of [`Reply`]s,
//! streaming Server-Sent Events exactly as docs/clis.md records, and logs every request as a
//! [`RecordedRequest`] so a test can assert what the model saw. [`require_cli`] finds Claude Code
//! and Pi under `.tools/bin` and refuses to skip silently; [`CliSandbox`] gives one CLI run its own
//! home, config directories and working directory; [`run_with_deadline`] runs it in its own process
//! group and kills the group when the deadline passes.
//!
//! [`ScriptedBroker`] speaks the broker protocol (docs/contracts.md, contract 4) on a Unix socket from a
//! per-verb script, refusals included, and records every call.
//!
//! [`run_canary`] is the gate's oracle made of the real CLIs: thousands of generated hostile tool
//! calls through the bundle's adapter, judged by what reaches the model and what changes outside
//! the workspace, and replayed with an allow-all gate to show the oracle sees escapes.
//!
//! It deliberately does not model the real API beyond what the two CLIs need (no token counting, no
//! non-streaming replies, no thinking blocks), does not install anything (that is
//! `cargo xtask setup`), and is never linked into a shipped binary (`publish = false`).

mod bins;
mod broker;
mod canary;
mod clis;
mod fixture;
mod gate_scenario;
mod host;
mod process;
mod recorded;
mod sandbox;
mod script;
mod server;
mod session_scenario;
mod transcript;

pub use bins::{assert_help_and_version, workspace_binary};
pub use broker::{BrokerAnswer, BrokerCall, ScriptedBroker};
pub use canary::{
    CONTENT_TOKEN, CanaryCall, CanaryConfig, CanaryReport, Escape, Family, FamilyCounts, GateKind,
    INSIDE_TOKEN, NAME_TOKEN, run_canary, without_restricted,
};
pub use clis::{
    Cli, CliPaths, REQUIRE_CLIS_ENV, require_cli, require_node, tools_bin_dir, utf8, workspace_root,
};
pub use fixture::{RoleFixture, SCRIPTED_PROVIDER};
pub use gate_scenario::{
    FINAL_TEXT, GateScenario, INSIDE_TEXT, OutsideRead, SECRET_TEXT, ScenarioStep, run_unprivileged,
};
pub use host::{FakeHost, HostCall, git};
pub use process::{CliOutput, kill_marked, marked_processes, run_with_deadline};
pub use recorded::{Outcome, RecordedRequest, ToolResult};
pub use sandbox::{CliSandbox, PI_MODEL, PI_MODEL_ARG, PI_PROVIDER};
pub use script::{Block, Reply, Script};
pub use server::ScriptedModel;
pub use session_scenario::{
    Endpoint, SESSION_CAP, SESSION_SECRET, SESSION_SLOP, ScriptedTurn, SessionOptions,
    SessionScenario,
};
