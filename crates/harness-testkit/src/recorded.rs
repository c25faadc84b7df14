//! What the scripted Messages API saw: one record per HTTP request, with helpers that pull out the
//! parts a test asserts on (tool results, system prompt, tool names, all text).
//!
//! The helpers follow the request shapes docs/clis.md records: `content` is a string or a list of
//! blocks, a tool_result's `content` is a string or a list of text blocks, and Claude Code puts
//! `role: "system"` entries inside `messages`, often after the user message that carries the
//! tool results.

use serde_json::Value;

/// One HTTP request the scripted model received, in arrival order.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The 1-based position of the request in the model's log.
    pub number: usize,
    /// The HTTP method, e.g. `POST`.
    pub method: String,
    /// The request target as sent, query string included (`/v1/messages?beta=true`).
    pub url: String,
    /// The request target without the query string (`/v1/messages`).
    pub path: String,
    /// The headers in arrival order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body as text (lossy UTF-8); empty when there was none.
    pub raw_body: String,
    /// The body parsed as JSON, or `None` if it was empty or not JSON.
    pub body: Option<Value>,
    /// How the model answered.
    pub outcome: Outcome,
}

/// How the scripted model answered a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A Messages API call answered with the script's reply at this 0-based index.
    Reply(usize),
    /// A probe such as `HEAD /api/hello`, answered 200 without consuming a reply.
    Probe,
    /// Anything the script did not foresee, answered with HTTP 400; the text says why.
    Unscripted(String),
}

/// One tool_result block as the model saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// The id of the `tool_use` block this result answers.
    pub tool_use_id: String,
    /// The result's text; a list of text blocks is joined with newlines.
    pub text: String,
    /// True if and only if the CLI flagged the result as an error (a blocked or failed call).
    pub is_error: bool,
}

impl RecordedRequest {
    /// Returns true if and only if this is a Messages API call (`POST /v1/messages`).
    pub fn is_messages_call(&self) -> bool {
        self.method == "POST" && self.path == "/v1/messages"
    }

    /// Returns the value of the first header named `name` (case-insensitive), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Returns the `model` field of the body, if any.
    pub fn model(&self) -> Option<&str> {
        self.body.as_ref()?.get("model")?.as_str()
    }

    /// Returns the `messages` array of the body, or an empty slice.
    pub fn messages(&self) -> &[Value] {
        self.body
            .as_ref()
            .and_then(|body| body.get("messages"))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// Returns the last `role: "user"` message, skipping the `role: "system"` entries Claude Code
    /// appends after it.
    pub fn last_user_message(&self) -> Option<&Value> {
        self.messages().iter().rev().find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
    }

    /// Returns the tool_result blocks of the last user message, in order; this is what the CLI
    /// reported back for the previous reply's tool calls.
    pub fn tool_results(&self) -> Vec<ToolResult> {
        let Some(content) = self.last_user_message().and_then(|m| m.get("content")) else {
            return Vec::new();
        };
        content_blocks(content)
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_result"))
            .map(|block| ToolResult {
                tool_use_id: block
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                text: block.get("content").map(content_text).unwrap_or_default(),
                is_error: block.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            })
            .collect()
    }

    /// Returns the `system` field as text: a string as is, a list of blocks joined with newlines.
    pub fn system_text(&self) -> String {
        self.body.as_ref().and_then(|body| body.get("system")).map(content_text).unwrap_or_default()
    }

    /// Returns the names in the `tools` array, in order.
    pub fn tool_names(&self) -> Vec<String> {
        self.body
            .as_ref()
            .and_then(|body| body.get("tools"))
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|tool| tool.get("name").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Returns every text in `messages` joined with newlines: string contents, text blocks and
    /// tool_result contents of every role, `system` entries included; for "did X reach the model"
    /// assertions.
    pub fn all_text(&self) -> String {
        self.messages()
            .iter()
            .filter_map(|message| message.get("content"))
            .map(content_text)
            .filter(|text| !text.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Returns `content` as a list of blocks; a string becomes no blocks (it holds no tool_result).
fn content_blocks(content: &Value) -> &[Value] {
    content.as_array().map_or(&[], Vec::as_slice)
}

/// Returns the text of a `content` value: a string as is; of a list, every text block and the
/// nested content of every tool_result, joined with newlines.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| match block.get("type").and_then(Value::as_str) {
                Some("text") => block.get("text").and_then(Value::as_str).map(str::to_owned),
                Some("tool_result") => block.get("content").map(content_text),
                _ => None,
            })
            .filter(|text| !text.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(body: Value) -> RecordedRequest {
        RecordedRequest {
            number: 1,
            method: "POST".into(),
            url: "/v1/messages?beta=true".into(),
            path: "/v1/messages".into(),
            headers: vec![("X-Api-Key".into(), "k".into())],
            raw_body: body.to_string(),
            body: Some(body),
            outcome: Outcome::Reply(0),
        }
    }

    #[test]
    fn tool_results_come_from_the_last_user_message_not_a_trailing_system_entry() {
        let r = request(json!({"messages": [
            {"role": "user", "content": "read it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "line one"},
                {"type": "tool_result", "tool_use_id": "t2", "is_error": true,
                 "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            ]},
            {"role": "system", "content": "<total_tokens>1</total_tokens>"},
        ]}));
        assert_eq!(
            r.tool_results(),
            [
                ToolResult { tool_use_id: "t1".into(), text: "line one".into(), is_error: false },
                ToolResult { tool_use_id: "t2".into(), text: "a\nb".into(), is_error: true },
            ]
        );
        assert!(r.all_text().contains("<total_tokens>"));
        assert!(r.all_text().contains("line one"));
        assert_eq!(r.header("x-api-key"), Some("k"));
    }

    #[test]
    fn a_string_user_message_has_no_tool_results() {
        let r = request(json!({"messages": [{"role": "user", "content": "hi"}]}));
        assert_eq!(r.tool_results(), []);
        assert_eq!(r.all_text(), "hi");
    }

    #[test]
    fn system_and_tools() {
        let r = request(json!({
            "system": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
            "tools": [{"name": "Read"}, {"name": "mcp__mosaic__send"}],
        }));
        assert_eq!(r.system_text(), "one\ntwo");
        assert_eq!(r.tool_names(), ["Read", "mcp__mosaic__send"]);
        assert_eq!(request(json!({"system": "plain"})).system_text(), "plain");
    }
}
