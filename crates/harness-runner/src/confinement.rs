//! The session's Landlock domain, from the run directory (docs/runner.md, "Confinement").
//!
//! Each turn gets a domain built before the adapter starts: the workspace and `RUN/session`
//! writable, the turn's request readable, the unslop log appendable, the bundle readable, the
//! programs and assets the manifest and run.json name readable and executable, the system
//! directories the CLIs need; nothing else of the run directory (`RUN/tmp`, `RUN/turns`, the
//! lock, run.json) and nothing else of the machine. The runner's git gets the same domain with
//! `RUN/tmp`, where its bundles are, added. The domain's report goes to stderr at every turn.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use harness_confine::{Domain, SessionPaths};

use crate::config::Run;
use crate::error::RunError;
use crate::supervise::PreExec;

/// `RUN/session/tmp`: the CLI's `TMPDIR`, inside its own domain.
pub(crate) fn session_tmp(run: &Run) -> PathBuf {
    run.dir.join("session/tmp")
}

/// The paths every domain of this run grants.
fn session_paths(run: &Run, search_path: std::ffi::OsString) -> SessionPaths {
    let mut programs = vec![run.manifest.adapter.clone().into(), run.file.cli.clone().into()];
    programs.extend(run.manifest.assets.values().map(|asset| asset.path.clone().into()));
    SessionPaths {
        workspace: run.file.workspace.clone().into(),
        session_dir: run.dir.join("session"),
        bundle: run.bundle.clone(),
        read_files: Vec::new(),
        append_files: vec![run.dir.join("unslop.jsonl")],
        programs,
        installations: vec![run.file.cli.clone().into()],
        scratch: Vec::new(),
        sockets: vec![run.dir.join("tools.sock")],
        search_path: Some(search_path),
        connect_ports: run.file.connect_ports.clone(),
        network: harness_confine::Network::Host,
        listen: Vec::new(),
    }
}

/// Creates what a rule must find in place: `RUN/session/tmp` and an empty unslop log (0600,
/// never through a link; one that exists is left as it is).
fn prepare_paths(run: &Run) -> Result<(), RunError> {
    let tmp = session_tmp(run);
    match std::fs::DirBuilder::new().mode(0o700).create(&tmp) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => {
            return Err(RunError::io("create", &tmp)(error));
        }
    }
    let log = run.dir.join("unslop.jsonl");
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&log);
    match created {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(RunError::io("create", &log)(error)),
    }
}

/// The domain of turn `number`, whose request is `request`; logged to stderr. Under
/// `"required"`, a domain that cannot be built in full ends the run (exit 2).
pub(crate) fn turn_domain(
    run: &Run,
    number: u32,
    request: &std::path::Path,
    env: &crate::env::Environment,
) -> Result<Confined, RunError> {
    prepare_paths(run)?;
    let mut paths = session_paths(run, env.path());
    paths.read_files.push(request.to_path_buf());
    // Egress: a network namespace with loopback only, served by the runner (crate::egress), or
    // the machine's network for `"egress": "open"`.
    let plan = crate::egress::Plan::of(run, env);
    if let Some(plan) = &plan {
        paths.network = harness_confine::Network::Loopback;
        paths.listen = plan.listen();
        if let Some(ports) = &mut paths.connect_ports {
            ports.extend(plan.ports());
        }
    }
    // A rule follows a link; the log is granted only while it is a plain file, so a link put
    // there (by a session that ran unconfined before) never opens its target to the session.
    let log = run.dir.join("unslop.jsonl");
    if !std::fs::symlink_metadata(&log).is_ok_and(|meta| meta.file_type().is_file()) {
        tracing::warn!("{} is not a plain file; the session may not write it", log.display());
        paths.append_files.clear();
    }
    let domain = harness_confine::prepare(&paths.policy(run.file.confine))
        .map_err(|error| RunError::invalid(&run.dir, error.to_string()))?;
    tracing::info!(turn = number, "turn {number} confinement: {}", domain.report());
    let plan = plan.filter(|_| domain.isolates_network());
    match &plan {
        Some(plan) => tracing::info!(turn = number, "turn {number} {}", plan.describe()),
        None => tracing::info!(turn = number, "turn {number} egress: the machine's network"),
    }
    Ok(Confined { domain: Arc::new(domain), plan: plan.map(Arc::new), server: Mutex::default() })
}

/// The domain of the runner's git: the session's, with `RUN/tmp` (the bundles) added.
pub(crate) fn git_domain(run_paths: &GitPaths) -> Result<Confined, String> {
    harness_confine::prepare(&run_paths.paths.policy(run_paths.mode))
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
    paths: SessionPaths,
    mode: harness_confine::Mode,
}

impl GitPaths {
    pub(crate) fn new(run: &Run, search_path: std::ffi::OsString) -> Self {
        let mut paths = session_paths(run, search_path);
        paths.scratch.push(run.dir.join("tmp"));
        // git needs no network: its own namespace with loopback only.
        paths.network = harness_confine::Network::Loopback;
        Self { paths, mode: run.file.confine }
    }
}
