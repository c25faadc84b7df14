mod checker;
mod counts;
mod hook;
mod lists;
mod log;
mod note;
mod portability;

use std::path::PathBuf;

use harness_unslop::{Checker, Lists};

/// Returns the shipped default list's path.
pub(crate) fn default_lists_path() -> PathBuf {
    harness_testkit::workspace_root().join("crates/harness-unslop/assets/lists.json").into()
}

/// Returns the shipped default list, compiled.
pub(crate) fn default_checker() -> Checker {
    Checker::new(Lists::load(&default_lists_path()).unwrap()).unwrap()
}
