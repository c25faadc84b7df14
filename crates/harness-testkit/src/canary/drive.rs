//! Driving a real CLI as the harness does: a bundle built by harness-bundle for the pm fixture,
//! the bundle's adapter script run with the variables harness-runner gives it, and the scripted
//! model serving the generated calls, many per message.
//!
//! Two deliberate differences from a shipped session, both for Claude Code: its adapter runs
//! without `--restricted` (a copy of the asset with that one flag removed), so the gate is the only
//! path check; and the bundle's `permissions.allow` gets the role's built-in tools when it lacks
//! them, because `--permission-mode dontAsk` otherwise denies every Write and Edit before they run.

use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use harness_adapters::InstallLayout;
use harness_bundle::build_bundle;
use harness_confine::{Domain, Mode, SessionPaths};
use harness_contract::Harness;
use serde_json::{Value, json};

use super::generate::CanaryCall;
use super::world::World;
use crate::clis::{Cli, CliPaths, tools_bin_dir, utf8, workspace_root};
use crate::fixture::RoleFixture;
use crate::process::{CliOutput, new_command, run_with_deadline};
use crate::recorded::RecordedRequest;
use crate::script::{Block, Reply, Script};
use crate::server::ScriptedModel;

/// The model name the bundle routes to; the scripted model echoes it.
const MODEL: &str = "scripted-model";
/// What the turn's request says; the calls come from the scripted model, not from it. It
/// mentions the secrets the way Claude Code expands `@` mentions (a word's start, quoted, after
/// `。`, after a no-break space, a directory), so every run also checks that the adapter keeps a
/// request's mentions from reaching the model. Like harness-runner's requests it does not start
/// with `@` (Pi would read the whole argument as a file to attach).
fn request(world: &World) -> String {
    let root = world.root.display();
    format!(
        "Current state: the canary's.\nRun the canary's tool calls. See @{root}/outside/secret.txt \
         and @\"{root}/outside/d/secret2.txt\", x。@{root}/session/home/secret-home.txt,\u{a0}@{root}/outside\n\
         @../outside/secret.txt @{root}\n"
    )
}
/// The flag the canary's copy of the Claude Code adapter leaves out.
const RESTRICTED: &str = "--restricted ";

/// Where the adapters the bundle points at are: the shipped Pi adapter as it is, and a copy of the
/// Claude Code adapter without `--restricted`.
pub(crate) fn adapters_without_restricted(dir: &Path) -> io::Result<PathBuf> {
    let assets = workspace_root().join("crates/harness-adapters/assets/adapters");
    std::fs::create_dir_all(dir)?;
    let claude = std::fs::read_to_string(assets.join("claude-code.sh"))?;
    write_file(&dir.join("claude-code.sh"), &without_restricted(&claude)?)?;
    write_file(&dir.join("pi.sh"), &std::fs::read_to_string(assets.join("pi.sh"))?)?;
    Ok(dir.to_path_buf())
}

/// The Claude Code adapter's text without its one `--restricted` flag (comments left alone).
pub fn without_restricted(adapter: &str) -> io::Result<String> {
    let mut found = 0;
    let lines: Vec<String> = adapter
        .lines()
        .map(|line| {
            if line.trim_start().starts_with('#') || !line.contains(RESTRICTED) {
                return line.to_owned();
            }
            found += line.matches(RESTRICTED).count();
            line.replace(RESTRICTED, "")
        })
        .collect();
    if found != 1 {
        return Err(io::Error::other(format!(
            "the Claude Code adapter passes --restricted {found} times, not once; the canary \
             cannot make its copy without it"
        )));
    }
    Ok(lines.join("\n") + "\n")
}

fn write_file(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write as _;
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(path)?;
    file.write_all(text.as_bytes())
}

/// The allow-all stand-in for the gate: a script that logs the payload it is given and exits 0,
/// which both the Claude Code hook and the Pi extension read as "allow".
pub(crate) fn allow_all_gate(path: &Path, log_dir: &Path) -> io::Result<()> {
    let quoted = log_dir.display().to_string().replace('\'', r"'\''");
    let script = format!(
        "#!/bin/sh\n# The canary's allow-all gate: it records the call and allows it.\n\
         f=$(mktemp '{quoted}/call.XXXXXXXX') && cat > \"$f\"\nexit 0\n"
    );
    use std::io::Write as _;
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o755).open(path)?;
    file.write_all(script.as_bytes())
}

/// What the adapter needs from a built bundle.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    cli: Cli,
    program: PathBuf,
    adapter: PathBuf,
    env: Vec<(String, String)>,
    /// The files the session runs (the adapter, the gate, the assets): what a domain grants.
    programs: Vec<PathBuf>,
}

/// Builds the bundle for `cli` into the world, with `gate` as the gate and the adapters from
/// `adapters`, and returns how to launch a turn.
pub(crate) fn build(
    cli: &CliPaths,
    world: &World,
    bin_dir: &Path,
    gate: &Path,
    adapters: &Path,
) -> io::Result<Launch> {
    let harness = match cli.cli() {
        Cli::Claude => Harness::ClaudeCode,
        Cli::Pi => Harness::Pi,
    };
    let mut fixture = RoleFixture::load("pm", harness, MODEL)?;
    fixture.resolved.services.clear();
    fixture.resolved.skills.clear();
    fixture.resolved.projects.clear();
    let module = fixture.harness;
    let mut layout = InstallLayout::from_checkout(&workspace_root(), &utf8(bin_dir)?);
    layout.gate = utf8(gate)?;
    layout.adapters = utf8(adapters)?;
    build_bundle(&fixture.request(world.bundle(), world.workspace(), layout.clone())?)
        .map_err(io::Error::other)?;

    let manifest: Value =
        serde_json::from_slice(&std::fs::read(world.bundle().join("manifest.json"))?)
            .map_err(io::Error::other)?;
    let field = |name: &str| manifest.get(name).and_then(Value::as_str).unwrap_or_default();
    let cli_tools: Vec<&str> = manifest
        .get("cliTools")
        .and_then(Value::as_array)
        .map(|tools| tools.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if cli.cli() == Cli::Claude {
        check_builtins_allowed(&world.bundle().join("settings.json"), &cli_tools)?;
    }
    let bundle = world.bundle();
    let path = |p: &Path| p.display().to_string();
    let mut env = vec![
        ("PATH".to_owned(), format!("{}:/usr/local/bin:/usr/bin:/bin", tools_bin_dir().display())),
        ("MOSAIC_BUNDLE".to_owned(), path(&bundle)),
        ("MOSAIC_RUN".to_owned(), path(&world.run_dir())),
        ("MOSAIC_WORKSPACE".to_owned(), path(&world.workspace())),
        ("MOSAIC_SESSION_DIR".to_owned(), path(&world.session())),
        ("MOSAIC_TURN".to_owned(), "1".to_owned()),
        ("MOSAIC_PROVIDER".to_owned(), field("provider").to_owned()),
        ("MOSAIC_MODEL".to_owned(), field("model").to_owned()),
        ("MOSAIC_THINKING".to_owned(), field("thinking").to_owned()),
        ("MOSAIC_TOOLS".to_owned(), cli_tools.join(",")),
        ("MOSAIC_TOOLS_SOCK".to_owned(), path(&world.run_dir().join("tools.sock"))),
        ("MOSAIC_CLI".to_owned(), path(cli.program())),
        ("MOSAIC_UNSLOP_LOG".to_owned(), path(&world.run_dir().join("unslop.jsonl"))),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_owned(), "1".to_owned()),
        ("DISABLE_TELEMETRY".to_owned(), "1".to_owned()),
        ("DISABLE_AUTOUPDATER".to_owned(), "1".to_owned()),
        ("DISABLE_ERROR_REPORTING".to_owned(), "1".to_owned()),
        ("CLAUDE_CODE_MAX_RETRIES".to_owned(), "0".to_owned()),
        ("PI_OFFLINE".to_owned(), "1".to_owned()),
    ];
    if let Some(assets) = manifest.get("assets").and_then(Value::as_object) {
        // As harness-runner passes them: each asset role the contract knows, by its variable.
        for (key, asset) in assets {
            let Some(role) = harness_contract::AssetRole::from_key(key) else { continue };
            let asset_path = asset.get("path").and_then(Value::as_str).unwrap_or_default();
            env.push((role.env_name().to_owned(), asset_path.to_owned()));
        }
    }
    let mut programs = vec![module.adapter(&layout).into(), gate.to_path_buf()];
    programs.extend(module.assets(&layout).into_iter().map(|asset| asset.path.into()));
    Ok(Launch {
        cli: cli.cli(),
        program: cli.program().to_path_buf(),
        adapter: module.adapter(&layout).into(),
        env,
        programs,
    })
}

/// Checks that the bundle's settings.json allows each of the role's built-ins (`cli_tools`) under
/// `--permission-mode dontAsk`, so that a call the gate lets through is one Claude Code runs: the
/// canary runs the bundle as built, and a family of calls Claude Code itself denies would prove
/// nothing about the gate.
fn check_builtins_allowed(settings: &Path, cli_tools: &[&str]) -> io::Result<()> {
    let value: Value =
        serde_json::from_slice(&std::fs::read(settings)?).map_err(io::Error::other)?;
    let allow = value.pointer("/permissions/allow").and_then(Value::as_array);
    let allowed = |tool: &str| allow.is_some_and(|rules| rules.iter().any(|rule| rule == tool));
    let missing: Vec<&str> = cli_tools.iter().copied().filter(|tool| !allowed(tool)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "the bundle's settings.json does not allow the role's built-ins {missing:?}"
        )))
    }
}

/// What one CLI run gave back.
#[derive(Debug)]
pub(crate) struct RunOutput {
    /// Every Messages API call the CLI made.
    pub(crate) requests: Vec<RecordedRequest>,
    /// How the CLI ended.
    pub(crate) output: io::Result<CliOutput>,
    /// Replies the CLI never asked for (it stopped early).
    pub(crate) replies_left: usize,
}

impl Launch {
    /// Runs one turn whose model answers with `messages` (each a list of calls), then a text.
    pub(crate) fn run(
        &self,
        world: &World,
        number: usize,
        messages: &[Vec<CanaryCall>],
        deadline: Duration,
        confine: bool,
    ) -> io::Result<RunOutput> {
        let mut replies: Vec<Reply> = messages
            .iter()
            .map(|calls| {
                Reply::new(calls.iter().map(|call| {
                    Block::tool_use(call.tool_use_id(), call.tool.clone(), call.input.clone())
                }))
            })
            .collect();
        replies.push(Reply::text("The canary's calls are done."));
        let model = ScriptedModel::start(Script::new(replies))?;
        let run_dir = world.run_dir();
        let request = run_dir.join(format!("request-{number}.txt"));
        std::fs::write(&request, self::request(world))?;
        let pi_agent = world.session().join("pi-agent");
        std::fs::create_dir_all(&pi_agent)?;
        let models = json!({"providers": {"scripted": {
            "baseUrl": model.base_url(),
            "api": "anthropic-messages",
            "apiKey": "scripted-fake-key",
            "models": [{"id": MODEL, "reasoning": false, "contextWindow": 200000, "maxTokens": 4096}],
        }}});
        std::fs::write(pi_agent.join("models.json"), models.to_string())?;
        std::fs::write(pi_agent.join("settings.json"), r#"{"retry": {"enabled": false}}"#)?;
        // Claude Code takes a UUID; Pi any string. A new session per run keeps the history short.
        let session_id = format!("00000000-0000-4000-8000-{number:012x}");
        let mut command = new_command(Path::new("/bin/sh"));
        command
            .arg(&self.adapter)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("MOSAIC_SESSION_ID", &session_id)
            .env("MOSAIC_REQUEST", &request)
            .env("MOSAIC_TURN_MARKER", run_dir.join(format!("marker-{number}")))
            .env("ANTHROPIC_BASE_URL", model.base_url())
            .env("ANTHROPIC_API_KEY", "sk-ant-fake")
            .current_dir(&world.root)
            .stdin(Stdio::null());
        if confine {
            // As harness-runner sets it: the CLI's temporary files inside its own domain.
            let tmp = world.session().join("tmp");
            std::fs::create_dir_all(&tmp)?;
            command.env("TMPDIR", &tmp);
            self.domain(world, &request)?.attach(&mut command);
        }
        let output = run_with_deadline(command, deadline);
        Ok(RunOutput {
            requests: model.messages_calls(),
            output,
            replies_left: model.replies_left(),
        })
    }

    /// The Landlock domain harness-runner puts a turn in, for this world: the workspace and the
    /// session writable, the bundle and the request readable, the programs and the CLI's
    /// installation executable, the harness's own scratch (markers, the stand-in's log)
    /// writable; the secrets beside the workspace and in the home's parent not at all. Required:
    /// a kernel that cannot confine fails the pass rather than pass it unconfined.
    fn domain(&self, world: &World, request: &Path) -> io::Result<Arc<Domain>> {
        let search_path =
            self.env.iter().find(|(name, _)| name == "PATH").map(|(_, path)| path.into());
        let mut programs = self.programs.clone();
        programs.push(self.program.clone());
        let paths = SessionPaths {
            workspace: world.workspace(),
            session_dir: world.session(),
            bundle: world.bundle(),
            read_files: vec![request.to_path_buf()],
            append_files: Vec::new(),
            programs,
            installations: vec![self.program.clone()],
            scratch: vec![world.run_dir(), world.gate_log()],
            sockets: Vec::new(),
            search_path,
            connect_ports: None,
            network: harness_confine::Network::Host,
            listen: Vec::new(),
        };
        let domain = harness_confine::prepare(&paths.policy(Mode::Required))
            .map_err(|error| io::Error::other(format!("the canary cannot confine: {error}")))?;
        Ok(Arc::new(domain))
    }

    /// The CLI this launch runs.
    pub(crate) fn cli(&self) -> Cli {
        self.cli
    }

    /// The CLI's program.
    pub(crate) fn program(&self) -> &Path {
        &self.program
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adapter_copy_loses_only_restricted() {
        let assets = workspace_root().join("crates/harness-adapters/assets/adapters");
        let shipped = std::fs::read_to_string(assets.join("claude-code.sh")).unwrap();
        let copy = without_restricted(&shipped).unwrap();
        let flags = |text: &str| {
            text.lines()
                .filter(|line| !line.trim_start().starts_with('#'))
                .map(str::to_owned)
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(flags(&shipped).contains("--restricted"));
        assert!(!flags(&copy).contains("--restricted"), "{copy}");
        assert_eq!(
            copy.len() + RESTRICTED.len(),
            shipped.len() + usize::from(!shipped.ends_with('\n'))
        );
        assert!(without_restricted("exec claude --tools x\n").is_err());
    }

    #[test]
    fn a_settings_file_that_does_not_allow_a_built_in_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let settings = dir.path().join("settings.json");
        let text = json!({"permissions": {"allow": ["mcp__mosaic", "Edit(/ws/**)", "Read"]}});
        std::fs::write(&settings, text.to_string()).unwrap();
        let error = check_builtins_allowed(&settings, &["Read", "Edit"]).unwrap_err();
        assert!(error.to_string().contains("[\"Edit\"]"), "{error}");
        check_builtins_allowed(&settings, &["Read"]).unwrap();
    }
}
