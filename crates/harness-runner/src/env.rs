//! The runner's one source of environment: read once, as bytes, when the binary starts
//! ([`Environment::of_process`]); everything after reads this copy, never `std::env`.

use std::ffi::{OsStr, OsString};

/// The runner's environment, as the binary started with it, bytes and all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment(Vec<(OsString, OsString)>);

impl Environment {
    /// Reads the process's environment (`vars_os`: a value that is not UTF-8 is kept as is).
    pub fn of_process() -> Self {
        Self(std::env::vars_os().collect())
    }

    /// An environment of exactly these variables.
    pub fn from_pairs<K: Into<OsString>, V: Into<OsString>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self(pairs.into_iter().map(|(key, value)| (key.into(), value.into())).collect())
    }

    /// The value of `name`, if it is set (the last one, if it is set twice).
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.0.iter().rev().find(|(key, _)| key == name).map(|(_, value)| value.as_os_str())
    }

    /// True if and only if `name` is set to something other than the empty string.
    pub fn is_set(&self, name: &str) -> bool {
        self.0.iter().any(|(key, value)| key == name && !value.is_empty())
    }

    /// `PATH` for a child: the runner's own, or a plain default.
    pub(crate) fn path(&self) -> OsString {
        self.get("PATH").map_or_else(|| "/usr/local/bin:/usr/bin:/bin".into(), OsStr::to_owned)
    }
}
