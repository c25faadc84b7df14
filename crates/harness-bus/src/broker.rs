//! The broker client (docs/contracts.md, contract 4): newline-delimited JSON over a Unix stream socket.
//!
//! Request: `{"id": N, "cap": CAP, "verb": VERB, "args": {...}}`. Reply:
//! `{"id": N, "ok": true, "result": ...}` or `{"id": N, "ok": false, "code": CODE, "message": ...}`.
//! [`UnixBroker`] opens one connection per call, so a call never waits behind another and a
//! connection the broker dropped is never reused; `docs/protocol.md` is the full specification.
//! Callers see only the [`Broker`] trait, so another wire format is one more implementation.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::capability::Capability;
use harness_tools::Verb;

/// The largest broker reply line read, in bytes.
const MAX_REPLY_BYTES: u64 = 64 * 1024 * 1024;

/// A broker: answers one verb call made with a capability.
pub trait Broker: Send + Sync {
    /// Calls `verb` with `args`, authorised by `cap`; returns the reply's `result`.
    fn call(&self, cap: &Capability, verb: Verb, args: &Value) -> Result<Value, BrokerError>;
}

/// A refusal code the broker sent (`claim-refused`, `revision-conflict`, …): lowercase ASCII
/// letters, digits, `-`, `_` and `.`, 1 to 64 bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RefusalCode(String);

impl RefusalCode {
    /// Validates `code`.
    pub fn new(code: &str) -> Option<Self> {
        let ok = !code.is_empty()
            && code.len() <= 64
            && code
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b));
        ok.then(|| Self(code.to_owned()))
    }

    /// A code this crate knows to be valid.
    pub(crate) fn known(code: &'static str) -> Self {
        Self(code.to_owned())
    }

    /// Returns the code.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RefusalCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a broker call gave no result. Refused is the broker's answer; the others are failures.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The broker refused the call.
    #[error("refused: {code}")]
    Refused {
        /// The broker's code.
        code: RefusalCode,
        /// The broker's message.
        message: String,
    },
    /// The broker socket could not be reached.
    #[error("the broker at {socket} is unreachable: {source}")]
    Unreachable {
        /// The socket.
        socket: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// No reply came within the timeout.
    #[error("the broker did not answer {verb} within {} s", .after.as_secs_f64())]
    Timeout {
        /// The verb.
        verb: Verb,
        /// The timeout.
        after: Duration,
    },
    /// Sending or reading failed.
    #[error("the connection to the broker failed during {verb}: {source}")]
    Io {
        /// The verb.
        verb: Verb,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The reply was not a contract-4 reply to this request.
    #[error("the broker's reply to {verb} is not valid: {detail}")]
    Protocol {
        /// The verb.
        verb: Verb,
        /// What was wrong.
        detail: String,
    },
}

impl BrokerError {
    /// Returns the broker's refusal code for a refusal, otherwise a stable code of this client:
    /// `broker-unreachable`, `broker-timeout`, `broker-io` or `broker-protocol`.
    pub fn code(&self) -> &str {
        match self {
            Self::Refused { code, .. } => code.as_str(),
            Self::Unreachable { .. } => "broker-unreachable",
            Self::Timeout { .. } => "broker-timeout",
            Self::Io { .. } => "broker-io",
            Self::Protocol { .. } => "broker-protocol",
        }
    }

    /// Returns true if and only if the broker answered with a refusal.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::Refused { .. })
    }
}

/// Where the broker is and how long a call may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    /// The broker's Unix socket.
    pub socket: PathBuf,
    /// The longest a call may take, connect to reply.
    pub timeout: Duration,
}

/// The contract-4 client over a Unix stream socket.
#[derive(Debug)]
pub struct UnixBroker {
    config: BrokerConfig,
    next_id: AtomicU64,
}

/// One request line to the broker: `{"id": N, "cap": CAP, "verb": VERB, "args": {...}}`.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "broker request")]
pub struct BrokerRequest<'a> {
    /// The call's id, which the reply repeats; a new one per call, counting from 1.
    #[schemars(range(min = 1))]
    id: u64,
    /// The session's capability, as the host gave it to the runner.
    cap: &'a str,
    /// The verb.
    verb: Verb,
    /// The verb's arguments (docs/protocol.md lists them per verb).
    args: &'a Value,
}

/// The capability stays out of every `Debug`.
impl std::fmt::Debug for BrokerRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerRequest")
            .field("id", &self.id)
            .field("verb", &self.verb)
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

// This client reads a reply with the looser private `Reply` below, so that each way a broker
// breaks the contract gets its own error; `BrokerReply` is the contract itself, and the source
// of docs/schemas/broker-reply.json.
/// One reply line from the broker: a result or a refusal. Other keys are ignored.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(title = "broker reply")]
pub enum BrokerReply {
    /// The call was done.
    Result(BrokerResult),
    /// The call was refused.
    Refusal(BrokerRefusal),
}

/// `{"id": N, "ok": true, "result": ...}`.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
pub struct BrokerResult {
    /// The request's id, echoed: at least 1, as every request's is (a reply with any other id,
    /// 0 included, is a protocol error).
    #[schemars(range(min = 1))]
    pub id: u64,
    /// Always true.
    #[schemars(extend("const" = true))]
    pub ok: bool,
    /// The verb's result (docs/protocol.md); absent counts as null.
    #[serde(default)]
    pub result: Value,
}

/// `{"id": N, "ok": false, "code": CODE, "message": TEXT}`.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
pub struct BrokerRefusal {
    /// The request's id, echoed: at least 1, as every request's is (a reply with any other id,
    /// 0 included, is a protocol error).
    #[schemars(range(min = 1))]
    pub id: u64,
    /// Always false.
    #[schemars(extend("const" = false))]
    pub ok: bool,
    /// The refusal code: lowercase ASCII letters, digits, `-`, `_` and `.`, 1 to 64 bytes.
    #[schemars(extend("pattern" = "^[a-z0-9_.-]{1,64}$"))]
    pub code: String,
    /// A human-readable reason.
    #[serde(default)]
    pub message: String,
}

#[derive(Deserialize)]
struct Reply {
    id: Value,
    ok: bool,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl UnixBroker {
    /// Returns a client for the broker `config` names; nothing is connected until a call.
    pub fn new(config: BrokerConfig) -> Self {
        Self { config, next_id: AtomicU64::new(1) }
    }

    fn exchange(
        &self,
        stream: UnixStream,
        line: &[u8],
        verb: Verb,
        deadline: Instant,
    ) -> Result<Vec<u8>, BrokerError> {
        let timeout = |error: io::Error| match error.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                BrokerError::Timeout { verb, after: self.config.timeout }
            }
            _ => BrokerError::Io { verb, source: error },
        };
        let remaining = || {
            deadline
                .checked_duration_since(Instant::now())
                .filter(|left| !left.is_zero())
                .ok_or(BrokerError::Timeout { verb, after: self.config.timeout })
        };
        stream.set_write_timeout(Some(remaining()?)).map_err(timeout)?;
        (&stream).write_all(line).map_err(timeout)?;
        let mut reader = BufReader::new((&stream).take(MAX_REPLY_BYTES));
        let mut reply = Vec::new();
        loop {
            stream.set_read_timeout(Some(remaining()?)).map_err(timeout)?;
            match reader.read_until(b'\n', &mut reply) {
                Ok(0) => break,
                Ok(_) if reply.ends_with(b"\n") => break,
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(timeout(error)),
            }
        }
        if !reply.ends_with(b"\n") {
            let detail = if reply.is_empty() {
                "the broker closed the connection without a reply".to_owned()
            } else {
                format!("the reply ended after {} bytes without a newline", reply.len())
            };
            return Err(BrokerError::Protocol { verb, detail });
        }
        Ok(reply)
    }
}

impl Broker for UnixBroker {
    fn call(&self, cap: &Capability, verb: Verb, args: &Value) -> Result<Value, BrokerError> {
        let deadline = Instant::now() + self.config.timeout;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let request = BrokerRequest { id, cap: cap.expose(), verb, args };
        let mut line = serde_json::to_vec(&request)
            .map_err(|error| BrokerError::Protocol { verb, detail: error.to_string() })?;
        line.push(b'\n');
        let stream = UnixStream::connect(&self.config.socket).map_err(|source| {
            BrokerError::Unreachable { socket: self.config.socket.clone(), source }
        })?;
        let reply = self.exchange(stream, &line, verb, deadline)?;
        let protocol = |detail: String| BrokerError::Protocol { verb, detail };
        let reply: Reply = serde_json::from_slice(&reply)
            .map_err(|error| protocol(format!("not a reply object: {error}")))?;
        if reply.id != json!(id) {
            return Err(protocol(format!("it answers id {} instead of {id}", reply.id)));
        }
        if reply.ok {
            return Ok(reply.result);
        }
        let code = reply.code.unwrap_or_default();
        let code = RefusalCode::new(&code)
            .ok_or_else(|| protocol(format!("the refusal code {code:?} is not a code")))?;
        Err(BrokerError::Refused { code, message: reply.message.unwrap_or_default() })
    }
}
