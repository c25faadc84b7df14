//! The session: claim, serve the tool socket, one turn per message, reply, stop.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use harness_bus::{
    Backends, Broker, BrokerConfig, BrokerError, Capability, Message, NotAvailable, SessionClient,
    ToolSocket, ToolSocketConfig, UnixBroker,
};
use harness_contract::RunDir;
use harness_unslop::{NotesCursor, OutgoingResult, ResultNotes};
use serde::{Deserialize, Serialize};

use crate::config::{Run, load_run, read_capability};
use crate::dirs::RunDirs;
use crate::env::Environment;
use crate::error::RunError;
use crate::files::{MAX_READ, read_capped};
use crate::git::{GitTools, LaunchTool};
use crate::machine::{Effect, Event, HANDLED_KEPT, Handled, Machine, Op, Pending};
use crate::request;
use crate::supervise::{become_subreaper, sweep_descendants};
use crate::turn::{TurnContext, TurnFiles, TurnOutcome, run_turn};

/// How long one broker call of the runner's own may take.
const BROKER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one broker call may take once a stop signal came: the runner is leaving.
const STOPPING_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a typed tool's broker request may take: the tool socket's limit (spec, Limits).
const TOOL_BROKER_TIMEOUT: Duration = Duration::from_secs(150);

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
    let run = load_run(&config.run_dir)?;
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
    let dirs = prepare_dirs(&run)?;
    if stopped() {
        return Ok(Stopped::BeforeClaim);
    }
    let mut session = Session::new(&run, &dirs, cap, config);
    // Bound (not yet served) before the claim, so a path held by something else ends the run
    // with exit 2 and nothing claimed; dropped unserved, it removes its socket file.
    let socket = session.bind_socket()?;
    let (claimed, preflight) = claim_with_preflight(&mut session, &run, &dirs, config);
    let result = match (claimed, preflight) {
        // A turn cannot start: the launch fails before any message is read.
        (_, Err(error)) => Err(error),
        (Ok(true), Ok(true)) => session.serve(socket).map(|()| Stopped::Released),
        (Ok(_), Ok(_)) => Ok(Stopped::BeforeClaim),
        (Err(error), Ok(_)) => Err(error),
    };
    session.release();
    result
}

/// The claim and the launch preflight (preflight.rs). When the CLI's version was read from its
/// package, they run side by side and the claim does not wait for the CLI to start; otherwise
/// what the CLI prints is the version check, so the preflight comes first and a CLI of another
/// version ends the run with nothing claimed. `Ok(false)` from either is a stop.
fn claim_with_preflight(
    session: &mut Session<'_>,
    run: &Run,
    dirs: &RunDirs,
    config: &RunnerConfig,
) -> (Result<bool, RunError>, Result<bool, RunError>) {
    let preflight = || crate::preflight::preflight(run, dirs, &config.env, &config.stop);
    if !run.cli_version_known {
        return match preflight() {
            Ok(true) => (session.claim(), Ok(true)),
            other => (Ok(false), other),
        };
    }
    std::thread::scope(|scope| {
        let beside = scope.spawn(preflight);
        let claimed = session.claim();
        let checked = beside.join().unwrap_or_else(|_| {
            Err(RunError::Preflight {
                cli: run.file.cli.clone().into(),
                reason: "the preflight's thread panicked".to_owned(),
            })
        });
        (claimed, checked)
    })
}

/// Opens the run's directories once (creating them) and writes run.json's `sessionFiles` that
/// are not there yet, every one through the session directory's handle: a link the session
/// planted anywhere beneath it (`session/pi-agent -> /elsewhere`) ends the run naming it and is
/// never written through.
fn prepare_dirs(run: &Run) -> Result<RunDirs, RunError> {
    let dirs = RunDirs::open(run)?;
    for (name, text) in &run.file.session_files {
        let (parent, file) = match name.rsplit_once('/') {
            Some((parent, file)) => (Some(parent), file),
            None => (None, name.as_str()),
        };
        let beneath;
        let dir = match parent {
            Some(parent) => {
                beneath = dirs.session.subdirs(parent)?;
                &beneath
            }
            None => &dirs.session,
        };
        if !dir.exists(file) {
            dir.write_new(file, text.as_bytes())?;
        }
    }
    Ok(dirs)
}

/// The Claude Code session id must be a UUID; it is kept in `RUN/session/id` so that a runner
/// started again on the same run continues the same conversation. The session can write that
/// file: anything there that is not a UUID is replaced by a new id.
fn session_id(dirs: &RunDirs) -> Result<String, RunError> {
    let session = &dirs.session;
    if let Ok(Some(bytes)) = session.read_capped(RunDir::SESSION_ID, 64) {
        let text = String::from_utf8_lossy(&bytes).trim().to_owned();
        if text.len() == 36 && text.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Ok(text);
        }
    }
    session.remove(RunDir::SESSION_ID)?;
    let mut bytes = [0u8; 16];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()).map_err(
        |error| RunError::io("draw a session id", session.join(RunDir::SESSION_ID))(error.into()),
    )?;
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
    session.write_new(RunDir::SESSION_ID, id.as_bytes())?;
    Ok(id)
}

/// The number the next turn gets: one more than the last `turns/NNNN.stderr` or
/// `turns/NNNN.request`.
fn next_turn(dirs: &RunDirs) -> u32 {
    dirs.turns
        .names()
        .iter()
        .filter_map(|name| harness_contract::TurnFiles::number_of(name.to_str()?))
        .filter(|&number| number < 100_000_000)
        .max()
        .unwrap_or(0)
        + 1
}

/// The runner's own state, kept in its state directory (run.json `stateDir`, by default
/// `RUN/state/`) across a restart on the same run directory.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RunnerState {
    /// The last messages this run directory's runners answered (their RESULT delivered or kept)
    /// or otherwise handled, newest last: a restarted runner marks such a message read again
    /// and never answers it twice. A message counts as handled only if its id and its digest
    /// both match, so whoever can write the state file (a session with bash while confinement is
    /// off and the state directory is the default) cannot make the runner skip a message it has
    /// not seen whole: at worst it makes the runner answer one twice.
    handled: VecDeque<Handled>,
    /// Where the unslop note stands.
    #[serde(default)]
    notes: Option<NotesCursor>,
}

/// The state file in the state directory.
const STATE_FILE: &str = "runner-state.json";

/// The outcome of a broker call the runner makes, a stop included.
enum Call<T> {
    /// The broker answered.
    Done(T),
    /// A stop came first; the call may still be under way, and its answer is dropped.
    Stopped,
}

struct Session<'a> {
    run: &'a Run,
    dirs: &'a RunDirs,
    cap: Capability,
    client: SessionClient,
    /// The same broker with a short timeout, for the calls after a stop.
    leaving: SessionClient,
    config: &'a RunnerConfig,
    /// True once the role is claimed, or a `role.claim` reached the broker and got no answer
    /// (the broker may have taken it): either way the run ends with `role.release`.
    claimed: bool,
    git: Option<Arc<GitTools>>,
    state: RunnerState,
}

impl<'a> Session<'a> {
    fn new(run: &'a Run, dirs: &'a RunDirs, cap: Capability, config: &'a RunnerConfig) -> Self {
        let client = |timeout| {
            let broker: Arc<dyn Broker> = Arc::new(UnixBroker::new(BrokerConfig {
                socket: run.file.broker.clone().into(),
                timeout,
            }));
            SessionClient::new(broker, cap.clone())
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
        let state = load_state(dirs);
        Self {
            run,
            dirs,
            client: client(BROKER_TIMEOUT),
            leaving: client(STOPPING_TIMEOUT),
            cap,
            config,
            claimed: false,
            git,
            state,
        }
    }

    fn stopped(&self) -> bool {
        self.config.stop.load(Ordering::SeqCst)
    }

    /// The client for the next call: the short timeout once a stop came.
    fn client(&self) -> &SessionClient {
        if self.stopped() { &self.leaving } else { &self.client }
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
    fn call<T: Send + 'static>(
        &self,
        call: impl Fn(&SessionClient) -> T + Send + Sync + 'static,
    ) -> Call<T> {
        if self.stopped() {
            return Call::Done(call(&self.leaving));
        }
        let (sender, receiver) = std::sync::mpsc::channel();
        let (client, call) = (self.client.clone(), Arc::new(call));
        let on_thread = call.clone();
        let spawned = std::thread::Builder::new().name("broker-call".into()).spawn(move || {
            let _ = sender.send(on_thread(&client));
        });
        if spawned.is_err() {
            // No thread to spare: the call is made here, and a stop waits for its timeout.
            return Call::Done(call(&self.client));
        }
        loop {
            match receiver.recv_timeout(Duration::from_millis(20)) {
                Ok(result) => return Call::Done(result),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if self.stopped() => {
                    return Call::Stopped;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                // The thread ended without an answer (it panicked): as a stop would, the loop
                // ends keeping what it owes.
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Call::Stopped,
            }
        }
    }

    /// `role.claim`, retried while the broker does not answer; false if a stop came first.
    /// A claim in flight when the stop comes may have been taken: it is released.
    fn claim(&mut self) -> Result<bool, RunError> {
        let tries = self.run.file.broker_retries;
        for attempt in 1..=tries {
            if self.stopped() {
                return Ok(false);
            }
            let run = self.run.manifest.run.clone();
            match self.call(move |client| client.claim(&run)) {
                Call::Stopped => {
                    self.claimed = true;
                    return Ok(false);
                }
                Call::Done(Ok(())) => {
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
            match self.client().release() {
                Ok(()) => tracing::info!("role released"),
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
        let path = RunDir::new(&self.run.dir).tools_sock();
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
    fn save_state(&self, machine: &Machine<OutgoingResult>, notes: &ResultNotes) {
        let state = RunnerState { handled: machine.handled().clone(), notes: Some(notes.cursor()) };
        if let Err(error) = save_state(self.dirs, &state) {
            tracing::warn!("the runner state could not be saved: {error}");
        }
    }

    /// The turn loop: the state machine of `machine.rs`, with this shell doing what it asks.
    fn turns(&mut self) -> Result<(), RunError> {
        let session_id = session_id(self.dirs)?;
        let log = RunDir::new(&self.run.dir).unslop_log();
        let mut notes = match self.state.notes.take() {
            Some(kept) => ResultNotes::resume(log, kept),
            None => ResultNotes::new(log),
        };
        let handled = std::mem::take(&mut self.state.handled);
        let file = &self.run.file;
        let mut machine = Machine::new(file.broker_retries, file.state_cap, handled);
        let mut event = Event::Ready;
        loop {
            let step = machine.step(event);
            for effect in step.effects {
                self.apply(effect, &machine, &mut notes);
            }
            event = match step.op {
                Op::End { mark, exit } => {
                    self.save_state(&machine, &notes);
                    if let Some(id) = mark {
                        self.mark_only(&id);
                    }
                    return exit.map_err(RunError::from);
                }
                _ if self.stopped() => Event::Stop,
                Op::Read { after } => match self.call(move |c| c.read(after.as_deref())) {
                    Call::Done(result) => Event::Read(result),
                    Call::Stopped => Event::Stop,
                },
                Op::Pause if self.pause(self.run.poll_interval()) => Event::Stop,
                Op::Pause => Event::Ready,
                Op::ReadState => {
                    // The seal (docs/bundle.md): no turn runs on a bundle changed since the
                    // start; the run ends with exit 2 and the message stays unread.
                    if let Err(source) = self.run.seal.recheck() {
                        self.save_state(&machine, &notes);
                        return Err(RunError::Bundle { path: self.run.bundle.clone(), source });
                    }
                    let read_at = request::now_rfc3339();
                    let cap = self.run.file.state_cap;
                    match self.call(move |c| c.state(cap)) {
                        Call::Done(result) => Event::State { read_at, result },
                        Call::Stopped => Event::Stop,
                    }
                }
                Op::Turn { message, request } => {
                    let (number, outcome) = self.turn(&message, request, &session_id)?;
                    // What the log gained in this turn becomes the note on the next RESULT.
                    notes.gather();
                    Event::TurnEnded { number, outcome }
                }
                Op::Compose { text } => Event::Composed(notes.compose(&text)),
                Op::Send { to, reply_to, reply } => {
                    let text = reply.text().to_owned();
                    match self.call(move |c| c.send_result(&to, &reply_to, &text)) {
                        Call::Done(result) => Event::Sent(result),
                        Call::Stopped => Event::Stop,
                    }
                }
            };
        }
    }

    /// Does one effect the machine asked for.
    fn apply(
        &self,
        effect: Effect<OutgoingResult>,
        machine: &Machine<OutgoingResult>,
        notes: &mut ResultNotes,
    ) {
        match effect {
            Effect::NoteSent(result) => notes.sent(&result),
            Effect::SaveState => self.save_state(machine, notes),
            Effect::KeepUnsent { pending, why } => self.keep_unsent(&pending, &why),
            Effect::LandingDone => {
                if let Some(git) = &self.git {
                    git.landing_done();
                }
            }
        }
    }

    /// Marks `id` read without taking the next message (`message.read` with `after` and
    /// `limit: 0`), once, before the runner exits: a message answered and not yet marked.
    fn mark_only(&self, id: &str) {
        if let Err(error) = self.client().mark(id) {
            tracing::warn!(
                message_id = %id,
                "message {id} could not be marked read ({error}); its answer is recorded, so the \
                 next runner marks it and does not answer it again"
            );
        }
    }

    /// Writes the request and runs the adapter, or fails the turn without running it when the
    /// state could not be read; returns the turn's number and outcome. A request that cannot be
    /// written (a full disk) fails the turn with the reason, so the sender still gets an answer.
    fn turn(
        &self,
        message: &Message,
        request: Result<String, String>,
        session_id: &str,
    ) -> Result<(u32, TurnOutcome), RunError> {
        let started = std::time::Instant::now();
        let first = next_turn(self.dirs);
        let (number, outcome) = match request {
            Err(reason) => {
                // The turn fails without running the adapter; its files still mark it.
                let number = TurnFiles::claim_failed(
                    self.run,
                    self.dirs,
                    first,
                    format!("{reason}\n").as_bytes(),
                )
                .map_or(first, |files| files.number);
                (number, TurnOutcome::Failed(reason))
            }
            Ok(text) => match TurnFiles::claim(self.run, self.dirs, first, text.as_bytes()) {
                Err(error) => (
                    first,
                    TurnOutcome::Failed(format!("the request could not be written: {error}")),
                ),
                Ok(files) => {
                    let context = TurnContext {
                        run: self.run,
                        dirs: self.dirs,
                        session_id,
                        env: &self.config.env,
                        stop: &self.config.stop,
                    };
                    (files.number, run_turn(&context, &files)?)
                }
            },
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
            tracing::info!(turn = number, swept, "turn {number:04} left {swept} processes; killed");
        }
        Ok((number, outcome))
    }

    /// Keeps a RESULT the broker did not take in `turns/NNNN.unsent` and says so on stderr.
    fn keep_unsent(&self, reply: &Pending<OutgoingResult>, why: &str) {
        let kept = match reply.turn {
            Some(turn) => {
                let unsent = RunDir::new(&self.run.dir).turn(turn);
                let name = unsent.unsent_name();
                match self.dirs.turns.write_new(&name, reply.reply.text().as_bytes()) {
                    Ok(()) => format!("it is kept in {}", unsent.unsent().display()),
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
}

/// Reads the runner state; a missing or unreadable one starts empty (said on stderr).
fn load_state(dirs: &RunDirs) -> RunnerState {
    let path = dirs.state.join(STATE_FILE);
    match dirs.state.read_capped(STATE_FILE, MAX_READ) {
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

/// Writes the runner state whole: a new file next to it, renamed over it, both through the
/// state directory's handle. A new file that cannot be written whole (a full disk) or renamed
/// is removed, never left behind.
fn save_state(dirs: &RunDirs, state: &RunnerState) -> Result<(), RunError> {
    let fresh = format!("{STATE_FILE}.{}", std::process::id());
    let bytes = serde_json::to_vec(state).map_err(|source| RunError::Json {
        path: dirs.state.join(STATE_FILE),
        source: harness_tools::json::JsonError { field: None, source },
    })?;
    dirs.state.remove(&fresh)?;
    dirs.state.write_new(&fresh, &bytes)?;
    dirs.state.rename(&fresh, STATE_FILE).inspect_err(|_| {
        let _ = dirs.state.remove(&fresh);
    })
}
