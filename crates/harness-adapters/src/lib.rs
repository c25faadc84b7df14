//! The harness modules: everything that differs between Pi 0.85.1 and Claude Code 2.1.296.
//!
//! The bundle core (harness-bundle) calls a [`HarnessModule`] for the harness's own files, tool
//! names, S0 lines, adapter script and assets, and never names a harness itself (spec row 65).
//! [`module`] finds the module a route names. [`InstallLayout`] says where the binaries and assets
//! the bundle points at are installed (`cargo xtask dist --prefix DIR`).
//!
//! This crate writes nothing and starts nothing: it returns bytes and paths.

mod claude_code;
mod layout;
mod pi;

pub use claude_code::MCP_SERVER;

use camino::{Utf8Path, Utf8PathBuf};

pub use claude_code::ClaudeCode;
pub use layout::{INSTALL_BINARIES, InstallLayout, SCHEMA_FILES, SchemaFiles};
pub use pi::Pi;

/// What a module needs to know to write its files.
#[derive(Debug, Clone, Copy)]
pub struct ModuleContext<'a> {
    /// Where the bundle will be once written (its files point at each other by this path).
    pub bundle_dir: &'a Utf8Path,
    /// The session's workspace, absolute.
    pub workspace: &'a Utf8Path,
    /// Where the binaries and assets are installed.
    pub layout: &'a InstallLayout,
    /// The typed tool names the session gets.
    pub typed: &'a [String],
    /// The built-in tools the session gets, named as this harness names them.
    pub builtin: &'a [String],
}

/// One line of the spec's "What S6 relies on", as this harness keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct S0Line {
    /// The line's number, 1 to 5.
    pub line: u8,
    /// What the line is about (`block a tool`, `gate crash`, ...).
    pub topic: &'static str,
    /// How this harness keeps it.
    pub how: &'static str,
}

/// The five topics of the S0 lines, in order.
pub const S0_TOPICS: [&str; 5] =
    ["block a tool", "gate crash", "gate missing", "gate hang", "bash"];

impl S0Line {
    /// The five lines, numbered in order with [`S0_TOPICS`], from how a harness keeps each.
    pub fn five(how: [&'static str; 5]) -> [S0Line; 5] {
        let mut line = 0;
        how.map(|how| {
            line += 1;
            S0Line { line, topic: S0_TOPICS[usize::from(line - 1)], how }
        })
    }
}

/// One installed file whose sha256 the manifest records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asset {
    /// The manifest's name for it (`gate`, `extension`, `mcpServer`, `unslopHook`, ...).
    pub role: &'static str,
    /// Where it is installed.
    pub path: Utf8PathBuf,
}

/// One harness: the bundle core's only view of Pi or Claude Code.
pub trait HarnessModule: Sync + std::fmt::Debug {
    /// The name routes and policies use (`harness` var, `policy.json`'s `harness`).
    fn name(&self) -> &'static str;
    /// The spec's `version()`: the harness and the CLI version it is built and tested for.
    fn version(&self) -> &'static str;
    /// What `CLI --version` prints (trimmed) for the CLI version this module is built and tested
    /// for: the default a bundle request records as `cliVersion`, which the runner compares with
    /// the CLI it is given before the first turn.
    fn cli_version(&self) -> &'static str;
    /// The npm package the CLI is installed from; its `package.json` names the CLI's version.
    fn cli_package(&self) -> &'static str;
    /// What `CLI --version` prints (trimmed) for the package `version` in its `package.json`:
    /// how the runner tells the CLI's version from its install without starting it.
    fn printed_version(&self, package_version: &str) -> String;
    /// The built-in tools, named as this harness names them, given the role's `limits.tools`.
    fn builtin_tools(&self, limits: &[String]) -> Vec<String>;
    /// A typed tool's name as the model sees it in this harness.
    fn typed_tool_name(&self, typed: &str) -> String;
    /// The names the adapter passes as the CLI's tool list (`--tools`), given the built-in and
    /// typed tools as this harness names them.
    fn cli_tools(&self, builtin: &[String], typed: &[String]) -> Vec<String>;
    /// Returns true if and only if a turn counts only when the harness wrote the turn marker
    /// (S0 line 4 for a harness whose gate hang the runner's wall clock must catch).
    fn turn_marker(&self) -> bool;
    /// The harness's own bundle files (name in the bundle, bytes), for example settings.json.
    /// A serialization error is returned, never an empty file.
    fn files(
        &self,
        cx: &ModuleContext<'_>,
    ) -> Result<Vec<(&'static str, Vec<u8>)>, serde_json::Error>;
    /// How this harness keeps the five S0 lines.
    fn relies_on(&self) -> [S0Line; 5];
    /// The installed files the manifest hashes: the gate, the extension or MCP server, the
    /// unslop check's hook or extension and lists.
    fn assets(&self, layout: &InstallLayout) -> Vec<Asset>;
    /// The adapter script the runner runs as `/bin/sh ADAPTER`.
    fn adapter(&self, layout: &InstallLayout) -> Utf8PathBuf;
}

static MODULES: [&dyn HarnessModule; 2] = [&Pi, &ClaudeCode];

/// The module named `name`, or `None` for a harness this build does not know.
pub fn module(name: &str) -> Option<&'static dyn HarnessModule> {
    MODULES.iter().copied().find(|module| module.name() == name)
}

/// Every module this build knows.
pub fn modules() -> &'static [&'static dyn HarnessModule] {
    &MODULES
}

/// The seconds the gate may take before it is killed (`timeout -k 2 10`); Claude Code's hook
/// timeout is 20 s above it, so the wrapper, not the hook timeout, decides.
pub const GATE_TIMEOUT_SECS: u32 = 10;

/// Quotes `path` for `/bin/sh`.
pub(crate) fn shell_quote(path: &Utf8Path) -> String {
    format!("'{}'", path.as_str().replace('\'', r"'\''"))
}
