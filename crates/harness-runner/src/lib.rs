//! The session runner: one process per session. It claims the role, holds the capability,
//! serves the tool socket, runs one harness turn per received message, replies, and stops
//! cleanly on SIGTERM or SIGINT (spec, "The runner"; docs/runner.md).
//!
//! It is the one component that starts processes (the adapter, in its own process group, under
//! the wall clock). The capability is read from stdin and kept in memory only: it never reaches a
//! file, the environment, argv or a log.

mod config;
mod confinement;
mod creds;
mod error;
mod git;
mod git_safety;
mod lock;
mod request;
mod session;
mod turn;

pub use config::{Manifest, Run, RunFile, load_run, read_capability};
pub use creds::{FOUNDER_ENV, ROLE_TOKEN_PREFIX, role_token_var};
pub use error::RunError;
pub use git::MAX_BUNDLE_BYTES;
pub use lock::LOCK_FILE;
pub use request::{Message, MessageKind};
pub use session::{LANDING_SENDER, RunnerConfig, Stopped, environment, install_stop_handlers, run};
