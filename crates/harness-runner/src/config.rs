//! The run directory: run.json, the capability on stdin, and the bundle's manifest.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use harness_bus::Capability;
use serde::Deserialize;

use crate::error::RunError;

/// `RUN/run.json`, written by the host (docs/runner.md has every field).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "run.json")]
pub struct RunFile {
    /// The broker's Unix socket.
    #[schemars(with = "std::path::PathBuf")]
    pub broker: Utf8PathBuf,
    /// The host's launch socket, for a role whose launch tool calls it.
    #[serde(default)]
    #[schemars(with = "Option<std::path::PathBuf>")]
    pub launch_socket: Option<Utf8PathBuf>,
    /// The host's git socket, for a role with git tools.
    #[serde(default)]
    #[schemars(with = "Option<std::path::PathBuf>")]
    pub git_socket: Option<Utf8PathBuf>,
    /// The session's workspace.
    #[schemars(with = "std::path::PathBuf")]
    pub workspace: Utf8PathBuf,
    /// The bundle, relative to the run directory or absolute (default `bundle`).
    #[serde(default = "default_bundle")]
    #[schemars(with = "std::path::PathBuf")]
    pub bundle: Utf8PathBuf,
    /// The bundle's digest as the build returned it (the sha256 of its manifest.json): the
    /// runner runs only the bundle it seals (docs/bundle.md, "The seal").
    pub bundle_digest: String,
    /// The agent CLI the adapter runs (`pi` or `claude`, absolute).
    #[schemars(with = "std::path::PathBuf")]
    pub cli: Utf8PathBuf,
    /// The wall clock of one turn, in seconds (default 900).
    #[serde(default = "default_turn_timeout")]
    pub turn_timeout: u64,
    /// How many broker polls in a row may fail before the runner exits 23 (default 30).
    #[serde(default = "default_broker_retries")]
    pub broker_retries: u32,
    /// Seconds between two polls of `message.read` while idle, and between two tries of a call
    /// the runner retries (default 1); from 0.01 to 60, and a value outside is refused.
    #[serde(default = "default_poll_interval")]
    #[schemars(range(min = 0.01, max = 60.0))]
    pub poll_interval: f64,
    /// The most open tasks the state block lists (default 20).
    #[serde(default = "default_state_cap")]
    pub state_cap: u32,
    /// Variables of the runner's own environment passed on to the adapter (the provider's base
    /// URL and key variable, a role token's variable, ...). Nothing else of the environment is.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Files the host places under `RUN/session/` before the first turn, by path relative to
    /// it: the CLI's own configuration, such as Pi's `pi-agent/models.json` naming the provider
    /// (with `"apiKey": "$VAR"`, so the key itself stays in a `passEnv` variable).
    #[serde(default)]
    pub session_files: std::collections::BTreeMap<String, String>,
    /// The runner's private state directory (absolute, outside the run directory and the
    /// workspace); by default `RUN/state`.
    #[serde(default)]
    #[schemars(with = "Option<std::path::PathBuf>")]
    pub state_dir: Option<Utf8PathBuf>,
    /// Kernel confinement of every turn and of the runner's git (docs/runner.md, "Confinement"):
    /// `"required"`, `"best-effort"` (the default) or `"off"`.
    #[serde(default)]
    pub confine: harness_confine::Mode,
    /// The TCP ports the session may connect to inside its sandbox (Landlock ABI 4): the
    /// runner's egress ports are added to them. Without it TCP connect inside stays open (the
    /// network namespace is what bounds it).
    #[serde(default)]
    pub connect_ports: Option<Vec<u16>>,
    /// Where a turn may reach beyond its sandbox (docs/runner.md, "Egress"): absent, only the
    /// model endpoints the launch names (`ANTHROPIC_BASE_URL`, the `baseUrl`s of Pi's
    /// `models.json`, or Anthropic's API); a list of `host:port` entries adds those; `"open"`
    /// gives the turn the machine's network, with no namespace of its own (the seed's
    /// behaviour).
    #[serde(default)]
    pub egress: Option<EgressSetting>,
}

/// run.json's `egress`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum EgressSetting {
    /// `"open"`: the machine's network.
    Open(OpenEgress),
    /// `host:port` entries the egress proxy also connects to.
    Allow(Vec<String>),
}

/// The one word `egress` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OpenEgress {
    /// The machine's network, as the seed had it.
    Open,
}

fn default_bundle() -> Utf8PathBuf {
    Utf8PathBuf::from("bundle")
}
fn default_turn_timeout() -> u64 {
    900
}
fn default_broker_retries() -> u32 {
    30
}
fn default_poll_interval() -> f64 {
    1.0
}
fn default_state_cap() -> u32 {
    20
}

/// The manifest fields the runner uses.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// The run the bundle was built for.
    pub run: String,
    /// The harness (`pi`, `claude-code`).
    pub harness: String,
    /// The provider.
    pub provider: String,
    /// The provider's model id.
    pub model: String,
    /// The thinking level.
    pub thinking: String,
    /// The adapter script.
    pub adapter: Utf8PathBuf,
    /// The tool names to pass as `--tools`.
    pub cli_tools: Vec<String>,
    /// True if and only if a turn counts only with the turn marker (Pi's agent_end).
    pub turn_marker: bool,
    /// The installed assets, by role.
    pub assets: std::collections::BTreeMap<String, Asset>,
}

/// One installed asset of the manifest.
#[derive(Debug, Clone, Deserialize)]
pub struct Asset {
    /// Where it is installed.
    pub path: Utf8PathBuf,
}

/// Everything a run starts from.
#[derive(Debug)]
pub struct Run {
    /// The run directory (UTF-8, as [`load_run`] checks).
    pub dir: PathBuf,
    /// run.json.
    pub file: RunFile,
    /// The bundle directory.
    pub bundle: PathBuf,
    /// The bundle's manifest.
    pub manifest: Manifest,
    /// The bundle's tools.json.
    pub tools: harness_tools::ToolsFile,
    /// The bundle as verified against run.json's digest, checked again before each turn.
    pub seal: harness_bundle::SealedBundle,
    /// True if and only if the CLI's version was read from its own package and matched the
    /// seal before anything started; otherwise the launch preflight's output is the check.
    pub cli_version_known: bool,
}

impl Run {
    /// The wall clock of one turn.
    pub fn turn_timeout(&self) -> Duration {
        Duration::from_secs(self.file.turn_timeout)
    }

    /// The runner's state directory: run.json's `stateDir`, or `RUN/state`.
    pub fn state_dir(&self) -> PathBuf {
        self.file.state_dir.clone().map_or_else(|| self.dir.join("state"), PathBuf::from)
    }

    /// The pause between idle polls.
    pub fn poll_interval(&self) -> Duration {
        // In range: `read_run_file` refuses any other value.
        Duration::from_secs_f64(self.file.poll_interval)
    }
}

/// The seconds `pollInterval` may be (the bounds its schema carries too): a shorter pause would
/// spin on the broker, a longer one leave a message waiting past a minute.
const POLL_INTERVAL: std::ops::RangeInclusive<f64> = 0.01..=60.0;

/// The most stdin the capability line may take.
const MAX_STDIN: u64 = 64 * 1024;

/// Reads `{"cap": "..."}` and a newline from `input`. The value is never written anywhere.
pub fn read_capability(input: &mut impl BufRead) -> Result<Capability, RunError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct CapLine {
        cap: String,
    }
    let mut line = String::new();
    std::io::Read::take(input, MAX_STDIN)
        .read_line(&mut line)
        .map_err(|_| RunError::Stdin("the capability cannot be read"))?;
    if !line.ends_with('\n') {
        return Err(RunError::Stdin("stdin must hold {\"cap\": \"...\"} and a newline"));
    }
    // The error names the shape, never the text: the line holds the capability.
    let parsed: CapLine = serde_json::from_str(&line)
        .map_err(|_| RunError::Stdin("stdin is not {\"cap\": \"...\"} and a newline"))?;
    Capability::new(parsed.cap)
        .map_err(|_| RunError::Stdin("the capability on stdin is not usable"))
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, RunError> {
    let text = crate::files::read_capped(path, crate::files::MAX_READ)?
        .ok_or_else(|| RunError::invalid(path, "is missing"))?;
    harness_tools::json::from_slice(&text)
        .map_err(|source| RunError::Json { path: path.to_owned(), source })
}

/// Reads `RUN/run.json` and checks it as the runner does before it opens the bundle: the run
/// directory made absolute (the adapter runs in the workspace, where a relative path would name
/// nothing) and UTF-8 (the paths joined to it are text in JSON and the CLI's environment), every
/// field parsed (an error names it), the paths absolute, the workspace a directory, the limits
/// above 0, the session files plain relative paths, `stateDir` outside the run directory and the
/// workspace, `pollInterval` from 0.01 to 60, Landlock there if required.
/// Returns the run directory as used and the file. `harness doctor --run` checks with this.
pub fn read_run_file(dir: &Path) -> Result<(Utf8PathBuf, RunFile), RunError> {
    let dir = &std::path::absolute(dir).map_err(RunError::io("make absolute", dir))?;
    let dir = Utf8Path::from_path(dir).ok_or_else(|| {
        let why = format!("the run directory {dir:?} is not UTF-8: its paths are text (run.json, the CLI's environment)");
        RunError::invalid(dir, why)
    })?;
    let run_json = dir.join("run.json");
    let file: RunFile = read_json(run_json.as_std_path())?;
    for (name, path) in
        [("broker", &file.broker), ("workspace", &file.workspace), ("cli", &file.cli)]
    {
        if !path.is_absolute() {
            return Err(RunError::invalid(&run_json, format!("{name} {path:?} is not absolute")));
        }
    }
    if !file.workspace.is_dir() {
        return Err(RunError::invalid(
            &run_json,
            format!("the workspace {:?} is not a directory", file.workspace),
        ));
    }
    if file.turn_timeout == 0 || file.broker_retries == 0 {
        return Err(RunError::invalid(&run_json, "turnTimeout and brokerRetries must be above 0"));
    }
    if !POLL_INTERVAL.contains(&file.poll_interval) {
        return Err(RunError::invalid(
            &run_json,
            format!(
                "pollInterval {} is outside {} to {} seconds",
                file.poll_interval,
                POLL_INTERVAL.start(),
                POLL_INTERVAL.end()
            ),
        ));
    }
    for name in file.session_files.keys() {
        let path = Path::new(name);
        let plain = path.components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if name.is_empty() || !plain {
            return Err(RunError::invalid(
                &run_json,
                format!("the session file {name:?} is not a plain relative path"),
            ));
        }
    }
    if let Some(state) = &file.state_dir {
        check_state_dir(state.as_std_path(), dir.as_std_path(), file.workspace.as_std_path())
            .map_err(|reason| {
                RunError::invalid(&run_json, format!("stateDir {state:?} {reason}"))
            })?;
    }
    if let Some(EgressSetting::Allow(entries)) = &file.egress {
        for entry in entries {
            crate::egress::Endpoint::parse(entry).map_err(|reason| {
                RunError::invalid(&run_json, format!("egress entry {entry:?} {reason}"))
            })?;
        }
    }
    if file.confine == harness_confine::Mode::Required && harness_confine::kernel_abi() == 0 {
        return Err(RunError::invalid(
            &run_json,
            "confine is \"required\" and the kernel offers no Landlock",
        ));
    }
    Ok((dir.to_owned(), file))
}

/// Reads run.json ([`read_run_file`]) and the bundle, and checks the bundle against its
/// manifest: the session runs from the bundle and the assets it names, and from nothing else.
/// The CLI's version is checked here when its package names it, else by the launch preflight.
pub fn load_run(dir: &Path) -> Result<Run, RunError> {
    let (dir, file) = read_run_file(dir)?;
    let dir = dir.as_path();
    let bundle = dir.join(&file.bundle);
    // The seal (docs/bundle.md): the bundle is verified against run.json's digest, its
    // workspace and CLI against run.json's, and the manifest is parsed from the verified bytes.
    let sealed = |source| RunError::Bundle { path: bundle.clone().into(), source };
    let seal = harness_bundle::SealedBundle::open(bundle.as_std_path(), &file.bundle_digest)
        .map_err(sealed)?;
    seal.check_workspace(file.workspace.as_std_path()).map_err(sealed)?;
    let manifest_json = bundle.join("manifest.json");
    let manifest: Manifest = harness_tools::json::from_slice(seal.manifest_bytes())
        .map_err(|source| RunError::Json { path: manifest_json.clone().into(), source })?;
    // The CLI's version from its own package when run.json names the package's bin entry; the
    // launch preflight checks what the CLI prints in every case (preflight.rs).
    let module = harness_adapters::module(&manifest.harness).ok_or_else(|| {
        RunError::invalid(&manifest_json, format!("unknown harness {:?}", manifest.harness))
    })?;
    let packaged = crate::preflight::packaged_version(file.cli.as_std_path(), module);
    if let Some(version) = &packaged {
        seal.check_cli_version(file.cli.as_std_path(), version).map_err(sealed)?;
    }
    let tools_json = bundle.join("tools.json");
    let tools = harness_tools::ToolsFile::load(tools_json.as_std_path())
        .map_err(|error| RunError::invalid(&tools_json, error.to_string()))?;
    let cli_version_known = packaged.is_some();
    Ok(Run {
        dir: dir.into(),
        file,
        bundle: bundle.into(),
        manifest,
        tools,
        seal,
        cli_version_known,
    })
}

/// A state directory the session cannot reach through the run directory or the workspace:
/// absolute, without `..`, and inside neither.
fn check_state_dir(state: &Path, run: &Path, workspace: &Path) -> Result<(), &'static str> {
    if !state.is_absolute() {
        return Err("is not absolute");
    }
    if state.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err("holds ..");
    }
    let canonical = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let state = canonical(state);
    if state.starts_with(canonical(run)) {
        return Err("is inside the run directory, which the session can write");
    }
    if state.starts_with(canonical(workspace)) {
        return Err("is inside the workspace, which the session can write");
    }
    Ok(())
}
