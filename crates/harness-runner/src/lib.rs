//! The session runner: one process per session. It claims the role, holds the capability,
//! serves the tool socket, runs one harness turn per received message, replies, and stops
//! cleanly on SIGTERM or SIGINT (spec, "The runner"; docs/runner.md).
//!
//! It is the one component that starts processes (the adapter and git), all through one
//! supervisor (`supervise.rs`: its own process group, capped pipes, a deadline, a stop flag, a
//! confinement hook), and a child subreaper that kills whatever a turn left behind. The capability is read from stdin and kept in memory only: it never reaches a
//! file, the environment, argv or a log.

mod capped;
mod config;
mod confinement;
mod creds;
mod dirs;
mod doctor_check;
mod egress;
mod env;
mod error;
mod files;
mod git;
mod git_repo;
mod git_safety;
mod lock;
mod machine;
mod preflight;
mod request;
mod session;
mod supervise;
mod test_hooks;
mod turn;
mod version;

pub use config::{Manifest, Run, RunFile, load_run, read_capability, read_run_file};
pub use confinement::turn_grants;
pub use creds::{FOUNDER_ENV, ROLE_TOKEN_PREFIX, role_token_var};
pub use doctor_check::DoctorCheck;
pub use env::Environment;
pub use error::{Refusal, RunError};
pub use git::MAX_BUNDLE_BYTES;
pub use lock::LOCK_FILE;
pub use machine::LANDING_SENDER;
pub use session::{RunnerConfig, Stopped, harden_process, install_stop_handlers, run};
pub use supervise::{become_subreaper, sweep_descendants};
pub use test_hooks::panic_for_test;
pub use version::{VERSION_TIMEOUT, VersionError, program_version};
