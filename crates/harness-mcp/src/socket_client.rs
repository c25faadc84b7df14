//! One call on the runner's tool socket: a request line out, a reply line back.

use std::path::Path;
use std::time::Duration;

use harness_tools::{REPLY_CAP, ReplyTooLarge, ToolReply, ToolRequest, reply_len};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// What the model reads: the reply text, and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) text: String,
    pub(crate) is_error: bool,
}

/// Calls `tool` with `args` on the tool socket at `socket`, within `timeout`.
pub(crate) async fn call(socket: &Path, tool: &str, args: Value, timeout: Duration) -> Answer {
    let request = ToolRequest { tool: tool.to_owned(), args };
    match tokio::time::timeout(timeout, exchange(socket, &request)).await {
        Ok(Ok(reply)) if reply.ok && reply_len(&reply.text) > REPLY_CAP => {
            // The tool socket caps replies already; this guards a socket that does not.
            let too_large = ReplyTooLarge { size: reply_len(&reply.text), cap: REPLY_CAP };
            Answer { text: too_large.to_string(), is_error: true }
        }
        Ok(Ok(reply)) => Answer { text: reply.text, is_error: !reply.ok },
        Ok(Err(error)) => Answer {
            text: format!(
                "failed: the tool socket at {} did not answer: {error}",
                socket.display()
            ),
            is_error: true,
        },
        Err(_) => Answer {
            text: format!("failed: {tool} got no reply within {} s", timeout.as_secs()),
            is_error: true,
        },
    }
}

async fn exchange(socket: &Path, request: &ToolRequest) -> std::io::Result<ToolReply> {
    let mut line = serde_json::to_vec(request).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut stream = UnixStream::connect(socket).await?;
    stream.write_all(&line).await?;
    let mut reader = BufReader::new(stream);
    let mut reply = Vec::new();
    reader.read_until(b'\n', &mut reply).await?;
    if !reply.ends_with(b"\n") {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the connection closed before a whole reply",
        ));
    }
    serde_json::from_slice(&reply).map_err(std::io::Error::other)
}
