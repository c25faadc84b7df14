//! A per-test sandbox for running a real CLI against a [`ScriptedModel`]: its own home, its own
//! config directories, its own working directory, and a command with an explicit environment.
//!
//! The environment is built from nothing (`env_clear`), so a developer's `ANTHROPIC_API_KEY`,
//! `~/.claude` or `~/.pi` can never leak into a test, and nothing a CLI writes lands in the real
//! home: docs/clis.md verified that with `HOME`, `CLAUDE_CONFIG_DIR` and `PI_CODING_AGENT_DIR` all inside
//! the scratch directory, the real `~` stays untouched.

use std::fs::{DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::clis::{Cli, CliPaths, tools_bin_dir};
use crate::process::new_command;
use crate::server::ScriptedModel;

/// The provider name Pi's `models.json` gives the scripted model.
pub const PI_PROVIDER: &str = "scripted";
/// The model id Pi's `models.json` gives the scripted model.
pub const PI_MODEL: &str = "scripted-model";
/// Pi's `--model` argument for the scripted model.
pub const PI_MODEL_ARG: &str = "scripted/scripted-model";

/// A temporary directory laid out for one CLI run; removed when dropped.
#[derive(Debug)]
pub struct CliSandbox {
    root: TempDir,
    base_url: String,
}

impl CliSandbox {
    /// Creates the sandbox for CLIs talking to `model`:
    /// `home/`, `claude-config/` (`CLAUDE_CONFIG_DIR`), `pi-agent/` (`PI_CODING_AGENT_DIR`, with a
    /// `models.json` naming provider `scripted`, model `scripted-model` at the model's base URL, and
    /// a `settings.json` turning retries off), `tmp/` (`TMPDIR`) and `work/`, the working directory.
    pub fn new(model: &ScriptedModel) -> io::Result<Self> {
        let root = tempfile::Builder::new().prefix("harness-cli-").tempdir()?;
        let sandbox = Self { root, base_url: model.base_url().to_owned() };
        for dir in [
            sandbox.home(),
            sandbox.claude_config_dir(),
            sandbox.pi_agent_dir(),
            sandbox.tmp_dir(),
            sandbox.work_dir(),
        ] {
            DirBuilder::new().mode(0o700).create(&dir)?;
        }
        let models = json!({"providers": {PI_PROVIDER: {
            "baseUrl": sandbox.base_url,
            "api": "anthropic-messages",
            "apiKey": "scripted-fake-key",
            "models": [{"id": PI_MODEL, "reasoning": false, "contextWindow": 200000, "maxTokens": 4096}],
        }}});
        write_json(&sandbox.pi_agent_dir().join("models.json"), &models)?;
        // Without this, an unscripted answer costs about 17 s of Pi's retries before it gives up.
        write_json(
            &sandbox.pi_agent_dir().join("settings.json"),
            &json!({"retry": {"enabled": false}}),
        )?;
        Ok(sandbox)
    }

    /// Returns the sandbox's root directory.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Returns the CLI's `HOME`.
    pub fn home(&self) -> PathBuf {
        self.root().join("home")
    }

    /// Returns Claude Code's `CLAUDE_CONFIG_DIR`.
    pub fn claude_config_dir(&self) -> PathBuf {
        self.root().join("claude-config")
    }

    /// Returns Pi's `PI_CODING_AGENT_DIR`.
    pub fn pi_agent_dir(&self) -> PathBuf {
        self.root().join("pi-agent")
    }

    /// Returns the CLI's `TMPDIR`, so its temporary files go away with the sandbox.
    pub fn tmp_dir(&self) -> PathBuf {
        self.root().join("tmp")
    }

    /// Returns the working directory the CLI runs in (its workspace).
    pub fn work_dir(&self) -> PathBuf {
        self.root().join("work")
    }

    /// Returns a command that runs `cli` inside the sandbox: an environment built from nothing,
    /// `PATH` = `.tools/bin` then the system directories, the sandbox's home, config dirs and
    /// `TMPDIR`, the CLI's variables for the scripted model, the work directory as current dir,
    /// and stdin null. The caller adds the arguments.
    pub fn command(&self, cli: &CliPaths) -> Command {
        let mut command = new_command(cli.program());
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", tools_bin_dir().display());
        command
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.home())
            .env("TMPDIR", self.tmp_dir())
            .current_dir(self.work_dir())
            .stdin(Stdio::null());
        match cli.cli() {
            Cli::Claude => {
                command
                    .env("CLAUDE_CONFIG_DIR", self.claude_config_dir())
                    .env("ANTHROPIC_BASE_URL", &self.base_url)
                    .env("ANTHROPIC_API_KEY", "sk-ant-fake")
                    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                    .env("DISABLE_TELEMETRY", "1")
                    .env("DISABLE_AUTOUPDATER", "1")
                    .env("DISABLE_ERROR_REPORTING", "1")
                    .env("CLAUDE_CODE_MAX_RETRIES", "0");
            }
            Cli::Pi => {
                command.env("PI_CODING_AGENT_DIR", self.pi_agent_dir()).env("PI_OFFLINE", "1");
            }
        }
        command
    }
}

/// Writes `value` as JSON to a new file, created with its final mode 0600.
fn write_json(path: &Path, value: &Value) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(serde_json::to_string_pretty(value)?.as_bytes())?;
    file.write_all(b"\n")
}
