//! The run directory and bundle directory layouts: where each file two programs share lives.

use std::path::{Path, PathBuf};

/// A run directory, `RUN/`: the host writes run.json and the bundle; the runner owns the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir(PathBuf);

impl RunDir {
    /// The run directory at `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self(dir.into())
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `run.json`, written by the host.
    pub const RUN_JSON: &'static str = "run.json";
    /// `runner.lock`: one runner per run directory.
    pub const LOCK: &'static str = "runner.lock";
    /// `tools.sock`: the runner's tool socket.
    pub const TOOLS_SOCK: &'static str = "tools.sock";
    /// `unslop.jsonl`: the unslop hooks' log.
    pub const UNSLOP_LOG: &'static str = "unslop.jsonl";
    /// `turns/`: one request, stderr and (if undelivered) RESULT per turn.
    pub const TURNS: &'static str = "turns";
    /// `session/`: the CLI's home, config and sessions.
    pub const SESSION: &'static str = "session";
    /// `tmp/`: the runner's own temporary files.
    pub const TMP: &'static str = "tmp";
    /// `state/`: the runner state's default directory (run.json `stateDir`).
    pub const STATE: &'static str = "state";
    /// `session/id`: the session id.
    pub const SESSION_ID: &'static str = "id";
    /// `session/tmp/`: the CLI's `TMPDIR`.
    pub const SESSION_TMP: &'static str = "tmp";

    /// `RUN/run.json`, written by the host.
    pub fn run_json(&self) -> PathBuf {
        self.0.join(Self::RUN_JSON)
    }

    /// The bundle's default place, `RUN/bundle` (run.json's `bundle` may name another).
    pub fn default_bundle(&self) -> PathBuf {
        self.0.join(Self::DEFAULT_BUNDLE)
    }

    /// run.json's default `bundle`, relative to the run directory.
    pub const DEFAULT_BUNDLE: &'static str = "bundle";

    /// `RUN/runner.lock`: one runner per run directory.
    pub fn lock(&self) -> PathBuf {
        self.0.join(Self::LOCK)
    }

    /// `RUN/tools.sock`: the runner's tool socket.
    pub fn tools_sock(&self) -> PathBuf {
        self.0.join(Self::TOOLS_SOCK)
    }

    /// `RUN/unslop.jsonl`: the unslop hooks' log.
    pub fn unslop_log(&self) -> PathBuf {
        self.0.join(Self::UNSLOP_LOG)
    }

    /// `RUN/turns`: one request, stderr and (if undelivered) RESULT per turn.
    pub fn turns(&self) -> PathBuf {
        self.0.join(Self::TURNS)
    }

    /// The files of turn `number`.
    pub fn turn(&self, number: u32) -> TurnFiles {
        TurnFiles { turns: self.turns(), session: self.session(), number }
    }

    /// `RUN/session`: the CLI's home, config and sessions.
    pub fn session(&self) -> PathBuf {
        self.0.join(Self::SESSION)
    }

    /// `RUN/session/id`: the session id, kept so a restarted runner continues the conversation.
    pub fn session_id(&self) -> PathBuf {
        self.session().join(Self::SESSION_ID)
    }

    /// `RUN/tmp`: the runner's own temporary files (git bundles while a git tool runs).
    pub fn tmp(&self) -> PathBuf {
        self.0.join(Self::TMP)
    }

    /// `RUN/session/tmp`: the CLI's `TMPDIR`.
    pub fn session_tmp(&self) -> PathBuf {
        self.session().join(Self::SESSION_TMP)
    }

    /// `RUN/state`: the runner state's default directory.
    pub fn default_state(&self) -> PathBuf {
        self.0.join(Self::STATE)
    }
}

/// The files of one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnFiles {
    turns: PathBuf,
    session: PathBuf,
    number: u32,
}

impl TurnFiles {
    /// The turn's number, from 1.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// `NNNN.request`, in `turns/`.
    pub fn request_name(&self) -> String {
        format!("{:04}.{}", self.number, Self::REQUEST)
    }

    /// `NNNN.stderr`, in `turns/`.
    pub fn stderr_name(&self) -> String {
        format!("{:04}.{}", self.number, Self::STDERR)
    }

    /// `NNNN.unsent`, in `turns/`.
    pub fn unsent_name(&self) -> String {
        format!("{:04}.unsent", self.number)
    }

    /// `turn-NNNN.marker`, in `session/`.
    pub fn marker_name(&self) -> String {
        format!("turn-{:04}.marker", self.number)
    }

    /// The suffix of a turn's request file.
    pub const REQUEST: &'static str = "request";
    /// The suffix of a turn's stderr file.
    pub const STDERR: &'static str = "stderr";

    /// The number of a turn file's name in `turns/` (`0012.stderr` is 12), if it is one.
    pub fn number_of(name: &str) -> Option<u32> {
        let (stem, suffix) = name.split_once('.')?;
        let known = suffix == Self::REQUEST || suffix == Self::STDERR;
        (known && !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()))
            .then(|| stem.parse().ok())
            .flatten()
    }

    /// `RUN/turns/NNNN.request`: the request the turn got.
    pub fn request(&self) -> PathBuf {
        self.turns.join(self.request_name())
    }

    /// `RUN/turns/NNNN.stderr`: the adapter's stderr.
    pub fn stderr(&self) -> PathBuf {
        self.turns.join(self.stderr_name())
    }

    /// `RUN/turns/NNNN.unsent`: a RESULT the broker did not take.
    pub fn unsent(&self) -> PathBuf {
        self.turns.join(self.unsent_name())
    }

    /// `RUN/session/turn-NNNN.marker`: Pi's extension writes it at `agent_end`.
    pub fn marker(&self) -> PathBuf {
        self.session.join(self.marker_name())
    }
}

/// A bundle directory: what `harness bundle build` writes and the session runs from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleDir(PathBuf);

impl BundleDir {
    /// The bundle at `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self(dir.into())
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The file `name` of the bundle (one of the `*_JSON` / `PROMPT` names).
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// `prompt.md`: the role contract, the session section, the skills.
    pub const PROMPT: &'static str = "prompt.md";
    /// `policy.json`: what the gate reads on every call.
    pub const POLICY: &'static str = "policy.json";
    /// `tools.json`: the typed tools.
    pub const TOOLS: &'static str = "tools.json";
    /// `manifest.json`: what the bundle is and the sha256 of everything it runs from.
    pub const MANIFEST: &'static str = "manifest.json";
    /// `settings.json` (Claude Code): the hooks and permissions.
    pub const SETTINGS: &'static str = "settings.json";
    /// `mcp.json` (Claude Code): the MCP server.
    pub const MCP: &'static str = "mcp.json";
    /// `skills/`: the bundle's copy of each listed skill.
    pub const SKILLS: &'static str = "skills";

    /// `prompt.md`.
    pub fn prompt(&self) -> PathBuf {
        self.file(Self::PROMPT)
    }

    /// `policy.json`.
    pub fn policy(&self) -> PathBuf {
        self.file(Self::POLICY)
    }

    /// `tools.json`.
    pub fn tools(&self) -> PathBuf {
        self.file(Self::TOOLS)
    }

    /// `manifest.json`.
    pub fn manifest(&self) -> PathBuf {
        self.file(Self::MANIFEST)
    }

    /// `settings.json`.
    pub fn settings(&self) -> PathBuf {
        self.file(Self::SETTINGS)
    }

    /// `mcp.json`.
    pub fn mcp(&self) -> PathBuf {
        self.file(Self::MCP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_files_are_numbered_with_four_digits() {
        let run = RunDir::new("/r");
        let turn = run.turn(7);
        assert_eq!(turn.request(), Path::new("/r/turns/0007.request"));
        assert_eq!(turn.stderr(), Path::new("/r/turns/0007.stderr"));
        assert_eq!(turn.unsent(), Path::new("/r/turns/0007.unsent"));
        assert_eq!(turn.marker(), Path::new("/r/session/turn-0007.marker"));
        assert_eq!(run.turn(12345).request(), Path::new("/r/turns/12345.request"));
        assert_eq!(TurnFiles::number_of("0012.stderr"), Some(12));
        assert_eq!(TurnFiles::number_of("0012.request"), Some(12));
        for other in ["0012.unsent", "x.stderr", ".stderr", "12", "+1.stderr"] {
            assert_eq!(TurnFiles::number_of(other), None, "{other}");
        }
    }
}
