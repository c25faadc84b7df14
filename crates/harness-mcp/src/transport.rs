//! Newline-delimited JSON-RPC on a reader and a writer (stdin and stdout), as an rmcp transport.
//!
//! rmcp's own stdio transport silently drops a line that is not JSON, answers a well-formed line
//! it cannot read with an error whose id is null, and its pre-`initialize` loop ends the session
//! on a notification or response. This transport answers instead: a line that is not JSON gets
//! `-32700 Parse error`, a request it cannot read gets `-32600` or `-32602` with the request's
//! own id, and anything but a request before `initialize` is dropped, so the server keeps
//! serving whatever arrives. Lines are capped at [`MAX_LINE_BYTES`].

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// The longest line read, newline included; a longer one gets an error and is skipped.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// A JSON-RPC transport over one reader and one writer.
pub struct LineTransport<R, W> {
    reader: BufReader<R>,
    writer: Arc<Mutex<W>>,
    line: Vec<u8>,
    discarding: bool,
    initialize_seen: bool,
}

impl<R, W> std::fmt::Debug for LineTransport<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineTransport")
            .field("initialize_seen", &self.initialize_seen)
            .finish_non_exhaustive()
    }
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// Reads requests from `reader` and writes replies to `writer`.
    pub fn new(reader: R, writer: W) -> Self {
        Self {
            reader: BufReader::new(reader),
            writer: Arc::new(Mutex::new(writer)),
            line: Vec::new(),
            discarding: false,
            initialize_seen: false,
        }
    }

    /// Reads until `self.line` holds one whole line, at most [`MAX_LINE_BYTES`]; returns `None`
    /// at the end of input.
    ///
    /// rmcp polls `receive` inside a `select!` and drops it whenever another branch is ready, so
    /// this must be cancellation-safe: `fill_buf` consumes nothing when dropped, and copying
    /// into `self.line` and consuming happen with no await between them, so a dropped read
    /// leaves its partial line in `self.line` for the next call to finish.
    async fn read_line(&mut self) -> Option<Line> {
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(available) => available,
                Err(error) => {
                    tracing::error!("reading stdin failed: {error}");
                    return None;
                }
            };
            if available.is_empty() {
                return None;
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            if !self.discarding && self.line.len() + take > MAX_LINE_BYTES {
                self.line.clear();
                self.discarding = true;
            }
            if !self.discarding {
                self.line.extend_from_slice(&available[..take]);
            }
            self.reader.consume(take);
            if newline.is_some() {
                return Some(if std::mem::take(&mut self.discarding) {
                    Line::Oversized
                } else {
                    Line::Whole(std::mem::take(&mut self.line))
                });
            }
        }
    }

    /// Queues one JSON-RPC error on its own task, so that a dropped `receive` cannot cut it.
    fn send_error(&self, id: Value, code: i64, message: String) {
        let reply =
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        let writer = self.writer.clone();
        // A closed writer is ignored: the next read sees the end of input.
        tokio::spawn(async move { write_line(&writer, reply.to_string().into_bytes()).await });
    }
}

/// Reads the params of a `tools/call` request as rmcp's handler will.
fn call_params(request: &Value) -> Result<CallToolRequestParams, serde_json::Error> {
    serde_json::from_value(request.get("params").cloned().unwrap_or(Value::Null))
}

/// What [`LineTransport::read_line`] read.
enum Line {
    /// One line, newline included.
    Whole(Vec<u8>),
    /// A line over the limit, skipped.
    Oversized,
}

async fn write_line<W: AsyncWrite + Unpin>(
    writer: &Mutex<W>,
    mut line: Vec<u8>,
) -> std::io::Result<()> {
    line.push(b'\n');
    let mut writer = writer.lock().await;
    writer.write_all(&line).await?;
    writer.flush().await
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let line = serde_json::to_vec(&item);
        async move { write_line(&writer, line.map_err(std::io::Error::other)?).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let line = match self.read_line().await? {
                Line::Whole(line) => line,
                Line::Oversized => {
                    let message = format!("the line is over {MAX_LINE_BYTES} bytes");
                    self.send_error(Value::Null, -32600, message);
                    continue;
                }
            };
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value: Value = match serde_json::from_slice(text) {
                Ok(value) => value,
                Err(error) => {
                    self.send_error(Value::Null, -32700, format!("Parse error: {error}"));
                    continue;
                }
            };
            let id = value.get("id").cloned();
            let method = value.get("method").and_then(Value::as_str).map(str::to_owned);
            let is_request = id.is_some() && method.is_some();
            let is_response = value.get("result").is_some() || value.get("error").is_some();
            if method.is_none() && !is_response {
                let message = "Invalid Request: neither a request nor a response".to_owned();
                self.send_error(id.unwrap_or(Value::Null), -32600, message);
                continue;
            }
            if !self.initialize_seen && !is_request {
                // rmcp ends the session on anything but a request before `initialize`.
                continue;
            }
            if let (Some(id), Some("tools/call")) = (&id, method.as_deref())
                && let Err(error) = call_params(&value)
            {
                // rmcp reads a `tools/call` whose params do not fit as a custom request and
                // answers "method not found"; the params are what is wrong.
                self.send_error(
                    id.clone(),
                    -32602,
                    format!("Invalid params for tools/call: {error}"),
                );
                continue;
            }
            match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
                Ok(message) => {
                    if method.as_deref() == Some("initialize") {
                        self.initialize_seen = true;
                    }
                    return Some(message);
                }
                Err(error) => match (id, method) {
                    (Some(id), Some(method)) => {
                        let message = format!("Invalid params for {method}: {error}");
                        self.send_error(id, -32602, message);
                    }
                    // A notification we cannot read needs no answer.
                    (None, Some(_)) => {}
                    (id, None) => {
                        let message = format!("Invalid Request: {error}");
                        self.send_error(id.unwrap_or(Value::Null), -32600, message);
                    }
                },
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.lock().await.shutdown().await
    }
}
