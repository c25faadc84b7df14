//! What the scripted Messages API answers: a script of replies, each a list of content blocks.
//!
//! The script is data, so a test reads as the conversation it expects: the model first asks for a
//! tool, then answers with text. Rendering a reply as Server-Sent Events lives here too, because the
//! event sequence is a property of the reply (its blocks decide the `stop_reason`).

use serde_json::{Value, json};

/// An ordered list of replies; every `POST /v1/messages` consumes the next one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    replies: Vec<Reply>,
}

impl Script {
    /// Builds a script that answers with `replies`, in order.
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Self {
        Self { replies: replies.into_iter().collect() }
    }

    /// Returns the number of scripted replies.
    pub fn len(&self) -> usize {
        self.replies.len()
    }

    /// Returns true if and only if the script holds no reply at all.
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    /// Appends `reply` to the end of the script.
    pub fn push(&mut self, reply: Reply) {
        self.replies.push(reply);
    }

    pub(crate) fn get(&self, index: usize) -> Option<&Reply> {
        self.replies.get(index)
    }
}

impl FromIterator<Reply> for Script {
    fn from_iter<I: IntoIterator<Item = Reply>>(iter: I) -> Self {
        Self::new(iter)
    }
}

impl From<Vec<Reply>> for Script {
    fn from(replies: Vec<Reply>) -> Self {
        Self { replies }
    }
}

/// One scripted answer to one Messages API request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    kind: ReplyKind,
}

#[derive(Debug, Clone, PartialEq)]
enum ReplyKind {
    /// A streamed assistant message made of these blocks.
    Message(Vec<Block>),
    /// An HTTP error with an Anthropic-style error body, for testing how a CLI fails.
    Error { status: u16, message: String },
}

impl Reply {
    /// Builds an assistant message made of `blocks`, streamed in order.
    pub fn new(blocks: impl IntoIterator<Item = Block>) -> Self {
        Self { kind: ReplyKind::Message(blocks.into_iter().collect()) }
    }

    /// Builds an assistant message holding one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new([Block::text(text)])
    }

    /// Builds an assistant message holding one `tool_use` block.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::new([Block::tool_use(id, name, input)])
    }

    /// Builds an HTTP error answer (`status`, e.g. 500 or 529) with an Anthropic-style error body
    /// carrying `message`; with retries off, both CLIs exit 1 after one such answer.
    pub fn api_error(status: u16, message: impl Into<String>) -> Self {
        Self { kind: ReplyKind::Error { status, message: message.into() } }
    }

    /// Returns the `stop_reason` the reply streams: `tool_use` if it holds a tool call, else
    /// `end_turn`; `None` for an error reply.
    pub fn stop_reason(&self) -> Option<&'static str> {
        match &self.kind {
            ReplyKind::Message(blocks) if blocks.iter().any(Block::is_tool_use) => Some("tool_use"),
            ReplyKind::Message(_) => Some("end_turn"),
            ReplyKind::Error { .. } => None,
        }
    }

    /// Renders the reply as an HTTP status, content type and body; `model` is echoed in
    /// `message_start` as the real API does, and `message_id` names the message.
    pub(crate) fn render(&self, model: &str, message_id: &str) -> (u16, &'static str, String) {
        match &self.kind {
            ReplyKind::Message(blocks) => (
                200,
                "text/event-stream",
                render_sse(blocks, self.stop_reason(), model, message_id),
            ),
            ReplyKind::Error { status, message } => {
                let error_type = if *status >= 500 { "api_error" } else { "invalid_request_error" };
                (*status, "application/json", error_body(error_type, message))
            }
        }
    }
}

/// One content block of a scripted assistant message.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// A text block, streamed as one `text_delta`.
    Text(String),
    /// A tool call, streamed with `input: {}` in `content_block_start` and the whole input JSON in
    /// one `input_json_delta`.
    ToolUse {
        /// The call id the CLI echoes back as the `tool_use_id` of its tool_result.
        id: String,
        /// The tool name as the CLI exposes it (`Read` in Claude Code, `read` in Pi).
        name: String,
        /// The tool's input object.
        input: Value,
    },
}

impl Block {
    /// Builds a text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// Builds a tool call block.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::ToolUse { id: id.into(), name: name.into(), input }
    }

    /// Returns true if and only if the block is a tool call.
    pub fn is_tool_use(&self) -> bool {
        matches!(self, Self::ToolUse { .. })
    }
}

/// Returns the Anthropic-style error JSON both CLIs understand.
pub(crate) fn error_body(error_type: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": error_type, "message": message}}).to_string()
}

/// Renders the minimal event sequence both CLIs accept (docs/clis.md).
fn render_sse(
    blocks: &[Block],
    stop_reason: Option<&str>,
    model: &str,
    message_id: &str,
) -> String {
    let mut out = String::new();
    push_event(
        &mut out,
        "message_start",
        &json!({
            "type": "message_start",
            "message": {
                "id": message_id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {
                    "input_tokens": 10, "output_tokens": 1,
                    "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                },
            },
        }),
    );
    for (index, block) in blocks.iter().enumerate() {
        let (start, delta) = match block {
            Block::Text(text) => {
                (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": text}))
            }
            Block::ToolUse { id, name, input } => (
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            ),
        };
        push_event(
            &mut out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        push_event(
            &mut out,
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
        push_event(
            &mut out,
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        );
    }
    push_event(
        &mut out,
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": 5},
        }),
    );
    push_event(&mut out, "message_stop", &json!({"type": "message_stop"}));
    out
}

fn push_event(out: &mut String, event: &str, data: &Value) {
    // `Value`'s Display is compact JSON on one line, which is what an SSE `data:` line needs.
    out.push_str(&format!("event: {event}\ndata: {data}\n\n"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(reply: &Reply) -> Vec<(String, Value)> {
        let (_, _, body) = reply.render("m", "msg_1");
        body.split("\n\n")
            .filter(|chunk| !chunk.is_empty())
            .map(|chunk| {
                let (event, data) = chunk.split_once('\n').unwrap();
                let event = event.strip_prefix("event: ").unwrap().to_owned();
                let data = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                (event, data)
            })
            .collect()
    }

    #[test]
    fn tool_use_streams_empty_input_then_one_delta() {
        let reply = Reply::new([
            Block::text("thinking aloud"),
            Block::tool_use("toolu_1", "Read", json!({"file_path": "/w/a.txt"})),
        ]);
        let names: Vec<String> = events(&reply).into_iter().map(|(e, _)| e).collect();
        // One start, then start / one delta / stop per block, then the message's end.
        let mut expected = vec!["message_start"];
        for _block in 0..2 {
            expected.extend(["content_block_start", "content_block_delta", "content_block_stop"]);
        }
        expected.extend(["message_delta", "message_stop"]);
        assert_eq!(names, expected);
        let events = events(&reply);
        assert_eq!(events[0].1["message"]["model"], "m");
        assert_eq!(events[4].1["content_block"]["input"], json!({}));
        assert_eq!(events[5].1["index"], 1);
        assert_eq!(events[5].1["delta"]["partial_json"], r#"{"file_path":"/w/a.txt"}"#);
        assert_eq!(events[7].1["delta"]["stop_reason"], "tool_use");
    }

    #[test]
    fn text_only_reply_ends_the_turn() {
        assert_eq!(Reply::text("done").stop_reason(), Some("end_turn"));
        assert_eq!(events(&Reply::text("done"))[2].1["delta"]["text"], "done");
    }

    #[test]
    fn api_error_is_json_with_its_status() {
        let (status, content_type, body) = Reply::api_error(500, "boom").render("m", "msg_1");
        assert_eq!((status, content_type), (500, "application/json"));
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["type"], "api_error");
        assert_eq!(body["error"]["message"], "boom");
    }
}
