//! The session: claim, serve the tool socket, one turn per message, reply, stop.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use harness_bus::{
    Backends, Broker, BrokerConfig, BrokerError, Capability, NotAvailable, RefusalCode, ToolSocket,
    ToolSocketConfig, UnixBroker,
};
use harness_tools::Verb;
use harness_unslop::{NotesCursor, ResultNotes};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::{Run, load_run, read_capability};
use crate::env::Environment;
use crate::error::RunError;
use crate::files::{MAX_READ, read_capped, write_private};
use crate::git::{GitTools, LaunchTool};
use crate::request::{self, Message, MessageKind};
use crate::supervise::{become_subreaper, sweep_descendants};
use crate::turn::{TurnContext, TurnFiles, TurnOutcome, run_turn};

/// How long one broker call of the runner's own may take.
const BROKER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one broker call may take once a stop signal came: the runner is leaving.
const STOPPING_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a typed tool's broker request may take: the tool socket's limit (spec, Limits).
const TOOL_BROKER_TIMEOUT: Duration = Duration::from_secs(150);
/// How many handled message ids the runner state keeps.
const HANDLED_KEPT: usize = 256;

/// What the binary hands the runner.
#[derive(Debug)]
pub struct RunnerConfig {
    /// The run directory.
    pub run_dir: PathBuf,
    /// Set by the SIGTERM/SIGINT handlers, installed before anything else.
    pub stop: Arc<AtomicBool>,
    /// The runner's environment, read once as bytes: the founder-credential stop, the adapter's
    /// `PATH` and `passEnv` values and git's `PATH` all come from it, never from `std::env`.
    pub env: Environment,
}

/// How a run ended without an error: a stop signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Stopped before the role was claimed.
    BeforeClaim,
    /// Stopped after the claim; the role was released (or the release was tried).
    Released,
}

/// Installs the SIGTERM and SIGINT handlers and returns the flag they set. Call it first: as
/// PID 1 of a PID namespace, the runner never sees a signal it has no handler for.
pub fn install_stop_handlers() -> std::io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    Ok(stop)
}

/// Makes the process non-dumpable, so that a process of the same user (the session) can
/// neither ptrace it nor open its `/proc/PID/mem`, `environ` and the like, whatever the host's
/// Yama setting. Call it before the capability is read.
pub fn harden_process() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}

/// Runs a session to its end. `Ok` is exit 0; an error carries its exit code.
///
/// The capability is read from `stdin` on a thread of its own, so that a stop signal while the
/// host has not written it yet still ends the runner at once (exit 0, nothing claimed).
pub fn run<R: std::io::BufRead + Send + 'static>(
    config: &RunnerConfig,
    stdin: R,
) -> Result<Stopped, RunError> {
    let stopped = || config.stop.load(Ordering::SeqCst);
    if stopped() {
        return Ok(Stopped::BeforeClaim);
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stdin = stdin;
        let _ = sender.send(read_capability(&mut stdin));
    });
    let cap = loop {
        match receiver.recv_timeout(Duration::from_millis(20)) {
            Ok(cap) => break cap?,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if stopped() => {
                return Ok(Stopped::BeforeClaim);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(RunError::Stdin("stdin could not be read"));
            }
        }
    };
    // Before the first process is started (the CLI's --version): what any process the runner
    // starts leaves in a new session is reparented here, and killed on every way out below.
    become_subreaper().map_err(RunError::io("become a child subreaper", &config.run_dir))?;
    let result = claim_and_serve(config, cap);
    sweep_descendants();
    result
}

/// Everything after the capability: the run directory, the claim, the session.
fn claim_and_serve(config: &RunnerConfig, cap: Capability) -> Result<Stopped, RunError> {
    let stopped = || config.stop.load(Ordering::SeqCst);
    let run = load_run(&config.run_dir, &config.env)?;
    tracing::info!(
        run_dir = %run.dir.display(),
        run = %run.manifest.run,
        bundle_digest = %run.file.bundle_digest,
        cli = %run.file.cli,
        cli_version = %run.seal.cli_version().trim(),
        runner_version = env!("CARGO_PKG_VERSION"),
        confine = run.file.confine.as_str(),
        landlock_abi = harness_confine::kernel_abi(),
        "runner started"
    );
    // Before anything is written in the run directory or claimed: one runner per run directory.
    let _lock = crate::lock::lock_run_dir(&run.dir)?;
    let policy_path = run.bundle.join("policy.json");
    let policy = read_capped(&policy_path, MAX_READ)?
        .ok_or_else(|| RunError::invalid(&policy_path, "is missing"))?;
    crate::creds::check(&config.env, &policy, &policy_path)?;
    prepare_dirs(&run)?;
    if stopped() {
        return Ok(Stopped::BeforeClaim);
    }
    let mut session = Session::new(&run, cap, config);
    // Bound (not yet served) before the claim, so a path held by something else ends the run
    // with exit 2 and nothing claimed; dropped unserved, it removes its socket file.
    let socket = session.bind_socket()?;
    let result = match session.claim() {
        Ok(true) => session.serve(socket).map(|()| Stopped::Released),
        Ok(false) => Ok(Stopped::BeforeClaim),
        Err(error) => Err(error),
    };
    session.release();
    result
}

fn prepare_dirs(run: &Run) -> Result<(), RunError> {
    use std::os::unix::fs::DirBuilderExt;
    for path in ["turns", "session", "tmp"]
        .map(|dir| run.dir.join(dir))
        .into_iter()
        .chain([run.state_dir()])
    {
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {}
            Err(error)
                if error.kind() == std::io::ErrorKind::AlreadyExists
                    && std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir()) => {}
            Err(error) => return Err(RunError::io("create", path)(error)),
        }
    }
    for (name, text) in &run.file.session_files {
        let path = run.dir.join("session").join(name);
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(RunError::io("create", parent))?;
        }
        if std::fs::symlink_metadata(&path).is_err() {
            write_private(&path, text.as_bytes())?;
        }
    }
    Ok(())
}

/// The Claude Code session id must be a UUID; it is kept in `RUN/session/id` so that a runner
/// started again on the same run continues the same conversation. The session can write that
/// file: anything there that is not a UUID is replaced by a new id.
fn session_id(run: &Run) -> Result<String, RunError> {
    let path = run.dir.join("session/id");
    if let Ok(Some(bytes)) = read_capped(&path, 64) {
        let text = String::from_utf8_lossy(&bytes).trim().to_owned();
        if text.len() == 36 && text.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Ok(text);
        }
    }
    let _ = std::fs::remove_file(&path);
    let mut bytes = [0u8; 16];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty())
        .map_err(|error| RunError::io("draw a session id", &path)(error.into()))?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let id = format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    write_private(&path, id.as_bytes())?;
    Ok(id)
}

/// The number the next turn gets: one more than the last `turns/NNNN.stderr` or
/// `turns/NNNN.request`.
fn next_turn(run: &Run) -> u32 {
    std::fs::read_dir(run.dir.join("turns"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".stderr").or_else(|| name.strip_suffix(".request"))?;
            stem.parse::<u32>().ok()
        })
        .filter(|&number| number < 100_000_000)
        .max()
        .unwrap_or(0)
        + 1
}

/// The sender of a landing's outcome: once its RESULT arrives, land_work may start another.
pub const LANDING_SENDER: &str = "landing";

/// Refusal codes that mean the capability or the claim stopped working (exit 22).
const SESSION_INVALID: &[&str] = &[
    "capability-invalid",
    "capability-expired",
    "claim-revoked",
    "run-ended",
    "session-invalid",
    "not-claimed",
];

/// The runner's own state, kept in its state directory (run.json `stateDir`, by default
/// `RUN/state/`) across a restart on the same run directory.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RunnerState {
    /// The last messages this run directory's runners answered (their RESULT delivered or kept)
    /// or otherwise handled, newest last: a restarted runner marks such a message read again
    /// and never answers it twice.
    handled: VecDeque<Handled>,
    /// Where the unslop note stands.
    #[serde(default)]
    notes: Option<NotesCursor>,
}

/// One handled message: its id and the digest of what it said. A message counts as handled
/// only if both match, so whoever can write the state file (a session with bash while
/// confinement is off and the state directory is the default) cannot make the runner skip a
/// message it has not seen whole: at worst it makes the runner answer one twice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Handled {
    id: String,
    digest: String,
}

/// The SHA-256 of the message's `id`, `from`, `kind`, `sentAt` and `text` as the broker sent
/// them (any JSON, a malformed message's too), in hex.
fn message_digest(message: &Value) -> String {
    use sha2::Digest;
    let fields = ["id", "from", "kind", "sentAt", "text"]
        .map(|key| message.get(key).cloned().unwrap_or(Value::Null));
    let digest = sha2::Sha256::digest(Value::from(fields.to_vec()).to_string().as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The state file in the state directory.
const STATE_FILE: &str = "runner-state.json";

/// The outcome of a broker call the runner makes, a stop included.
enum Call {
    /// The broker answered.
    Done(Result<Value, BrokerError>),
    /// A stop came first; the call may still be under way, and its answer is dropped.
    Stopped,
}

struct Session<'a> {
    run: &'a Run,
    cap: Capability,
    broker: Arc<dyn Broker>,
    /// The same broker with a short timeout, for the calls after a stop.
    leaving: Arc<dyn Broker>,
    config: &'a RunnerConfig,
    /// True once the role is claimed, or a `role.claim` reached the broker and got no answer
    /// (the broker may have taken it): either way the run ends with `role.release`.
    claimed: bool,
    git: Option<Arc<GitTools>>,
    state: RunnerState,
}

/// A reply that must reach its sender before the message is marked read.
struct Pending {
    id: String,
    /// The digest of the message it answers.
    digest: String,
    from: String,
    result: harness_unslop::OutgoingResult,
    /// The turn it answers, for `turns/NNNN.unsent`; none for a malformed message.
    turn: Option<u32>,
}

impl<'a> Session<'a> {
    fn new(run: &'a Run, cap: Capability, config: &'a RunnerConfig) -> Self {
        let broker = |timeout| -> Arc<dyn Broker> {
            Arc::new(UnixBroker::new(BrokerConfig {
                socket: run.file.broker.clone().into(),
                timeout,
            }))
        };
        let git = run.file.git_socket.as_ref().map(|socket| {
            Arc::new(GitTools::new(
                socket.clone().into(),
                run.file.workspace.clone().into(),
                run.state_dir(),
                run.tools.projects.clone(),
                config.env.path(),
                crate::confinement::GitPaths::new(run),
            ))
        });
        let state = load_state(run);
        Self {
            run,
            cap,
            broker: broker(BROKER_TIMEOUT),
            leaving: broker(STOPPING_TIMEOUT),
            config,
            claimed: false,
            git,
            state,
        }
    }

    fn stopped(&self) -> bool {
        self.config.stop.load(Ordering::SeqCst)
    }

    /// Sleeps `pause` in small steps; returns true if and only if a stop came meanwhile.
    fn pause(&self, pause: Duration) -> bool {
        let step = Duration::from_millis(20);
        let mut slept = Duration::ZERO;
        while slept < pause {
            if self.stopped() {
                return true;
            }
            std::thread::sleep(step.min(pause - slept));
            slept += step;
        }
        self.stopped()
    }

    /// One broker call that a stop signal interrupts: it runs on a thread of its own and the
    /// runner stops waiting for it as soon as the stop comes. After the stop, calls go out with
    /// the short timeout.
    fn call(&self, verb: Verb, args: &Value) -> Call {
        if self.stopped() {
            return Call::Done(self.leaving.call(&self.cap, verb, args));
        }
        let (sender, receiver) = std::sync::mpsc::channel();
        let (broker, cap, owned) = (self.broker.clone(), self.cap.clone(), args.clone());
        let spawned = std::thread::Builder::new().name("broker-call".into()).spawn(move || {
            let _ = sender.send(broker.call(&cap, verb, &owned));
        });
        if spawned.is_err() {
            // No thread to spare: the call is made here, and a stop waits for its timeout.
            return Call::Done(self.broker.call(&self.cap, verb, args));
        }
        loop {
            match receiver.recv_timeout(Duration::from_millis(20)) {
                Ok(result) => return Call::Done(result),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if self.stopped() => {
                    return Call::Stopped;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Call::Done(Err(BrokerError::Protocol {
                        verb,
                        detail: "the call's thread ended without an answer".to_owned(),
                    }));
                }
            }
        }
    }

    /// `role.claim`, retried while the broker does not answer; false if a stop came first.
    /// A claim in flight when the stop comes may have been taken: it is released.
    fn claim(&mut self) -> Result<bool, RunError> {
        let args = json!({"run": self.run.manifest.run});
        let tries = self.run.file.broker_retries;
        for attempt in 1..=tries {
            if self.stopped() {
                return Ok(false);
            }
            match self.call(Verb::RoleClaim, &args) {
                Call::Stopped => {
                    self.claimed = true;
                    return Ok(false);
                }
                Call::Done(Ok(_)) => {
                    self.claimed = true;
                    tracing::info!(run = %self.run.manifest.run, attempt, "role claimed");
                    return Ok(true);
                }
                Call::Done(Err(BrokerError::Refused { code, .. })) => {
                    tracing::warn!(code = %code, "role.claim refused ({code})");
                    return Err(RunError::ClaimRefused { code });
                }
                Call::Done(Err(error)) if attempt == tries => {
                    self.claimed |= !matches!(error, BrokerError::Unreachable { .. });
                    return Err(RunError::BrokerUnreachable {
                        operation: "role.claim",
                        tries,
                        source: error,
                    });
                }
                Call::Done(Err(error)) => {
                    // Sent and unanswered (not refused at connect): it may have been taken.
                    self.claimed |= !matches!(error, BrokerError::Unreachable { .. });
                    tracing::warn!(attempt, "role.claim got no answer (try {attempt}): {error}");
                    if self.pause(self.run.poll_interval()) {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(false)
    }

    /// Releases the role, once, best effort: the run is ending either way. (The tool socket
    /// removes its own file, and only if that file is still the socket it bound.)
    fn release(&mut self) {
        if self.claimed {
            self.claimed = false;
            let broker = if self.stopped() { &self.leaving } else { &self.broker };
            match broker.call(&self.cap, Verb::RoleRelease, &json!({})) {
                Ok(_) => tracing::info!("role released"),
                Err(error) => tracing::warn!("role.release failed: {error}"),
            }
        }
    }

    /// Binds `RUN/tools.sock`: a stale socket there is replaced; a live socket, a file, a
    /// directory or a link is left alone and ends the run (exit 2).
    fn bind_socket(&self) -> Result<ToolSocket, RunError> {
        let launch: Arc<dyn harness_bus::Backend> = match &self.run.file.launch_socket {
            Some(socket) => Arc::new(LaunchTool::new(socket.clone().into())),
            None => Arc::new(NotAvailable),
        };
        let git: Arc<dyn harness_bus::Backend> = match &self.git {
            Some(git) => git.clone(),
            None => Arc::new(NotAvailable),
        };
        // A typed tool's broker request gets the tool socket's limit, not the runner's poll
        // timeout; the client never retries a call, so one the broker may have carried out is
        // never sent twice.
        let broker: Arc<dyn Broker> = Arc::new(UnixBroker::new(BrokerConfig {
            socket: self.run.file.broker.clone().into(),
            timeout: TOOL_BROKER_TIMEOUT,
        }));
        let backends = Backends { broker, launch, git };
        let path = self.run.dir.join("tools.sock");
        ToolSocket::bind(ToolSocketConfig {
            path: path.clone(),
            tools: self.run.tools.clone(),
            capability: self.cap.clone(),
            backends,
        })
        .map_err(|error| RunError::ToolSocket { path, source: Box::new(error) })
    }

    fn serve(&mut self, socket: ToolSocket) -> Result<(), RunError> {
        let path = socket.path().to_path_buf();
        let socket = socket
            .spawn()
            .map_err(|error| RunError::ToolSocket { path, source: Box::new(error) })?;
        let result = self.turns();
        socket.stop();
        result
    }

    /// Saves the runner state; a state that cannot be saved is said on stderr (the run goes
    /// on: what is lost is the guard against answering twice after a restart).
    fn save_state(&self, notes: &ResultNotes) {
        let mut state = RunnerState { handled: self.state.handled.clone(), notes: None };
        state.notes = Some(notes.cursor());
        if let Err(error) = save_state(self.run, &state) {
            tracing::warn!("the runner state could not be saved: {error}");
        }
    }

    /// True if and only if this message (its id and its digest) is answered already.
    fn is_handled(&self, id: &str, digest: &str) -> bool {
        self.state.handled.iter().any(|known| known.id == id && known.digest == digest)
    }

    /// Records that message `id` is answered or otherwise done with.
    fn handled(&mut self, id: &str, digest: &str, notes: &ResultNotes) {
        if !self.is_handled(id, digest) {
            self.state.handled.push_back(Handled { id: id.to_owned(), digest: digest.to_owned() });
        }
        while self.state.handled.len() > HANDLED_KEPT {
            self.state.handled.pop_front();
        }
        self.save_state(notes);
    }

    fn turns(&mut self) -> Result<(), RunError> {
        let session_id = session_id(self.run)?;
        let log = self.run.dir.join("unslop.jsonl");
        let mut notes = match self.state.notes.take() {
            Some(kept) => ResultNotes::resume(log, kept),
            None => ResultNotes::new(log),
        };
        // The message to mark read with the next `message.read`.
        let mut after: Option<String> = None;
        let mut pending: Option<Pending> = None;
        let mut failures = 0u32;
        let result = loop {
            if self.stopped() {
                tracing::info!("stop signal received; stopping");
                if let Some(reply) = pending.take() {
                    // Stopped while the broker had not taken it: the message stays unread (the
                    // next runner answers it again) and this RESULT is kept, not dropped.
                    self.keep_unsent(&reply, "the runner was stopped before the broker took it");
                }
                break Ok(());
            }
            if let Some(reply) = pending.take() {
                match self.send(&reply) {
                    Ok(()) => {
                        tracing::info!(
                            message_id = %reply.id,
                            to = %reply.from,
                            turn = reply.turn,
                            chars = reply.result.text().chars().count(),
                            "RESULT sent"
                        );
                        notes.sent(&reply.result);
                        // Delivered: recorded before anything else, so no runner answers it again.
                        self.handled(&reply.id, &reply.digest, &notes);
                        after = Some(reply.id.clone());
                        failures = 0;
                    }
                    Err(SendError::Stopped) => {
                        tracing::info!("stop signal received; stopping");
                        self.keep_unsent(&reply, "the runner was stopped while the broker had it");
                        break Ok(());
                    }
                    Err(SendError::Retry(error)) => {
                        if let Err(end) = self.unreachable(&mut failures, "message.send", error) {
                            self.keep_unsent(&reply, "the broker stayed unreachable");
                            break Err(end);
                        }
                        pending = Some(reply);
                        continue;
                    }
                    Err(SendError::Invalid(code)) => {
                        self.keep_unsent(&reply, &format!("message.send refused ({code})"));
                        break Err(RunError::SessionInvalid { operation: "message.send", code });
                    }
                    Err(SendError::Refused(code)) => {
                        // The reply cannot be delivered: keep it for the operator, keep its note
                        // for the next reply, and go on.
                        self.keep_unsent(&reply, &format!("message.send refused ({code})"));
                        self.handled(&reply.id, &reply.digest, &notes);
                        after = Some(reply.id.clone());
                    }
                }
            }
            // Whether this read handed over again the message it marked read.
            let handed_again: bool;
            let read_args = match &after {
                Some(id) => json!({"after": id}),
                None => json!({}),
            };
            let message = match self.call(Verb::MessageRead, &read_args) {
                Call::Stopped => {
                    tracing::info!("stop signal received; stopping");
                    break Ok(());
                }
                Call::Done(Ok(result)) => {
                    // The mark went through.
                    let marked = after.take();
                    let message = result.get("message").cloned().unwrap_or(Value::Null);
                    // A message without an id can never be marked read, and one handed over
                    // again by the read that marked it was not: a broker that keeps doing either
                    // is not answering, so those reads count as failures (below).
                    let id = message.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
                    handed_again = id.is_some() && id == marked.as_deref();
                    if message.is_null() || (id.is_some() && !handed_again) {
                        failures = 0;
                    }
                    message
                }
                Call::Done(Err(BrokerError::Refused { code, .. })) => {
                    tracing::warn!(code = %code, "message.read refused ({code})");
                    break Err(RunError::SessionInvalid { operation: "message.read", code });
                }
                Call::Done(Err(error)) => {
                    if let Err(end) = self.unreachable(&mut failures, "message.read", error) {
                        break Err(end);
                    }
                    continue;
                }
            };
            if message.is_null() {
                if self.pause(self.run.poll_interval()) {
                    tracing::info!("stop signal received; stopping");
                    break Ok(());
                }
                continue;
            }
            let digest = message_digest(&message);
            if let Some(id) = message.get("id").and_then(Value::as_str).filter(|id| !id.is_empty())
                && self.is_handled(id, &digest)
            {
                if handed_again {
                    // The broker handed it over again in answer to the read that marked it.
                    let error = BrokerError::Protocol {
                        verb: Verb::MessageRead,
                        detail: format!(
                            "message {id} was handed over again after it was marked read"
                        ),
                    };
                    if let Err(end) = self.unreachable(&mut failures, "message.read", error) {
                        break Err(end);
                    }
                } else {
                    // Answered before (this runner or one before it on this run directory) and
                    // not marked read, the mark lost with the broker or a stop: mark it now, no
                    // turn.
                    tracing::info!(
                        message_id = %id,
                        "message {id} was answered already; it is marked read again"
                    );
                }
                after = Some(id.to_owned());
                continue;
            }
            let parsed = harness_tools::json::from_value::<Message>(message.clone(), "")
                .map_err(|error| error.to_string());
            let message: Message = match parsed {
                Ok(message) => message,
                Err(reason) => match self.malformed(&message, &digest, &reason, &notes) {
                    Malformed::Answer(reply) => {
                        pending = Some(reply);
                        continue;
                    }
                    Malformed::Skip(id) => {
                        after = id;
                        if after.is_none() {
                            let error = BrokerError::Protocol {
                                verb: Verb::MessageRead,
                                detail: "a message without an id".to_owned(),
                            };
                            if let Err(end) = self.unreachable(&mut failures, "message.read", error)
                            {
                                break Err(end);
                            }
                        }
                        continue;
                    }
                },
            };
            // The seal (docs/bundle.md): no turn runs on a bundle changed since the start; the
            // run ends with exit 2 and the message stays unread.
            if let Err(source) = self.run.seal.recheck() {
                break Err(RunError::Bundle { path: self.run.bundle.clone(), source });
            }
            tracing::info!(
                message_id = %message.id,
                sender = %message.from,
                kind = ?message.kind,
                "message received; its turn starts"
            );
            let started = std::time::Instant::now();
            let (number, outcome) = match self.turn(&message, &session_id) {
                Ok(turn) => turn,
                Err(error) => break Err(error),
            };
            let (outcome_name, reason) = match &outcome {
                TurnOutcome::Answer(_) => ("answered", None),
                TurnOutcome::Failed(reason) => ("failed", Some(reason.as_str())),
                TurnOutcome::Stopped => ("stopped", None),
            };
            tracing::info!(
                message_id = %message.id,
                sender = %message.from,
                turn = number,
                duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                outcome = outcome_name,
                reason,
                "turn ended"
            );
            // Whatever the turn started and left behind (Pi's detached bash commands) goes now.
            let swept = sweep_descendants();
            if swept > 0 {
                tracing::info!(
                    turn = number,
                    swept,
                    "turn {number:04} left {swept} processes; killed"
                );
            }
            // What the log gained in this turn becomes the note on the next RESULT.
            notes.gather();
            let answer = match outcome {
                TurnOutcome::Stopped => {
                    tracing::info!("stop signal received; stopping");
                    break Ok(());
                }
                TurnOutcome::Answer(answer) => answer,
                TurnOutcome::Failed(reason) => format!("The turn failed: {reason}"),
            };
            if message.kind == MessageKind::Result
                && message.from == LANDING_SENDER
                && let Some(git) = &self.git
            {
                git.landing_done();
            }
            if message.kind == MessageKind::Result {
                // An incoming RESULT never gets an automatic reply; its note waits for one.
                self.handled(&message.id, &digest, &notes);
                after = Some(message.id.clone());
                continue;
            }
            let result = notes.compose(&answer);
            pending = Some(Pending {
                id: message.id.clone(),
                digest,
                from: message.from.clone(),
                result,
                turn: Some(number),
            });
        };
        self.save_state(&notes);
        if let Some(id) = after {
            self.mark_only(&id);
        }
        result
    }

    /// Marks `id` read without taking the next message (`message.read` with `after` and
    /// `limit: 0`), once, before the runner exits: a message answered and not yet marked.
    fn mark_only(&self, id: &str) {
        let broker = if self.stopped() { &self.leaving } else { &self.broker };
        if let Err(error) =
            broker.call(&self.cap, Verb::MessageRead, &json!({"after": id, "limit": 0}))
        {
            tracing::warn!(
                message_id = %id,
                "message {id} could not be marked read ({error}); its answer is recorded, so the \
                 next runner marks it and does not answer it again"
            );
        }
    }

    /// A message that does not parse: answered `The turn failed: malformed message: …` when
    /// its id and sender can be read, else skipped.
    fn malformed(
        &mut self,
        message: &Value,
        digest: &str,
        reason: &str,
        notes: &ResultNotes,
    ) -> Malformed {
        let id = message.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
        let from = message.get("from").and_then(Value::as_str).filter(|from| !from.is_empty());
        // The id as the broker sent it, when it is not one the runner can mark read.
        // What the broker sent is shown clipped: an id or a field's value can be any length.
        let shown = match (id, message.get("id")) {
            (Some(id), _) => clip(id),
            (None, Some(raw)) => {
                format!("with the id {} (not a non-empty string)", clip(&raw.to_string()))
            }
            (None, None) => "without an id".to_owned(),
        };
        let reason = &clip(reason);
        let outcome = match (id, from) {
            (Some(_), Some(_)) => "answered with the reason",
            (Some(_), None) => "skipped, marked read: it has no sender (`from`) to answer",
            (None, _) => {
                "skipped: without an id it cannot be marked read, so it counts as a broker failure"
            }
        };
        tracing::warn!(message_id = id, "malformed message {shown}: {reason}; {outcome}");
        match (id, from) {
            (Some(id), Some(from)) => Malformed::Answer(Pending {
                id: id.to_owned(),
                digest: digest.to_owned(),
                from: from.to_owned(),
                result: notes.compose(&format!("The turn failed: malformed message: {reason}")),
                turn: None,
            }),
            (Some(id), None) => {
                self.handled(id, digest, notes);
                Malformed::Skip(Some(id.to_owned()))
            }
            (None, _) => Malformed::Skip(None),
        }
    }

    /// One broker call failed without an answer; past `brokerRetries` in a row the run ends.
    fn unreachable(
        &self,
        failures: &mut u32,
        operation: &'static str,
        error: BrokerError,
    ) -> Result<(), RunError> {
        *failures += 1;
        tracing::warn!(
            operation,
            failures = *failures,
            broker_retries = self.run.file.broker_retries,
            "the broker did not answer ({failures}/{}): {error}",
            self.run.file.broker_retries
        );
        if *failures >= self.run.file.broker_retries {
            return Err(RunError::BrokerUnreachable { operation, tries: *failures, source: error });
        }
        let _ = self.pause(self.run.poll_interval());
        Ok(())
    }

    /// Reads the state, writes the request and runs the adapter; returns the turn's number.
    fn turn(&self, message: &Message, session_id: &str) -> Result<(u32, TurnOutcome), RunError> {
        let read_at = request::now_rfc3339();
        let state = match self.call(Verb::State, &json!({"cap": self.run.file.state_cap})) {
            Call::Stopped => return Ok((0, TurnOutcome::Stopped)),
            Call::Done(Ok(result)) => {
                request::state_block(&result, &read_at, self.run.file.state_cap)
                    .ok_or_else(|| "malformed-state".to_owned())
            }
            Call::Done(Err(BrokerError::Refused { code, .. }))
                if SESSION_INVALID.contains(&code.as_str()) =>
            {
                return Err(RunError::SessionInvalid { operation: "state", code });
            }
            Call::Done(Err(BrokerError::Refused { code, .. })) => Err(code.to_string()),
            Call::Done(Err(_)) => Err("broker-unreachable".to_owned()),
        };
        let header = format!("{}{}\n", request::header(message), message.text);
        let block = match state {
            Ok(block) => block,
            Err(code) => {
                // The turn fails without running the adapter; its files still mark it.
                let reason = format!("could not read the current state: {code}");
                let files = TurnFiles::claim_failed(
                    self.run,
                    next_turn(self.run),
                    format!("{reason}\n").as_bytes(),
                )?;
                return Ok((files.number, TurnOutcome::Failed(reason)));
            }
        };
        let text = format!("{block}\n{header}");
        let files = TurnFiles::claim(self.run, next_turn(self.run), text.as_bytes())?;
        let context = TurnContext {
            run: self.run,
            session_id,
            env: &self.config.env,
            stop: &self.config.stop,
        };
        Ok((files.number, run_turn(&context, &files)?))
    }

    /// Keeps a RESULT the broker did not take in `turns/NNNN.unsent` and says so on stderr.
    fn keep_unsent(&self, reply: &Pending, why: &str) {
        let kept = match reply.turn {
            Some(turn) => {
                let unsent = self.run.dir.join(format!("turns/{turn:04}.unsent"));
                match write_private(&unsent, reply.result.text().as_bytes()) {
                    Ok(()) => format!("it is kept in {}", unsent.display()),
                    Err(error) => format!("it could not be kept: {error}"),
                }
            }
            None => "it answered a malformed message and is not kept".to_owned(),
        };
        tracing::warn!(
            message_id = %reply.id,
            to = %reply.from,
            "the RESULT to message {} was not delivered: {why}; {kept}",
            reply.id
        );
    }

    fn send(&self, reply: &Pending) -> Result<(), SendError> {
        let args = json!({
            "to": reply.from,
            "replyTo": reply.id,
            "kind": "result",
            "text": reply.result.text(),
        });
        match self.call(Verb::MessageSend, &args) {
            Call::Stopped => Err(SendError::Stopped),
            Call::Done(Ok(_)) => Ok(()),
            Call::Done(Err(BrokerError::Refused { code, .. }))
                if SESSION_INVALID.contains(&code.as_str()) =>
            {
                Err(SendError::Invalid(code))
            }
            Call::Done(Err(BrokerError::Refused { code, .. })) => Err(SendError::Refused(code)),
            Call::Done(Err(error)) => Err(SendError::Retry(error)),
        }
    }
}

enum Malformed {
    /// Answer it with this reply.
    Answer(Pending),
    /// Skip it, marking it read if it has an id.
    Skip(Option<String>),
}

enum SendError {
    /// No answer: try again.
    Retry(BrokerError),
    /// A stop came while the send was under way.
    Stopped,
    /// The broker refused it: the capability or the claim stopped working (exit 22).
    Invalid(RefusalCode),
    /// The broker refused it otherwise.
    Refused(RefusalCode),
}

/// Reads the runner state; a missing or unreadable one starts empty (said on stderr).
fn load_state(run: &Run) -> RunnerState {
    let path = run.state_dir().join(STATE_FILE);
    match read_capped(&path, MAX_READ) {
        Ok(None) => RunnerState::default(),
        Ok(Some(bytes)) => {
            let mut state: RunnerState = serde_json::from_slice(&bytes).unwrap_or_else(|error| {
                tracing::warn!("{} is not valid ({error}); starting afresh", path.display());
                RunnerState::default()
            });
            // The newest entries only, however many the file holds.
            let extra = state.handled.len().saturating_sub(HANDLED_KEPT);
            state.handled.drain(..extra);
            state
        }
        Err(error) => {
            tracing::warn!("{error}; the runner state starts afresh");
            RunnerState::default()
        }
    }
}

/// Writes the runner state whole: a new file next to it, renamed over it.
fn save_state(run: &Run, state: &RunnerState) -> Result<(), RunError> {
    let dir = run.state_dir();
    let path = dir.join(STATE_FILE);
    let fresh = dir.join(format!("{STATE_FILE}.{}", std::process::id()));
    let bytes = serde_json::to_vec(state).map_err(|source| RunError::Json {
        path: path.clone(),
        source: harness_tools::json::JsonError { field: None, source },
    })?;
    let _ = std::fs::remove_file(&fresh);
    write_private(&fresh, &bytes)?;
    std::fs::rename(&fresh, &path).map_err(RunError::io("replace", &path))
}

/// The most of a broker's text a log line or a malformed message's RESULT repeats.
const CLIP_CHARS: usize = 200;

/// `text` up to [`CLIP_CHARS`] characters, `…` marking a cut.
fn clip(text: &str) -> String {
    match text.char_indices().nth(CLIP_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}
