//! Kernel confinement of a session: a Landlock domain around every turn and every git the runner
//! runs for it (docs/runner.md, "Confinement").
//!
//! [`SessionPaths`] names what a session may reach (its workspace, its session directory, the
//! bundle, the programs it runs); [`SessionPaths::policy`] turns it into a [`Policy`]: the system
//! directories a CLI needs read and executable, the session's own directories writable, every
//! other path denied, reads included, and, where the kernel's Landlock ABI allows, abstract Unix
//! sockets and signals scoped to the domain and TCP connect limited to named ports.
//! [`prepare`] builds the ruleset in the parent, every rule added, and returns a [`Domain`]: a
//! ready ruleset descriptor and a [`Report`] of what was and was not applied. [`Domain::attach`]
//! makes a [`std::process::Command`] enter it in the child between fork and exec with two system
//! calls and no allocation (`prctl(PR_SET_NO_NEW_PRIVS)`, `landlock_restrict_self`), which is
//! what a multithreaded parent may do there.
//!
//! It does not spawn anything itself, does not choose the paths (the runner does), and does not
//! confine the network beyond TCP connect ports nor pathname Unix sockets (no ABI this crate runs
//! on restricts connecting to them before ABI 9).

#![deny(unsafe_code)]

mod domain;
mod error;
mod policy;
mod sys;

pub use domain::{Domain, Handoff, Report, prepare};
pub use error::ConfineError;
pub use policy::{Grant, Mode, Network, PathRule, Policy, SessionPaths, installation_root};
pub use sys::{Support, kernel_abi, namespace_support};
