//! The request a turn gets: the state block, the message header, the message.

use serde::Deserialize;

// The runner reads `message` as JSON first (a malformed one is answered or skipped by its id),
// then as a `Message`; `MessageReadResult` is the shape a broker must send, and the source of
// docs/schemas/message-read-result.json.
/// `message.read`'s result: the next unread message, or none. Other keys are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[schemars(title = "message.read result")]
pub struct MessageReadResult {
    /// The next unread message; null or absent when there is none.
    #[serde(default)]
    pub message: Option<Message>,
}

/// One message from the bus, as `message.read` returns it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Its id, not empty; `message.read {"after": id}` marks it read.
    #[serde(deserialize_with = "non_empty")]
    #[schemars(length(min = 1))]
    pub id: String,
    /// The sender, who gets the RESULT; not empty.
    #[serde(deserialize_with = "non_empty")]
    #[schemars(length(min = 1))]
    pub from: String,
    /// `message`, or `result` for an incoming RESULT, which never gets an automatic reply.
    pub kind: MessageKind,
    /// When it was sent (RFC 3339), as the broker says.
    pub sent_at: String,
    /// Its text.
    pub text: String,
}

/// A string that is not empty: an empty id cannot be marked read, an empty sender answered.
fn non_empty<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let text = String::deserialize(deserializer)?;
    if text.is_empty() {
        return Err(serde::de::Error::custom("empty"));
    }
    Ok(text)
}

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageKind {
    /// A message that gets a RESULT.
    Message,
    /// A RESULT of someone else's turn (or of a landing).
    Result,
}

/// The `state` verb's result, which the runner renders as the state block before each turn.
/// Other keys are ignored; a result without these is `malformed-state` and the turn fails.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[schemars(title = "state result")]
pub struct StateResult {
    /// The launch's state.
    pub launch: LaunchState,
    /// The role's open tasks.
    pub tasks: OpenTasks,
}

/// The launch's state in the `state` result.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct LaunchState {
    /// The state (`running`, ...).
    pub state: String,
    /// When it was set (RFC 3339).
    pub at: String,
    /// The event that set it.
    pub event: String,
}

/// The open tasks in the `state` result.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct OpenTasks {
    /// Open tasks, at most the `cap` the runner asked for.
    pub open: Vec<OpenTask>,
    /// How many are open in all.
    pub total: u64,
}

/// One open task.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub struct OpenTask {
    /// Its reference (`web-12`).
    #[serde(rename = "ref")]
    pub task_ref: String,
    /// Its title.
    pub title: String,
}

/// Renders the state block from the `state` verb's result, or `None` when the result is not the
/// shape docs/protocol.md gives it.
pub(crate) fn state_block(result: &serde_json::Value, read_at: &str, cap: u32) -> Option<String> {
    let state: StateResult = serde_json::from_value(result.clone()).ok()?;
    let mut out = format!("Current state, read at {read_at}:\n");
    out.push_str(&format!(
        "- Launch: {} (set at {} by event {})\n",
        one_line(&state.launch.state),
        one_line(&state.launch.at),
        one_line(&state.launch.event)
    ));
    let shown: Vec<&OpenTask> = state.tasks.open.iter().take(cap as usize).collect();
    out.push_str(&format!("- Open tasks: {} in all", state.tasks.total));
    if shown.is_empty() {
        out.push('\n');
    } else {
        out.push_str(&format!(", {} listed:\n", shown.len()));
        for task in shown {
            out.push_str(&format!("  - {}: {}\n", one_line(&task.task_ref), one_line(&task.title)));
        }
    }
    out.push_str("This block is the truth over any older message.\n");
    Some(out)
}

/// The header before the message text.
pub(crate) fn header(message: &Message) -> String {
    let what = match message.kind {
        MessageKind::Message => "Message",
        MessageKind::Result => "RESULT",
    };
    format!("{what} from {}, sent at {}:\n", one_line(&message.from), one_line(&message.sent_at))
}

/// Keeps a broker-supplied value on one line of the block.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// Now, as RFC 3339 UTC to the second.
pub(crate) fn now_rfc3339() -> String {
    rfc3339(jiff::Timestamp::now())
}

/// `at` as `YYYY-MM-DDTHH:MM:SSZ`, truncated to the second.
fn rfc3339(at: jiff::Timestamp) -> String {
    let second = jiff::Timestamp::from_second(at.as_second()).unwrap_or(at);
    format!("{second:.0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        let at = |second: i64| jiff::Timestamp::from_second(second).unwrap();
        assert_eq!(rfc3339(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(at(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(at(1_796_010_000)), "2026-11-30T03:40:00Z");
        let late = jiff::Timestamp::new(1_796_010_000, 999_999_999).unwrap();
        assert_eq!(rfc3339(late), "2026-11-30T03:40:00Z");
    }

    #[test]
    fn state_block_lists_up_to_the_cap_with_the_total() {
        let result = serde_json::json!({
            "launch": {"state": "running", "at": "2026-11-30T03:00:00Z", "event": "ev-12"},
            "tasks": {"open": [{"ref": "web-1", "title": "One"}, {"ref": "web-2", "title": "Two\nlines"}], "total": 9}
        });
        let block = state_block(&result, "2026-11-30T03:41:00Z", 1).unwrap();
        assert_eq!(
            block,
            "Current state, read at 2026-11-30T03:41:00Z:\n- Launch: running (set at 2026-11-30T03:00:00Z by event ev-12)\n- Open tasks: 9 in all, 1 listed:\n  - web-1: One\nThis block is the truth over any older message.\n"
        );
        assert!(state_block(&serde_json::json!({"launch": {}}), "t", 5).is_none());
    }
}
