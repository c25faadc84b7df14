//! A scripted broker speaking docs/contracts.md, contract 4 (`docs/protocol.md`), for any test.
//!
//! It binds a Unix socket in its own temporary directory, answers every request line from a
//! per-verb script (a sticky answer, with one-shot answers queued in front of it), and records
//! every call, capability included, so a test can assert what reached the broker. A verb with no
//! answer is refused with `unscripted`, so a test never hangs on a forgotten line.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

/// How the scripted broker answers one call.
#[derive(Debug, Clone, PartialEq)]
pub enum BrokerAnswer {
    /// `{"id", "ok": true, "result": VALUE}`.
    Result(Value),
    /// `{"id", "ok": false, "code": CODE, "message": MESSAGE}`.
    Refuse {
        /// The refusal code.
        code: String,
        /// The message.
        message: String,
    },
    /// This line, sent as is (a newline is added), for malformed-reply tests.
    Raw(String),
    /// No answer at all for this long, then the connection is closed.
    Silence(Duration),
    /// This result, but only after this long (a broker that is slow, not gone).
    Late(Duration, Value),
}

impl BrokerAnswer {
    /// A result.
    pub fn result(value: Value) -> Self {
        Self::Result(value)
    }

    /// A refusal with `code` and a message naming it.
    pub fn refuse(code: impl Into<String>) -> Self {
        let code = code.into();
        Self::Refuse { message: format!("scripted refusal: {code}"), code }
    }
}

/// One call the scripted broker received.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerCall {
    /// The request's `id`.
    pub id: Value,
    /// The request's `cap`.
    pub cap: String,
    /// The request's `verb`.
    pub verb: String,
    /// The request's `args`.
    pub args: Value,
}

#[derive(Debug, Default)]
struct State {
    sticky: BTreeMap<String, BrokerAnswer>,
    once: BTreeMap<String, VecDeque<BrokerAnswer>>,
    calls: Vec<BrokerCall>,
    malformed: Vec<String>,
}

/// A running scripted broker; dropping it stops it and removes its socket.
pub struct ScriptedBroker {
    dir: TempDir,
    socket: PathBuf,
    state: Arc<Mutex<State>>,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for ScriptedBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedBroker")
            .field("socket", &self.socket)
            .field("state", &*self.lock())
            .finish_non_exhaustive()
    }
}

impl ScriptedBroker {
    /// Binds `broker.sock` in a new temporary directory and serves it from a background thread.
    pub fn start() -> io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("harness-broker-").tempdir()?;
        let socket = dir.path().join("broker.sock");
        let listener = UnixListener::bind(&socket)?;
        let state = Arc::new(Mutex::new(State::default()));
        let stopping = Arc::new(AtomicBool::new(false));
        let thread = thread::Builder::new().name("scripted-broker".into()).spawn({
            let (state, stopping) = (state.clone(), stopping.clone());
            move || accept(&listener, &state, &stopping)
        })?;
        Ok(Self { dir, socket, state, stopping, thread: Some(thread) })
    }

    /// Returns the broker's socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Returns the temporary directory the socket is in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Answers every call of `verb` with `answer`, after any one-shot answers.
    pub fn answer(&self, verb: &str, answer: BrokerAnswer) -> &Self {
        self.lock().sticky.insert(verb.to_owned(), answer);
        self
    }

    /// Answers the next call of `verb` that has no earlier one-shot answer with `answer`.
    pub fn answer_once(&self, verb: &str, answer: BrokerAnswer) -> &Self {
        self.lock().once.entry(verb.to_owned()).or_default().push_back(answer);
        self
    }

    /// Returns every call received so far, in arrival order.
    pub fn calls(&self) -> Vec<BrokerCall> {
        self.lock().calls.clone()
    }

    /// Returns the calls of `verb`, in arrival order.
    pub fn calls_of(&self, verb: &str) -> Vec<BrokerCall> {
        self.lock().calls.iter().filter(|call| call.verb == verb).cloned().collect()
    }

    /// Returns the request lines that were not contract-4 requests.
    pub fn malformed(&self) -> Vec<String> {
        self.lock().malformed.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

impl Drop for ScriptedBroker {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = UnixStream::connect(&self.socket);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Every change under the lock is a single push or insert, so a poisoned lock still guards
/// consistent data.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn accept(listener: &UnixListener, state: &Arc<Mutex<State>>, stopping: &AtomicBool) {
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let state = state.clone();
        let _ = thread::Builder::new()
            .name("scripted-broker-conn".into())
            .spawn(move || serve(&stream, &state));
    }
}

fn serve(stream: &UnixStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let answer = decide(state, line.trim_end());
        let reply = match answer {
            Reply::Line(reply) => reply,
            Reply::Late(pause, reply) => {
                thread::sleep(pause);
                reply
            }
            Reply::Silence(pause) => {
                thread::sleep(pause);
                return;
            }
        };
        let mut writer = stream;
        if writer.write_all(reply.as_bytes()).and_then(|()| writer.write_all(b"\n")).is_err() {
            return;
        }
    }
}

enum Reply {
    Line(String),
    Late(Duration, String),
    Silence(Duration),
}

fn decide(state: &Mutex<State>, line: &str) -> Reply {
    let request: Option<Value> = serde_json::from_str(line).ok();
    let parsed = request.as_ref().and_then(|request| {
        Some(BrokerCall {
            id: request.get("id")?.clone(),
            cap: request.get("cap")?.as_str()?.to_owned(),
            verb: request.get("verb")?.as_str()?.to_owned(),
            args: request.get("args").cloned().unwrap_or(Value::Null),
        })
    });
    let mut state = lock(state);
    let Some(call) = parsed else {
        state.malformed.push(line.to_owned());
        let id = request.as_ref().and_then(|r| r.get("id").cloned()).unwrap_or(Value::Null);
        let reply = json!({"id": id, "ok": false, "code": "bad-request",
            "message": "scripted broker: not a contract-4 request"});
        return Reply::Line(reply.to_string());
    };
    let answer = state
        .once
        .get_mut(&call.verb)
        .and_then(VecDeque::pop_front)
        .or_else(|| state.sticky.get(&call.verb).cloned())
        .unwrap_or_else(|| BrokerAnswer::Refuse {
            code: "unscripted".to_owned(),
            message: format!("scripted broker: no answer for {:?}", call.verb),
        });
    let id = call.id.clone();
    state.calls.push(call);
    match answer {
        BrokerAnswer::Result(result) => {
            Reply::Line(json!({"id": id, "ok": true, "result": result}).to_string())
        }
        BrokerAnswer::Refuse { code, message } => Reply::Line(
            json!({"id": id, "ok": false, "code": code, "message": message}).to_string(),
        ),
        BrokerAnswer::Raw(line) => Reply::Line(line),
        BrokerAnswer::Silence(pause) => Reply::Silence(pause),
        BrokerAnswer::Late(pause, result) => {
            Reply::Late(pause, json!({"id": id, "ok": true, "result": result}).to_string())
        }
    }
}
