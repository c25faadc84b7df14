//! The client of the host's launch and git sockets (docs/protocol.md, "The host's sockets").
//!
//! One request per connection: a JSON line `{"cap", "op", "args", "bytes"}` followed by exactly
//! `bytes` raw bytes (a git bundle the runner uploads, or none), then a JSON line
//! `{"ok": true, "result", "bytes"}` followed by exactly `bytes` raw bytes (a bundle the host
//! sends, or none), or `{"ok": false, "code", "message"}`. It lives here, beside the broker
//! client, because it writes the capability onto a wire, which only this crate may read.

use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::broker::RefusalCode;
use crate::capability::Capability;
use crate::server::BackendError;

/// The longest reply line accepted.
const MAX_LINE: u64 = 1024 * 1024;

/// Where a host socket is and how long and how much it may take.
#[derive(Debug, Clone)]
pub struct HostSocketConfig {
    /// The socket's path.
    pub socket: PathBuf,
    /// The longest a call may take, connect to last byte.
    pub timeout: Duration,
    /// The most bytes a reply may carry (a bundle the host sends).
    pub max_bytes: u64,
}

/// A host socket's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct HostReply {
    /// The reply's `result`.
    pub result: Value,
    /// How many bytes the host sent after it (written to the download path).
    pub bytes: u64,
}

/// The client of one host socket.
#[derive(Debug, Clone)]
pub struct HostSocket {
    config: HostSocketConfig,
}

fn failed(what: impl std::fmt::Display) -> BackendError {
    BackendError::Failed(what.to_string())
}

impl HostSocket {
    /// A client of the socket `config` names.
    pub fn new(config: HostSocketConfig) -> Self {
        Self { config }
    }

    /// Sends `op` with `args` (and the file `upload`, if any) and returns the reply; the bytes
    /// the host sends after it go to `download`, created 0600 and never over `max_bytes`.
    pub fn call(
        &self,
        cap: &Capability,
        op: &str,
        args: &Value,
        upload: Option<&Path>,
        download: Option<&Path>,
    ) -> Result<HostReply, BackendError> {
        let upload = upload.map(|path| std::fs::File::open(path).map_err(failed)).transpose()?;
        let download = match download {
            Some(path) => Some(
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(failed)?,
            ),
            None => None,
        };
        self.call_with(cap, op, args, upload.as_ref(), download.as_ref())
    }

    /// [`HostSocket::call`] through descriptors the caller opened: `upload` is sent whole from
    /// its start, its size taken from the descriptor itself; the bytes the host sends are
    /// written to `download` from where it stands. No path is opened, so nothing another
    /// process puts at a path can take the place of either file.
    pub fn call_with(
        &self,
        cap: &Capability,
        op: &str,
        args: &Value,
        upload: Option<&std::fs::File>,
        download: Option<&std::fs::File>,
    ) -> Result<HostReply, BackendError> {
        let socket = &self.config.socket;
        let stream = UnixStream::connect(socket).map_err(|error| {
            failed(format!("the host socket {} is unreachable: {error}", socket.display()))
        })?;
        stream.set_read_timeout(Some(self.config.timeout)).map_err(failed)?;
        stream.set_write_timeout(Some(self.config.timeout)).map_err(failed)?;
        let size = match upload {
            Some(file) => file.metadata().map_err(failed)?.len(),
            None => 0,
        };
        let mut header =
            json!({"cap": cap.expose(), "op": op, "args": args, "bytes": size}).to_string();
        header.push('\n');
        let mut writer = &stream;
        writer
            .write_all(header.as_bytes())
            .map_err(|error| failed(format!("sending to the host: {error}")))?;
        if let Some(mut file) = upload {
            io::Seek::seek(&mut file, io::SeekFrom::Start(0)).map_err(failed)?;
            let copied = io::copy(&mut file.take(size), &mut writer).map_err(failed)?;
            if copied != size {
                return Err(failed("the upload changed size while it was sent"));
            }
        }
        let mut reader = BufReader::new(&stream);
        let mut line = String::new();
        (&mut reader).take(MAX_LINE).read_line(&mut line).map_err(|error| {
            if matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) {
                failed(format!(
                    "the host did not answer {op} within {} s",
                    self.config.timeout.as_secs()
                ))
            } else {
                failed(format!("reading the host's answer: {error}"))
            }
        })?;
        let reply: Value = serde_json::from_str(&line)
            .map_err(|_| failed(format!("the host's answer to {op} is not a JSON line")))?;
        if reply["ok"] != Value::Bool(true) {
            let code = reply["code"].as_str().and_then(RefusalCode::new);
            return Err(match code {
                Some(code) if reply["ok"] == Value::Bool(false) => BackendError::Refused(code),
                _ => failed(format!("the host's answer to {op} is malformed")),
            });
        }
        let bytes = reply.get("bytes").and_then(Value::as_u64).unwrap_or(0);
        if bytes > 0 {
            if bytes > self.config.max_bytes {
                return Err(BackendError::Refused(RefusalCode::known("bundle-too-large")));
            }
            let Some(mut file) = download else {
                return Err(failed(format!("the host sent {bytes} bytes that {op} does not take")));
            };
            let copied = io::copy(&mut (&mut reader).take(bytes), &mut file).map_err(failed)?;
            if copied != bytes {
                return Err(failed(format!(
                    "the host's bundle ended after {copied} of {bytes} bytes"
                )));
            }
        }
        Ok(HostReply { result: reply.get("result").cloned().unwrap_or(Value::Null), bytes })
    }
}
