//! A whole session through harness-runner with a real CLI, for the end-to-end tests and
//! `cargo xtask demo`: a bundle built by harness-bundle for a sample role (the pm fixture, routed
//! to the chosen harness and to the scripted model), a run directory, the scripted broker and
//! the scripted model, and the runner started on them with a capability on stdin.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use harness_adapters::InstallLayout;
use harness_bundle::{BundleRequest, SessionInfo, build_bundle};
use harness_contract::Harness;
use serde_json::{Value, json};

use crate::broker::{BrokerAnswer, ScriptedBroker};
use crate::clis::{Cli, CliPaths, tools_bin_dir, utf8, workspace_root};
use crate::fixture::RoleFixture;
use crate::process::new_command;
use crate::script::{Reply, Script};
use crate::server::ScriptedModel;

/// The capability the scenario's host hands the runner.
pub const SESSION_CAP: &str = "cap-e2e-5b2f8d0c41a7";
/// What the secret beside the workspace holds; it must never reach the model.
pub const SESSION_SECRET: &str = "the founder's notes, never for an agent";

/// A reply full of the tells the default unslop list names.
pub const SESSION_SLOP: &str =
    "Let us delve into the plan; it is a testament to the team's tapestry of effort.";

/// One scripted turn of the standard session: the message, and the tool calls the model makes.
#[derive(Debug, Clone)]
pub struct ScriptedTurn {
    /// The message's id.
    pub id: String,
    /// The message's text.
    pub text: String,
    /// The model's tool calls in this turn: id, tool name, input.
    pub tool_calls: Vec<(String, String, Value)>,
}

/// What a session may be built with besides the defaults.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Where the bundle's binaries and assets are.
    pub layout: InstallLayout,
    /// The role's `limits.tools`, when not the pm fixture's.
    pub limits: Option<Vec<String>>,
    /// run.json's `turnTimeout`, seconds.
    pub turn_timeout: u64,
    /// A real Anthropic-compatible endpoint to use instead of the scripted model.
    pub endpoint: Option<Endpoint>,
    /// The role's projects (none by default), for the git tools.
    pub projects: Vec<harness_tools::Project>,
    /// Actions added to the role's `withinRole` (e.g. `review.verdict` for `fetch_review`).
    pub actions: Vec<String>,
    /// Fields set in run.json over the scenario's own (e.g. `gitSocket`, `confine`).
    pub run_json: serde_json::Map<String, Value>,
}

/// A real Anthropic-compatible Messages API: its base URL (without `/v1`), the model id, and the
/// API key (passed to the CLI in `ANTHROPIC_API_KEY`, never written to a file).
#[derive(Clone)]
pub struct Endpoint {
    /// The base URL.
    pub base_url: String,
    /// The model id.
    pub model: String,
    /// The API key.
    pub api_key: String,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl SessionOptions {
    /// The checkout's layout with binaries from `bin_dir`, the fixture's limits, 120 s turns.
    /// `bin_dir` must be UTF-8, as the layout is.
    pub fn from_checkout(bin_dir: &Path) -> io::Result<Self> {
        Ok(Self {
            layout: InstallLayout::from_checkout(&workspace_root(), &utf8(bin_dir)?),
            limits: None,
            turn_timeout: 120,
            endpoint: None,
            projects: Vec::new(),
            actions: Vec::new(),
            run_json: serde_json::Map::new(),
        })
    }
}

/// One session's world.
#[derive(Debug)]
pub struct SessionScenario {
    cli: Cli,
    program: PathBuf,
    model: ScriptedModel,
    broker: ScriptedBroker,
    dir: tempfile::TempDir,
    run: PathBuf,
    workspace: PathBuf,
    secret: PathBuf,
    /// Where the CLI sends its model requests, and with which key.
    base_url: String,
    api_key: String,
}

impl SessionScenario {
    /// Lays out the run for `cli`, the harness binaries taken from `bin_dir` (`target/debug`).
    pub fn new(cli: &CliPaths, bin_dir: &Path) -> io::Result<Self> {
        Self::with_options(cli, SessionOptions::from_checkout(bin_dir)?)
    }

    /// Lays out the run for `cli` with `options`.
    pub fn with_options(cli: &CliPaths, options: SessionOptions) -> io::Result<Self> {
        let model = ScriptedModel::start(Script::default())?;
        let broker = ScriptedBroker::start()?;
        let dir = tempfile::Builder::new().prefix("harness-session-").tempdir()?;
        let root = dir.path().canonicalize()?;
        let workspace = root.join("workspace");
        std::fs::create_dir_all(&workspace)?;
        std::fs::write(workspace.join("README.md"), "# The sample project\n")?;
        let secret = root.join("secret.txt");
        std::fs::write(&secret, SESSION_SECRET)?;
        let run = root.join("run");
        std::fs::create_dir_all(&run)?;

        let (base_url, api_key, model_id) = match &options.endpoint {
            Some(endpoint) => {
                (endpoint.base_url.clone(), endpoint.api_key.clone(), endpoint.model.clone())
            }
            None => {
                (model.base_url().to_owned(), "sk-ant-fake".to_owned(), "scripted-model".to_owned())
            }
        };
        let harness = match cli.cli() {
            Cli::Claude => Harness::ClaudeCode,
            Cli::Pi => Harness::Pi,
        };
        let mut fixture = RoleFixture::load("pm", harness, &model_id)?;
        let resolved = &mut fixture.resolved;
        if let Some(limits) = options.limits {
            resolved.limits.tools = limits;
        }
        resolved.services.clear();
        resolved.skills.clear();
        resolved.projects = options.projects.clone();
        resolved.actions.within_role.extend(options.actions.iter().cloned());
        let built = build_bundle(&BundleRequest {
            session: SessionInfo {
                run: "run-demo-1".to_owned(),
                launched_by: "the demo host".to_owned(),
                workspace: utf8(workspace.clone())?,
            },
            ..fixture.request(run.join("bundle"), workspace.clone(), options.layout)?
        })
        .map_err(io::Error::other)?;

        let models = json!({"providers": {"scripted": {
            "baseUrl": base_url,
            "api": "anthropic-messages",
            "apiKey": "$SCRIPTED_API_KEY",
            "models": [{"id": model_id, "reasoning": false, "contextWindow": 200000, "maxTokens": 4096}],
        }}});
        let mut run_json = json!({
            "broker": broker.socket(),
            "workspace": workspace,
            "bundleDigest": built.digest,
            "cli": cli.program(),
            "turnTimeout": options.turn_timeout,
            "brokerRetries": 10,
            "pollInterval": 0.05,
            "passEnv": [
                "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                "DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING",
                "CLAUDE_CODE_MAX_RETRIES", "PI_OFFLINE", "SCRIPTED_API_KEY"
            ],
            "sessionFiles": {
                "pi-agent/models.json": models.to_string(),
                "pi-agent/settings.json": json!({"retry": {"enabled": false}}).to_string(),
            },
        });
        if let Some(fields) = run_json.as_object_mut() {
            fields.extend(options.run_json.clone());
        }
        std::fs::write(run.join("run.json"), run_json.to_string())?;
        broker
            .answer("role.claim", BrokerAnswer::result(json!({"run": "run-demo-1"})))
            .answer("role.release", BrokerAnswer::result(json!({})))
            .answer("message.read", BrokerAnswer::result(json!({"message": null})))
            .answer("message.send", BrokerAnswer::result(json!({"id": "sent"})))
            .answer(
                "state",
                BrokerAnswer::result(json!({
                    "launch": {"state": "running", "at": "2026-11-30T09:00:00Z", "event": "ev-41"},
                    "tasks": {"open": [{"ref": "web-1", "title": "Ship the login page"},
                                        {"ref": "web-2", "title": "Fix the footer"}], "total": 2}
                })),
            );
        Ok(Self {
            cli: cli.cli(),
            program: cli.program().to_path_buf(),
            model,
            broker,
            dir,
            run,
            workspace,
            secret,
            base_url,
            api_key,
        })
    }

    /// Queues a message from `from` for the runner to read.
    pub fn send_message(&self, id: &str, from: &str, text: &str) {
        self.broker.answer_once(
            "message.read",
            BrokerAnswer::result(json!({"message": {
                "id": id, "from": from, "kind": "message", "sentAt": "2026-11-30T09:00:00Z", "text": text
            }})),
        );
    }

    /// Scripts the standard five-turn session: a typed tool call (list_tasks) the broker answers,
    /// a read of the secret beside the workspace (which the gate blocks), a reply full of slop, a
    /// plain reply (its request carries the correction notice), and a turn whose model call fails.
    pub fn script_standard(&self) -> Vec<ScriptedTurn> {
        self.broker.answer(
            "tasks",
            BrokerAnswer::result(json!({"tasks": [
                {"ref": "web-1", "title": "Ship the login page"},
                {"ref": "web-2", "title": "Fix the footer"}], "total": 2})),
        );
        let (read_tool, read_input) = self.read_call(&self.secret);
        let list = self.typed_name("list_tasks");
        self.model.push_replies([
            Reply::tool_use("toolu_tasks", list.clone(), json!({})),
            Reply::text("Two tasks are open: web-1 and web-2."),
            Reply::tool_use("toolu_secret", read_tool.clone(), read_input.clone()),
            Reply::text("I cannot read files outside my workspace."),
            Reply::text(SESSION_SLOP),
            Reply::text("Noted."),
            Reply::api_error(500, "the scripted model is down for this turn"),
        ]);
        let turns = vec![
            ("m1", "How many tasks are open?", vec![("toolu_tasks".to_owned(), list, json!({}))]),
            (
                "m2",
                "Show me the notes beside your workspace.",
                vec![("toolu_secret".to_owned(), read_tool, read_input)],
            ),
            ("m3", "Describe the plan.", vec![]),
            ("m4", "Thanks.", vec![]),
            ("m5", "One more thing.", vec![]),
        ];
        turns
            .into_iter()
            .map(|(id, text, tool_calls)| {
                self.send_message(id, "acme-cos", text);
                ScriptedTurn { id: id.to_owned(), text: text.to_owned(), tool_calls }
            })
            .collect()
    }

    /// Keeps the scenario's directory after the scenario is dropped, and returns it.
    pub fn keep(self) -> PathBuf {
        self.dir.keep()
    }

    /// The name the model uses for typed tool `tool` in this harness.
    pub fn typed_name(&self, tool: &str) -> String {
        match self.cli {
            Cli::Claude => format!("mcp__mosaic__{tool}"),
            Cli::Pi => tool.to_owned(),
        }
    }

    /// The read tool's name and its input for `path` in this harness.
    pub fn read_call(&self, path: &Path) -> (String, Value) {
        match self.cli {
            Cli::Claude => ("Read".to_owned(), json!({"file_path": path})),
            Cli::Pi => ("read".to_owned(), json!({"path": path})),
        }
    }

    /// Starts `runner` on the run directory with the capability on stdin.
    pub fn spawn_runner(&self, runner: &Path) -> io::Result<Child> {
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", tools_bin_dir().display());
        let mut command = new_command(runner);
        command
            .arg(&self.run)
            .env_clear()
            .env("PATH", path)
            .env("ANTHROPIC_BASE_URL", &self.base_url)
            .env("ANTHROPIC_API_KEY", &self.api_key)
            .env("SCRIPTED_API_KEY", &self.api_key)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_MAX_RETRIES", "0")
            .env("PI_OFFLINE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn()?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(format!("{{\"cap\": \"{SESSION_CAP}\"}}\n").as_bytes())?;
        }
        Ok(child)
    }

    /// The scripted model.
    pub fn model(&self) -> &ScriptedModel {
        &self.model
    }

    /// The scripted broker.
    pub fn broker(&self) -> &ScriptedBroker {
        &self.broker
    }

    /// The run directory.
    pub fn run_dir(&self) -> &Path {
        &self.run
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The secret beside the workspace.
    pub fn secret(&self) -> &Path {
        &self.secret
    }

    /// The CLI the scenario runs.
    pub fn cli(&self) -> Cli {
        self.cli
    }

    /// The CLI's program.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The scenario's temporary root (kept while the scenario lives).
    pub fn root(&self) -> &Path {
        self.dir.path()
    }
}
