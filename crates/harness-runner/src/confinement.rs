//! The session's Landlock domain, from the run directory (docs/runner.md, "Confinement").
//!
//! Each turn gets a domain built before the adapter starts: the workspace and `RUN/session`
//! writable, the turn's request readable, the unslop log appendable, the bundle readable, the
//! programs and assets the manifest and run.json name readable and executable, the system
//! directories the CLIs need; nothing else of the run directory (`RUN/tmp`, `RUN/turns`, the
//! lock, run.json) and nothing else of the machine. The runner's git gets a domain of its own
//! ([`git_domain`]): the workspace read only and its own repositories in `STATE/git`. The
//! domain's report goes to stderr at every turn.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use harness_confine::{Domain, SessionPaths};
use harness_contract::RunDir;

use crate::config::Run;
use crate::dirs::RunDirs;
use crate::error::RunError;
use crate::supervise::PreExec;

/// The paths every domain of this run grants.
fn session_paths(run: &Run, search_path: std::ffi::OsString) -> SessionPaths {
    let mut programs = vec![run.manifest.adapter.clone().into(), run.file.cli.clone().into()];
    programs.extend(run.manifest.assets.values().map(|asset| asset.path.clone().into()));
    SessionPaths {
        workspace: run.file.workspace.clone().into(),
        session_dir: RunDir::new(&run.dir).session(),
        bundle: run.bundle.clone(),
        read_files: Vec::new(),
        append_files: vec![RunDir::new(&run.dir).unslop_log()],
        programs,
        installations: vec![run.file.cli.clone().into()],
        scratch: Vec::new(),
        sockets: vec![RunDir::new(&run.dir).tools_sock()],
        search_path: Some(search_path),
        connect_ports: run.file.connect_ports.clone(),
        network: harness_confine::Network::Host,
        listen: Vec::new(),
    }
}

/// What a turn of `run` may reach, one line each, as the runner builds the turn's sandbox
/// (`grant path` for each path rule, then the network and its allowlist): what
/// `harness doctor --run` prints.
pub fn turn_grants(run: &Run, env: &crate::env::Environment) -> Vec<String> {
    let mut paths = session_paths(run, env.path());
    let plan = crate::egress::Plan::of(run, env);
    if let Some(plan) = &plan {
        paths.network = harness_confine::Network::Loopback;
        paths.listen = plan.listen();
    }
    let policy = paths.policy(run.file.confine);
    let mut out: Vec<String> = policy
        .rules
        .iter()
        .map(|rule| format!("{} {}", rule.grant.as_str(), rule.path.display()))
        .collect();
    out.push(match &plan {
        Some(plan) => {
            let allow: Vec<String> = plan.allow.iter().map(ToString::to_string).collect();
            format!("network: loopback only; egress through the runner to {}", allow.join(", "))
        }
        None => "network: the machine's (egress \"open\")".to_owned(),
    });
    if let Some(ports) = &policy.connect_ports {
        out.push(format!("tcp connect: ports {ports:?} only"));
    }
    out
}

/// Creates what a rule must find in place: `RUN/session/tmp` and an empty unslop log (0600,
/// never through a link; one that exists is left as it is), through the run's handles.
pub(crate) fn prepare_paths(dirs: &RunDirs) -> Result<(), RunError> {
    dirs.session.subdir(RunDir::SESSION_TMP)?;
    match dirs.run.create(RunDir::UNSLOP_LOG) {
        Ok(_) => Ok(()),
        Err(RunError::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => {
            Ok(())
        }
        Err(error) => Err(error),
    }
}

/// The domain of turn `number`, whose request is `request` (none for the launch preflight);
/// logged to stderr. Under
/// `"required"`, a domain that cannot be built in full ends the run (exit 2).
pub(crate) fn turn_domain(
    run: &Run,
    dirs: &RunDirs,
    number: u32,
    request: Option<&std::path::Path>,
    env: &crate::env::Environment,
) -> Result<Confined, RunError> {
    let mut paths = session_paths(run, env.path());
    paths.read_files.extend(request.map(std::path::Path::to_path_buf));
    // Egress: a network namespace with loopback only, served by the runner (crate::egress), or
    // the machine's network for `"egress": "open"`.
    let mut plan = crate::egress::Plan::of(run, env);
    if plan.is_some() {
        paths.network = harness_confine::Network::Loopback;
    }
    // The launch preflight (no request) starts the CLI's `--version`, which needs no network: its
    // namespace gets loopback only and no egress, so no egress thread runs for it.
    if request.is_none() {
        plan = None;
    }
    if let Some(plan) = &plan {
        paths.listen = plan.listen();
        if let Some(ports) = &mut paths.connect_ports {
            ports.extend(plan.ports());
        }
    }
    // A rule follows a link; the log is granted only while it is a plain file, so a link put
    // there (by a session that ran unconfined before) never opens its target to the session.
    let log = RunDir::new(&run.dir).unslop_log();
    if dirs.run.file_type(RunDir::UNSLOP_LOG) != Some(rustix::fs::FileType::RegularFile) {
        tracing::warn!("{} is not a plain file; the session may not write it", log.display());
        paths.append_files.clear();
    }
    let domain = harness_confine::prepare(&paths.policy(run.file.confine))
        .map_err(|error| RunError::invalid(&run.dir, error.to_string()))?;
    tracing::info!(turn = number, "turn {number} confinement: {}", domain.report());
    let plan = plan.filter(|_| domain.isolates_network());
    match (&plan, request) {
        (Some(plan), _) => tracing::info!(turn = number, "turn {number} {}", plan.describe()),
        (None, None) if domain.isolates_network() => {
            tracing::info!("the launch preflight: loopback only, no egress");
        }
        (None, _) => tracing::info!(turn = number, "turn {number} egress: the machine's network"),
    }
    Ok(Confined { domain: Arc::new(domain), plan: plan.map(Arc::new), server: Mutex::default() })
}

/// The domain of the runner's git: the system directories, the workspace read only (the clone's
/// object store, which the call's repository names as its alternate), and `STATE/git`, where
/// the calls' repositories are, read and write; nothing of the run directory, nothing of the
/// session directory, no socket.
pub(crate) fn git_domain(git: &GitPaths) -> Result<Confined, String> {
    let paths = SessionPaths {
        // `SessionPaths` grants its workspace and session directory read and write: for git
        // both are `STATE/git`. The workspace is granted as the bundle and a read file are:
        // read only.
        workspace: git.scratch.clone(),
        session_dir: git.scratch.clone(),
        bundle: git.workspace.clone(),
        read_files: vec![git.workspace.clone()],
        connect_ports: git.connect_ports.clone(),
        // git needs no network: its own namespace with loopback only.
        network: harness_confine::Network::Loopback,
        ..SessionPaths::default()
    };
    harness_confine::prepare(&paths.policy(git.mode))
        .map(|domain| Confined { domain: Arc::new(domain), plan: None, server: Mutex::default() })
        .map_err(|error| error.to_string())
}

/// A sandbox as the supervisor's pre-exec hook: the child enters it between fork and exec, with
/// system calls only (`harness_confine::Domain::attach`); the runner serves its egress, if it
/// has one, until this is dropped.
#[derive(Debug)]
pub(crate) struct Confined {
    domain: Arc<Domain>,
    plan: Option<Arc<crate::egress::Plan>>,
    server: Mutex<Option<crate::egress::Server>>,
}

impl Confined {
    /// The variables that send the turn's requests through its egress (none without one).
    pub(crate) fn egress_env(&self) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        self.plan.as_ref().map(|plan| plan.env()).unwrap_or_default()
    }
}

impl PreExec for Confined {
    fn prepare(&self, command: &mut std::process::Command) {
        let handoff = self.domain.attach(command);
        if let (Some(handoff), Some(plan)) = (handoff, &self.plan) {
            let server = crate::egress::Server::start(Arc::clone(plan), handoff);
            *self.server.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(server);
        }
    }
}

/// What the git tools keep to build their domain.
#[derive(Debug, Clone)]
pub(crate) struct GitPaths {
    workspace: PathBuf,
    /// `STATE/git`.
    scratch: PathBuf,
    connect_ports: Option<Vec<u16>>,
    mode: harness_confine::Mode,
}

impl GitPaths {
    pub(crate) fn new(run: &Run) -> Self {
        Self {
            workspace: run.file.workspace.clone().into(),
            scratch: run.state_dir().join("git"),
            connect_ports: run.file.connect_ports.clone(),
            mode: run.file.confine,
        }
    }
}
