//! The scripted Messages API: an HTTP server on 127.0.0.1 that answers `POST /v1/messages` from a
//! script, streams each reply as Server-Sent Events, and logs every request.
//!
//! Anything the script did not foresee gets an immediate HTTP 400 instead of a hang, so a CLI that
//! asks one question too many fails fast and the test can say exactly which request it was.
//! Responses are written by hand (status line, `Content-Length`, `Connection: close`) because
//! tiny_http refuses to let a handler set `Connection`, and both CLIs were measured against a server
//! that closed the connection after `message_stop`.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::Value;
use tiny_http::{Request, Server};

use crate::recorded::{Outcome, RecordedRequest};
use crate::script::{Reply, Script, error_body};

/// A running scripted Messages API; dropping it stops the server thread.
pub struct ScriptedModel {
    server: Arc<Server>,
    base_url: String,
    state: Arc<Mutex<State>>,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // tiny_http's server has no Debug; the URL and the log say everything useful.
        f.debug_struct("ScriptedModel")
            .field("base_url", &self.base_url)
            .field("state", &*self.lock())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct State {
    script: Script,
    next_reply: usize,
    log: Vec<RecordedRequest>,
}

impl ScriptedModel {
    /// Binds 127.0.0.1 on a free port and serves `script` from a background thread.
    pub fn start(script: Script) -> io::Result<Self> {
        let server = Server::http("127.0.0.1:0").map_err(io::Error::other)?;
        let Some(addr) = server.server_addr().to_ip() else {
            return Err(io::Error::other("scripted model: the server is not listening on TCP"));
        };
        let server = Arc::new(server);
        let state = Arc::new(Mutex::new(State { script, next_reply: 0, log: Vec::new() }));
        let stopping = Arc::new(AtomicBool::new(false));
        let thread = thread::Builder::new().name("scripted-model".into()).spawn({
            let (server, state, stopping) = (server.clone(), state.clone(), stopping.clone());
            move || serve(&server, &state, &stopping)
        })?;
        Ok(Self {
            server,
            base_url: format!("http://{addr}"),
            state,
            stopping,
            thread: Some(thread),
        })
    }

    /// Returns `http://127.0.0.1:PORT`, without a trailing slash or `/v1` (both CLIs append
    /// `/v1/messages` themselves).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Returns every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().log.clone()
    }

    /// Returns the Messages API calls (`POST /v1/messages`) received so far, in arrival order,
    /// leaving out probes such as `HEAD /api/hello` and requests to unknown paths.
    pub fn messages_calls(&self) -> Vec<RecordedRequest> {
        self.lock().log.iter().filter(|r| r.is_messages_call()).cloned().collect()
    }

    /// Appends `replies` to the running model's script. This is for replies that name something
    /// known only once the model runs, such as a file in a [`crate::CliSandbox`]'s work directory
    /// (the sandbox is built from the model).
    pub fn push_replies(&self, replies: impl IntoIterator<Item = Reply>) {
        let mut state = self.lock();
        for reply in replies {
            state.script.push(reply);
        }
    }

    /// Returns the number of scripted replies not yet requested.
    pub fn replies_left(&self) -> usize {
        let state = self.lock();
        state.script.len().saturating_sub(state.next_reply)
    }

    /// Panics unless every scripted reply was requested and no request went unscripted; the
    /// message lists the unscripted requests and the number of replies never requested.
    pub fn assert_finished(&self) {
        let problems = {
            let state = self.lock();
            let mut problems: Vec<String> = state
                .log
                .iter()
                .filter_map(|request| match &request.outcome {
                    Outcome::Unscripted(reason) => Some(format!(
                        "request #{} ({} {}) was not scripted: {reason}",
                        request.number, request.method, request.url
                    )),
                    Outcome::Reply(_) | Outcome::Probe => None,
                })
                .collect();
            let left = state.script.len().saturating_sub(state.next_reply);
            if left > 0 {
                problems.push(format!(
                    "{left} of the script's {} replies were never requested",
                    state.script.len()
                ));
            }
            problems
        };
        // The lock is released first, so the panic does not poison it for a later look at the log.
        if !problems.is_empty() {
            panic!(
                "scripted model: the conversation did not go as scripted:\n  {}",
                problems.join("\n  ")
            );
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        // The flag tells the serving loop that the coming wake-up is a shutdown, not an error.
        self.stopping.store(true, Ordering::SeqCst);
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            // A panic in the serving thread has already been printed; a destructor must not panic.
            let _ = thread.join();
        }
    }
}

/// Every change under the lock is a single push or counter bump, so even a poisoned lock guards
/// consistent data and the log stays readable.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn serve(server: &Server, state: &Mutex<State>, stopping: &AtomicBool) {
    loop {
        match server.recv() {
            Ok(request) => handle(request, state),
            Err(_) if stopping.load(Ordering::SeqCst) => return,
            // An accept error (say, out of file descriptors) is worth another try, not a dead
            // server; the pause keeps a persistent error from spinning a core.
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// What to send back for one request.
struct Answer {
    status: u16,
    content_type: &'static str,
    body: String,
}

fn handle(mut request: Request, state: &Mutex<State>) {
    let method = request.method().as_str().to_owned();
    let url = request.url().to_owned();
    let path = url.split_once('?').map_or(url.as_str(), |(path, _)| path).to_owned();
    let headers = request
        .headers()
        .iter()
        .map(|h| (h.field.as_str().as_str().to_owned(), h.value.as_str().to_owned()))
        .collect();
    let mut bytes = Vec::new();
    let read_error = request.as_reader().read_to_end(&mut bytes).err();
    let raw_body = String::from_utf8_lossy(&bytes).into_owned();
    let body: Option<Value> = serde_json::from_slice(&bytes).ok();

    // Recording happens before answering, so a test that sees the CLI exit also sees its request.
    let answer = {
        let mut state = lock(state);
        let number = state.log.len() + 1;
        let (outcome, answer) =
            decide(&mut state, number, &method, &path, read_error.as_ref(), body.as_ref());
        state.log.push(RecordedRequest {
            number,
            method: method.clone(),
            url,
            path,
            headers,
            raw_body,
            body,
            outcome,
        });
        answer
    };
    write_answer(request, &answer, method != "HEAD");
}

/// Decides how to answer request number `number`, consuming the next reply if it is a Messages
/// API call the script foresaw.
fn decide(
    state: &mut State,
    number: usize,
    method: &str,
    path: &str,
    read_error: Option<&io::Error>,
    body: Option<&Value>,
) -> (Outcome, Answer) {
    let reason = match (method, path, read_error, body) {
        ("HEAD" | "GET", "/api/hello", _, _) => {
            let answer =
                Answer { status: 200, content_type: "application/json", body: "{}".into() };
            return (Outcome::Probe, answer);
        }
        ("POST", "/v1/messages", Some(error), _) => format!("reading the body failed: {error}"),
        ("POST", "/v1/messages", None, None) => "the body is not JSON".to_owned(),
        ("POST", "/v1/messages", None, Some(body)) => match state.script.get(state.next_reply) {
            Some(reply) => {
                let model = body.get("model").and_then(Value::as_str).unwrap_or("scripted-model");
                let (status, content_type, body) =
                    reply.render(model, &format!("msg_scripted_{number}"));
                let index = state.next_reply;
                state.next_reply += 1;
                return (Outcome::Reply(index), Answer { status, content_type, body });
            }
            None => format!("all {} scripted replies were already used", state.script.len()),
        },
        _ => format!("no such endpoint: {method} {path}"),
    };
    let answer = unscripted(number, state.script.len(), &reason);
    (Outcome::Unscripted(reason), answer)
}

fn unscripted(number: usize, replies: usize, reason: &str) -> Answer {
    let message = format!(
        "scripted model: request #{number} was not scripted (the script has {replies} replies): {reason}"
    );
    Answer {
        status: 400,
        content_type: "application/json",
        body: error_body("invalid_request_error", &message),
    }
}

fn write_answer(request: Request, answer: &Answer, send_body: bool) {
    let reason = match answer.status {
        200 => "OK",
        400 => "Bad Request",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Scripted",
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
        answer.status,
        answer.content_type,
        answer.body.len(),
    );
    let mut writer = request.into_writer();
    let written = writer.write_all(head.as_bytes()).and_then(|()| {
        if send_body {
            writer.write_all(answer.body.as_bytes())?;
        }
        writer.flush()
    });
    // A client that hung up early is its own test's failure; the request is already recorded.
    let _ = written;
}
