//! The session: claim, serve the tool socket, one turn per message, reply, stop.

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use harness_tools::{
    Backends, Broker, BrokerConfig, BrokerError, Capability, NotAvailable, ToolSocket,
    ToolSocketConfig, UnixBroker, Verb,
};
use harness_unslop::ResultNotes;
use serde_json::{Value, json};

use crate::config::{Run, load_run, read_capability};
use crate::error::RunError;
use crate::git::{GitTools, LaunchTool};
use crate::request::{self, Message, MessageKind};
use crate::turn::{TurnFiles, TurnOutcome, run_turn, write_private};

/// How long one broker call may take.
const BROKER_TIMEOUT: Duration = Duration::from_secs(10);

/// What the binary hands the runner.
#[derive(Debug)]
pub struct RunnerConfig {
    /// The run directory.
    pub run_dir: PathBuf,
    /// Set by the SIGTERM/SIGINT handlers, installed before anything else.
    pub stop: Arc<AtomicBool>,
    /// The runner's environment, for the founder-credential stop.
    pub env: Vec<(String, String)>,
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

/// Runs a session to its end. `Ok` is exit 0; an error carries its exit code.
///
/// The capability is read from `stdin` on a thread of its own, so that a stop signal while the
/// host has not written it yet still ends the runner at once (exit 0, nothing claimed).
pub fn run<R: BufRead + Send + 'static>(
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
                return Err(RunError::BadRun("stdin could not be read".to_owned()));
            }
        }
    };
    let run = load_run(&config.run_dir)?;
    // Before anything is written in the run directory or claimed: one runner per run directory.
    let _lock = crate::lock::lock_run_dir(&run.dir)?;
    let policy = std::fs::read(run.bundle.join("policy.json")).map_err(|error| {
        RunError::BadRun(format!("cannot read the bundle's policy.json: {error}"))
    })?;
    crate::creds::check(&config.env, &policy)?;
    prepare_dirs(&run)?;
    if stopped() {
        return Ok(Stopped::BeforeClaim);
    }
    let broker: Arc<dyn Broker> = Arc::new(UnixBroker::new(BrokerConfig {
        socket: run.file.broker.clone(),
        timeout: BROKER_TIMEOUT,
    }));
    let mut session = Session::new(&run, cap, broker, &config.stop);
    // Bound (not yet served) before the claim, so a path held by something else ends the run
    // with exit 2 and nothing claimed; dropped unserved, it removes its socket file.
    let socket = session.bind_socket()?;
    if !session.claim()? {
        return Ok(Stopped::BeforeClaim);
    }
    let result = session.serve(socket);
    session.release();
    result.map(|()| Stopped::Released)
}

fn prepare_dirs(run: &Run) -> Result<(), RunError> {
    use std::os::unix::fs::DirBuilderExt;
    for dir in ["turns", "session", "tmp"] {
        let path = run.dir.join(dir);
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => {}
            Err(error) => {
                return Err(RunError::BadRun(format!("cannot create {}: {error}", path.display())));
            }
        }
    }
    for (name, text) in &run.file.session_files {
        let path = run.dir.join("session").join(name);
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(
                |error| RunError::BadRun(format!("cannot create {}: {error}", parent.display())),
            )?;
        }
        if !path.exists() {
            write_private(&path, text.as_bytes())?;
        }
    }
    Ok(())
}

/// The Claude Code session id must be a UUID; it is kept in `RUN/session/id` so that a runner
/// started again on the same run continues the same conversation.
fn session_id(run: &Run) -> Result<String, RunError> {
    let path = run.dir.join("session/id");
    if let Ok(text) = std::fs::read_to_string(&path) {
        return Ok(text.trim().to_owned());
    }
    let mut bytes = [0u8; 16];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty())
        .map_err(|error| RunError::BadRun(format!("no randomness for a session id: {error}")))?;
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

/// The number the next turn gets: one more than the last `turns/NNNN.stderr`.
fn next_turn(run: &Run) -> u32 {
    std::fs::read_dir(run.dir.join("turns"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".stderr")?.parse::<u32>().ok()
        })
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

struct Session<'a> {
    run: &'a Run,
    cap: Capability,
    broker: Arc<dyn Broker>,
    stop: &'a AtomicBool,
    claimed: bool,
    git: Option<Arc<GitTools>>,
}

/// A reply that must reach its sender before the message is marked read.
struct Pending {
    message: Message,
    result: harness_unslop::OutgoingResult,
    turn: u32,
}

impl<'a> Session<'a> {
    fn new(run: &'a Run, cap: Capability, broker: Arc<dyn Broker>, stop: &'a AtomicBool) -> Self {
        let git = run.file.git_socket.as_ref().map(|socket| {
            Arc::new(GitTools::new(
                socket.clone(),
                run.file.workspace.clone(),
                run.dir.join("tmp"),
                run.tools.projects.clone(),
            ))
        });
        Self { run, cap, broker, stop, claimed: false, git }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
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

    fn call(&self, verb: Verb, args: &Value) -> Result<Value, BrokerError> {
        self.broker.call(&self.cap, verb, args)
    }

    /// `role.claim`, retried while the broker does not answer; false if a stop came first.
    fn claim(&mut self) -> Result<bool, RunError> {
        let args = json!({"run": self.run.manifest.run});
        for attempt in 1..=self.run.file.broker_retries {
            if self.stopped() {
                return Ok(false);
            }
            match self.call(Verb::RoleClaim, &args) {
                Ok(_) => {
                    self.claimed = true;
                    return Ok(true);
                }
                Err(BrokerError::Refused { code, .. }) => {
                    return Err(RunError::ClaimRefused(code.to_string()));
                }
                Err(error) if attempt == self.run.file.broker_retries => {
                    return Err(RunError::BrokerUnreachable(format!(
                        "role.claim got no answer in {attempt} tries: {error}"
                    )));
                }
                Err(error) => {
                    eprintln!("harness-runner: role.claim got no answer (try {attempt}): {error}");
                    if self.pause(self.run.poll_interval()) {
                        return Ok(false);
                    }
                }
            }
        }
        Err(RunError::BrokerUnreachable("role.claim got no answer".to_owned()))
    }

    /// Releases the role, once, best effort: the run is ending either way. (The tool socket
    /// removes its own file, and only if that file is still the socket it bound.)
    fn release(&mut self) {
        if self.claimed {
            self.claimed = false;
            if let Err(error) = self.call(Verb::RoleRelease, &json!({})) {
                eprintln!("harness-runner: role.release failed: {error}");
            }
        }
    }

    /// Binds `RUN/tools.sock`: a stale socket there is replaced; a live socket, a file, a
    /// directory or a link is left alone and ends the run (exit 2).
    fn bind_socket(&self) -> Result<ToolSocket, RunError> {
        let launch: Arc<dyn harness_tools::Backend> = match &self.run.file.launch_socket {
            Some(socket) => Arc::new(LaunchTool::new(socket.clone())),
            None => Arc::new(NotAvailable),
        };
        let git: Arc<dyn harness_tools::Backend> = match &self.git {
            Some(git) => git.clone(),
            None => Arc::new(NotAvailable),
        };
        let backends = Backends { broker: self.broker.clone(), launch, git };
        ToolSocket::bind(ToolSocketConfig {
            path: self.run.dir.join("tools.sock"),
            tools: self.run.tools.clone(),
            capability: self.cap.clone(),
            backends,
        })
        .map_err(|error| RunError::BadRun(format!("cannot serve the tool socket: {error}")))
    }

    fn serve(&mut self, socket: ToolSocket) -> Result<(), RunError> {
        let socket = socket
            .spawn()
            .map_err(|error| RunError::BadRun(format!("cannot serve the tool socket: {error}")))?;
        let result = self.turns();
        socket.stop();
        result
    }

    fn turns(&mut self) -> Result<(), RunError> {
        let session_id = session_id(self.run)?;
        let mut notes = ResultNotes::new(self.run.dir.join("unslop.jsonl"));
        let mut after: Option<String> = None;
        let mut pending: Option<Pending> = None;
        let mut failures = 0u32;
        loop {
            if self.stopped() {
                if let Some(reply) = pending.take() {
                    // Stopped while the broker had not taken it: the message stays unread (the
                    // next runner answers it again) and this RESULT is kept, not dropped.
                    self.keep_unsent(&reply, "the runner was stopped before the broker took it");
                }
                return Ok(());
            }
            if let Some(reply) = pending.take() {
                match self.send(&reply) {
                    Ok(()) => {
                        notes.sent(&reply.result);
                        after = Some(reply.message.id.clone());
                        failures = 0;
                    }
                    Err(SendError::Retry(error)) => {
                        if let Err(end) = self.unreachable(&mut failures, &error) {
                            self.keep_unsent(&reply, "the broker stayed unreachable");
                            return Err(end);
                        }
                        pending = Some(reply);
                        continue;
                    }
                    Err(SendError::Refused(code)) => {
                        // The reply cannot be delivered: keep it for the operator, keep its note
                        // for the next reply, and go on.
                        self.keep_unsent(&reply, &format!("message.send refused ({code})"));
                        after = Some(reply.message.id.clone());
                    }
                }
            }
            let read_args = match &after {
                Some(id) => json!({"after": id}),
                None => json!({}),
            };
            let message = match self.call(Verb::MessageRead, &read_args) {
                Ok(result) => {
                    failures = 0;
                    result.get("message").cloned().unwrap_or(Value::Null)
                }
                Err(BrokerError::Refused { code, .. }) => {
                    return Err(RunError::SessionInvalid(format!("message.read refused: {code}")));
                }
                Err(error) => {
                    self.unreachable(&mut failures, &error.to_string())?;
                    continue;
                }
            };
            if message.is_null() {
                if self.pause(self.run.poll_interval()) {
                    return Ok(());
                }
                continue;
            }
            let message: Message = match serde_json::from_value(message.clone()) {
                Ok(message) => message,
                Err(error) => {
                    // A message without a usable shape cannot be answered; mark it read if it has
                    // an id, so one bad message cannot stop the session.
                    eprintln!("harness-runner: a malformed message was skipped: {error}");
                    match message.get("id").and_then(Value::as_str) {
                        Some(id) => after = Some(id.to_owned()),
                        None => self.unreachable(
                            &mut failures,
                            "message.read returned a message without an id",
                        )?,
                    }
                    continue;
                }
            };
            // The seal (docs/bundle.md): no turn runs on a bundle changed since the start; the
            // run ends with exit 2 and the message stays unread.
            self.run.seal.recheck().map_err(|error| RunError::BadRun(error.to_string()))?;
            let number = next_turn(self.run);
            let outcome = self.turn(&message, number, &session_id)?;
            // What the log gained in this turn becomes the note on the next RESULT.
            notes.gather();
            let answer = match outcome {
                TurnOutcome::Stopped => return Ok(()),
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
                after = Some(message.id.clone());
                continue;
            }
            let result = notes.compose(&answer);
            pending = Some(Pending { message, result, turn: number });
        }
    }

    /// One broker call failed without an answer; past `brokerRetries` in a row the run ends.
    fn unreachable(&self, failures: &mut u32, error: &str) -> Result<(), RunError> {
        *failures += 1;
        eprintln!(
            "harness-runner: the broker did not answer ({failures}/{}): {error}",
            self.run.file.broker_retries
        );
        if *failures >= self.run.file.broker_retries {
            return Err(RunError::BrokerUnreachable(format!(
                "{failures} broker polls in a row failed; the last: {error}"
            )));
        }
        let _ = self.pause(self.run.poll_interval());
        Ok(())
    }

    /// Reads the state, writes the request and runs the adapter.
    fn turn(
        &self,
        message: &Message,
        number: u32,
        session_id: &str,
    ) -> Result<TurnOutcome, RunError> {
        let files = TurnFiles::new(self.run, number);
        let read_at = request::now_rfc3339();
        let state = match self.call(Verb::State, &json!({"cap": self.run.file.state_cap})) {
            Ok(result) => request::state_block(&result, &read_at, self.run.file.state_cap)
                .ok_or_else(|| "malformed-state".to_owned()),
            Err(BrokerError::Refused { code, .. }) if SESSION_INVALID.contains(&code.as_str()) => {
                return Err(RunError::SessionInvalid(format!("state refused: {code}")));
            }
            Err(BrokerError::Refused { code, .. }) => Err(code.to_string()),
            Err(_) => Err("broker-unreachable".to_owned()),
        };
        let block = match state {
            Ok(block) => block,
            Err(code) => {
                // The turn fails without running the adapter; its stderr file still marks it.
                write_private(
                    &files.stderr,
                    format!("could not read the current state: {code}\n").as_bytes(),
                )?;
                return Ok(TurnOutcome::Failed(format!(
                    "could not read the current state: {code}"
                )));
            }
        };
        let text = format!("{block}\n{}{}\n", request::header(message), message.text);
        write_private(&files.request, text.as_bytes())?;
        run_turn(self.run, &files, session_id, self.stop)
    }

    /// Keeps a RESULT the broker did not take in `turns/NNNN.unsent` and says so on stderr.
    fn keep_unsent(&self, reply: &Pending, why: &str) {
        let unsent = self.run.dir.join(format!("turns/{:04}.unsent", reply.turn));
        let kept = match write_private(&unsent, reply.result.text().as_bytes()) {
            Ok(()) => format!("it is kept in {}", unsent.display()),
            Err(error) => format!("it could not be kept: {error}"),
        };
        eprintln!(
            "harness-runner: the RESULT to message {} was not delivered: {why}; {kept}",
            reply.message.id
        );
    }

    fn send(&self, reply: &Pending) -> Result<(), SendError> {
        let args = json!({
            "to": reply.message.from,
            "replyTo": reply.message.id,
            "kind": "result",
            "text": reply.result.text(),
        });
        match self.call(Verb::MessageSend, &args) {
            Ok(_) => Ok(()),
            Err(BrokerError::Refused { code, .. }) => Err(SendError::Refused(code.to_string())),
            Err(error) => Err(SendError::Retry(error.to_string())),
        }
    }
}

enum SendError {
    /// No answer: try again.
    Retry(String),
    /// The broker refused it.
    Refused(String),
}

/// Reads the environment as pairs, for [`RunnerConfig::env`].
pub fn environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(key, value)| Some((key.into_string().ok()?, value.into_string().ok()?)))
        .collect()
}
