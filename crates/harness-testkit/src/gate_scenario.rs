//! The gate scenario that the gate's real-CLI tests and `cargo xtask demo` share: a real CLI,
//! with the gate wired in as the harness wires it, is scripted to read a secret outside its
//! workspace, then a file inside, then answer.
//!
//! Claude Code gets a PreToolUse hook (matcher `*`) running
//! `timeout -k 2 10 GATE claude-hook --policy POLICY || exit 2` with hook timeout 20, and a
//! SessionStart canary that proves the settings file was read (Claude Code silently ignores an
//! invalid one and then runs no hook at all). It runs without `--restricted`, so the gate is the
//! only thing between the model and the secret. Pi gets the bundle's own extension
//! (`crates/harness-adapters/assets/pi/extension.mjs`) by `-e`, which calls
//! `GATE check --policy BUNDLE/policy.json` for every tool call; the scenario's bundle directory
//! holds just the policy and an empty tools.json.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::clis::{Cli, CliPaths, workspace_root};
use crate::process::{CliOutput, run_with_deadline};
use crate::recorded::ToolResult;
use crate::sandbox::{CliSandbox, PI_MODEL_ARG};
use crate::script::{Reply, Script};
use crate::server::ScriptedModel;

/// What the secret outside the workspace holds; it must never reach the model.
pub const SECRET_TEXT: &str = "the founder's secret, never for the model";
/// What the file inside the workspace holds.
pub const INSIDE_TEXT: &str = "inside the workspace, fine to read";
/// The model's last reply.
pub const FINAL_TEXT: &str = "One read was blocked, one went through.";

const SYSTEM_PROMPT: &str = "You are the gate scenario's agent.";
const PROMPT: &str = "Read the two files";

/// One scripted session with the gate in place.
#[derive(Debug)]
pub struct GateScenario {
    cli: Cli,
    model: ScriptedModel,
    sandbox: CliSandbox,
    gate: PathBuf,
    policy: PathBuf,
    secret: PathBuf,
    inside: PathBuf,
    canary: PathBuf,
    /// The scripted tool calls: id, tool, input.
    calls: Vec<(String, String, serde_json::Value)>,
}

/// How the scripted outside read reaches the secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutsideRead {
    /// By the secret's own path (absolute for Claude Code, `../secret.txt` for Pi).
    Direct,
    /// Through `link.txt`, a symlink inside the workspace pointing at the secret: the path as
    /// written is inside, so only a check after symlinks catches it.
    ThroughSymlink,
}

/// One tool call of the scenario as the model saw it: what it asked for and what came back.
#[derive(Debug, Clone)]
pub struct ScenarioStep {
    /// The tool name the model used.
    pub tool: String,
    /// The tool's input as the model wrote it.
    pub input: serde_json::Value,
    /// The result the CLI sent back in the next request.
    pub result: Option<ToolResult>,
}

impl GateScenario {
    /// Lays out the workspace, the secret beside it, the policy and the script, for `cli` with
    /// the gate binary `gate`.
    pub fn new(cli: Cli, gate: &Path) -> io::Result<Self> {
        Self::with_outside_read(cli, gate, OutsideRead::Direct)
    }

    /// As [`GateScenario::new`], with the outside read made as `outside` says.
    pub fn with_outside_read(cli: Cli, gate: &Path, outside: OutsideRead) -> io::Result<Self> {
        let model = ScriptedModel::start(Script::default())?;
        let sandbox = CliSandbox::new(&model)?;
        let work = sandbox.work_dir().canonicalize()?;
        let secret = sandbox.root().join("secret.txt");
        std::fs::write(&secret, SECRET_TEXT)?;
        let inside = work.join("notes.txt");
        std::fs::write(&inside, INSIDE_TEXT)?;
        let (harness, tool) = match cli {
            Cli::Claude => ("claude-code", "Read"),
            Cli::Pi => ("pi", "read"),
        };
        let bundle = sandbox.root().join("bundle");
        std::fs::create_dir_all(&bundle)?;
        std::fs::write(bundle.join("tools.json"), r#"{"tools": []}"#)?;
        let policy = bundle.join("policy.json");
        let text = json!({"harness": harness, "workspace": work, "tools": [tool], "typed": []});
        std::fs::write(&policy, text.to_string())?;
        let link = work.join("link.txt");
        std::os::unix::fs::symlink(&secret, &link)?;
        let (outside_arg, inside_arg) = match (cli, outside) {
            (Cli::Claude, OutsideRead::Direct) => {
                (json!({"file_path": secret}), json!({"file_path": inside}))
            }
            (Cli::Claude, OutsideRead::ThroughSymlink) => {
                (json!({"file_path": link}), json!({"file_path": inside}))
            }
            (Cli::Pi, OutsideRead::Direct) => {
                (json!({"path": "../secret.txt"}), json!({"path": "notes.txt"}))
            }
            (Cli::Pi, OutsideRead::ThroughSymlink) => {
                (json!({"path": "link.txt"}), json!({"path": "notes.txt"}))
            }
        };
        let calls = vec![
            ("toolu_outside".to_owned(), tool.to_owned(), outside_arg),
            ("toolu_inside".to_owned(), tool.to_owned(), inside_arg),
        ];
        let mut replies: Vec<Reply> = calls
            .iter()
            .map(|(id, tool, input)| Reply::tool_use(id.clone(), tool.clone(), input.clone()))
            .collect();
        replies.push(Reply::text(FINAL_TEXT));
        model.push_replies(replies);
        let canary = sandbox.root().join("session-start.canary");
        let gate = gate.to_path_buf();
        let scenario = Self { cli, model, sandbox, gate, policy, secret, inside, canary, calls };
        if cli == Cli::Claude {
            scenario.write_claude_settings()?;
        }
        Ok(scenario)
    }

    fn settings_path(&self) -> PathBuf {
        self.sandbox.root().join("settings.json")
    }

    /// Writes settings.json with a serializer: an invalid file would silently disable every hook.
    fn write_claude_settings(&self) -> io::Result<()> {
        let hook = format!(
            "timeout -k 2 10 {} claude-hook --policy {} || exit 2",
            shell_quote(&self.gate),
            shell_quote(&self.policy)
        );
        let settings = json!({"hooks": {
            "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": hook, "timeout": 20}]}],
            "SessionStart": [{"hooks": [{"type": "command",
                "command": format!("echo ran > {}", shell_quote(&self.canary))}]}],
        }});
        let text = serde_json::to_string_pretty(&settings).map_err(io::Error::other)?;
        std::fs::write(self.settings_path(), text)
    }

    /// The command that runs the scenario's CLI.
    pub fn command(&self, paths: &CliPaths) -> Command {
        let mut command = self.sandbox.command(paths);
        match self.cli {
            Cli::Claude => {
                command.args(["-p", PROMPT, "--output-format", "json", "--disable-slash-commands"]);
                command.args(["--tools", "Read", "--permission-mode", "dontAsk"]);
                command.arg("--settings").arg(self.settings_path());
                command.args(["--no-session-persistence", "--system-prompt", SYSTEM_PROMPT]);
            }
            Cli::Pi => {
                let extension =
                    workspace_root().join("crates/harness-adapters/assets/pi/extension.mjs");
                let root = self.sandbox.root();
                command
                    .env("MOSAIC_GATE", &self.gate)
                    .env("MOSAIC_BUNDLE", root.join("bundle"))
                    .env("MOSAIC_TOOLS_SOCK", root.join("tools.sock"))
                    .env("MOSAIC_TURN_MARKER", root.join("turn.marker"));
                command.args(["-p", "--model", PI_MODEL_ARG, "--thinking", "off", "--no-skills"]);
                command.args(["--no-extensions", "--no-context-files", "--no-prompt-templates"]);
                command.args(["--no-themes", "-e"]).arg(extension);
                command.args(["--tools", "read", "--no-session", "--system-prompt", SYSTEM_PROMPT]);
                command.arg(PROMPT);
            }
        }
        command
    }

    /// Runs the CLI under `deadline`.
    pub fn run(&self, paths: &CliPaths, deadline: Duration) -> io::Result<CliOutput> {
        run_with_deadline(self.command(paths), deadline)
    }

    /// The scripted model, with every request the CLI made.
    pub fn model(&self) -> &ScriptedModel {
        &self.model
    }

    /// The workspace (the CLI's working directory), real path.
    pub fn workspace(&self) -> PathBuf {
        self.inside.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// The secret outside the workspace.
    pub fn secret(&self) -> &Path {
        &self.secret
    }

    /// Returns true if and only if Claude Code's SessionStart canary hook ran.
    pub fn canary_ran(&self) -> bool {
        self.canary.is_file()
    }

    /// Each tool call the model made, with the result the CLI sent back for it.
    pub fn steps(&self) -> Vec<ScenarioStep> {
        let results: Vec<ToolResult> =
            self.model.messages_calls().iter().flat_map(|call| call.tool_results()).collect();
        self.calls
            .iter()
            .map(|(id, tool, input)| ScenarioStep {
                tool: tool.clone(),
                input: input.clone(),
                result: results.iter().find(|result| &result.tool_use_id == id).cloned(),
            })
            .collect()
    }
}

/// Quotes `path` for `/bin/sh`.
fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// Makes `command` run without any capability when this process is root, as a session does in a
/// real deployment: root reads every file whatever its mode (`CAP_DAC_OVERRIDE`), so an entry the
/// CLI's tools cannot read (a mode 000 directory) only means something to a process without it.
/// The command is started through util-linux's `setpriv` with an empty bounding, inheritable and
/// ambient set and the `noroot` securebits locked, so it stays uid 0 (it owns the sandbox `_tree`
/// the test made, and reaches the checkout wherever it is, a 0700 temporary directory included)
/// but every permission is checked as for an ordinary owner. Its environment, working directory
/// and arguments are kept (the command must have been built with `env_clear`, as every CLI
/// command of the testkit is). Does nothing when not root.
pub fn run_unprivileged(command: &mut Command, _tree: &Path) -> io::Result<()> {
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    #[expect(clippy::disallowed_methods, reason = "the testkit starts the CLI it drives")]
    let mut wrapped = Command::new("setpriv");
    wrapped
        .args(["--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all"])
        .arg("--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked")
        .arg("--")
        .arg(command.get_program())
        .args(command.get_args())
        .env_clear()
        .stdin(std::process::Stdio::null());
    for (key, value) in command.get_envs() {
        if let Some(value) = value {
            wrapped.env(key, value);
        }
    }
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    *command = wrapped;
    Ok(())
}
