//! The broker's replies to the verbs the runner itself calls (`message.read`, `state`), as types:
//! what a broker must send (docs/protocol.md), and the sources of docs/schemas'
//! message-read-result.json and state-result.json.

use serde::Deserialize;

// The session client reads `message` as JSON first (a malformed one is answered or skipped by
// its id), then as a `Message`; `MessageReadResult` is the shape a broker must send.
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
