//! The tool gate: one decision for each tool call an agent makes, shared by Pi and Claude Code.
//!
//! [`decide`] allows a call when its tool is one of the policy's built-in tools and every path it
//! may open (and every find/Glob pattern's literal prefix) resolves inside the workspace after
//! symlinks, or when it is one of the policy's typed tools; it blocks everything else. Paths go
//! through Pi 0.85.1's own normalisation, ported in [`pi`], and through the kernel's symlink
//! rules, walked with `lstat` and `readlink`.
//!
//! For a search (Pi's grep and find, Claude Code's Grep) it also lists the searched tree and
//! reads the first line of a `.git` file, a `commondir` and a git config, to check the ignore
//! files ripgrep and fd open on their own. Beyond that the gate does no I/O but `stat` and
//! `readlink`, never writes, and never looks at its own working directory. It is not the sandbox: bash, a link swapped between the check and the
//! open, and a hard link are out of its reach (docs/gate.md).

mod call;
mod decide;
mod file_url;
/// Random trees and calls against a kernel oracle; only with the `fuzzing` feature, since it
/// writes trees (`cargo xtask fuzz`, and this crate's own tests).
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod ignore_files;
mod node_path;
mod pattern;
mod pi_paths;
mod policy;
mod test_hooks;
mod walk;

pub use call::{CallError, ToolCall};
pub use decide::{Block, Decision, Rule, decide};
pub use policy::{Harness, Policy, PolicyConfig, PolicyError, ToolEnv};
pub use test_hooks::panic_for_test;

/// JavaScript's `trim` white space, which the gate copies for Claude Code 2.1.296's paths;
/// `cargo xtask verify-pi` compares it with Node's for every scalar value.
pub mod claude {
    pub use crate::decide::is_js_space;
}

/// Node's POSIX `path` functions the gate copies, for the same comparison.
pub mod node {
    pub use crate::node_path::{dirname, normalize};
}

/// Pi 0.85.1's path functions, ported; `cargo xtask verify-pi` compares them with Pi's own.
pub mod pi {
    pub use crate::pi_paths::{
        NormalizeOptions, PiPathError, nfd, normalize_path, resolve_read_path, resolve_to_cwd,
    };
}
