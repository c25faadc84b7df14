//! The runner's own broker calls as a typed client: `role.claim`, `message.read`, `state`,
//! `message.send` and `role.release`, each with its arguments and its reply as types
//! (docs/protocol.md, "Verbs the runner calls").
//!
//! The wire stays behind the [`Broker`] trait; this client only shapes what goes in and reads
//! what comes back. A message that does not read as a [`Message`] is not an error of the call:
//! it comes back as [`Body::Malformed`], with whatever of its id and sender could be read, so the
//! runner can answer or skip it by its id.

use std::sync::Arc;

use harness_tools::Verb;
use serde_json::{Value, json};

use crate::broker::{Broker, BrokerError};
use crate::capability::Capability;
use crate::wire::{Message, StateResult};

/// The runner's broker calls, made with the capability this client holds.
#[derive(Clone)]
pub struct SessionClient {
    broker: Arc<dyn Broker>,
    cap: Capability,
}

impl std::fmt::Debug for SessionClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionClient").finish_non_exhaustive()
    }
}

/// One message `message.read` handed over: what it said, and the digest it is known by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    /// The SHA-256, in hex, of the message's `id`, `from`, `kind`, `sentAt` and `text` as the
    /// broker sent them (any JSON, a malformed message's too): a message counts as the same
    /// message only if its id and its digest both match.
    pub digest: String,
    /// The message, or what could be read of a malformed one.
    pub body: Body,
}

/// A message, read whole or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// A message as docs/protocol.md gives it.
    Message(Message),
    /// A message that does not read as one.
    Malformed {
        /// Its id, when it is a non-empty string.
        id: Option<String>,
        /// Its sender, when it is a non-empty string.
        from: Option<String>,
        /// The id as the broker sent it, in JSON, when there is one that is not a non-empty
        /// string (for the log).
        raw_id: Option<String>,
        /// Why it does not read, naming the field.
        reason: String,
    },
}

impl Incoming {
    /// Reads one message as the broker sent it.
    pub fn from_value(message: Value) -> Self {
        let digest = digest(&message);
        let text = |key: &str| {
            message
                .get(key)
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        let (id, from) = (text("id"), text("from"));
        let raw_id = message.get("id").filter(|_| id.is_none()).map(Value::to_string);
        let body = match harness_tools::json::from_value::<Message>(message, "") {
            Ok(message) => Body::Message(message),
            Err(error) => Body::Malformed { id, from, raw_id, reason: error.to_string() },
        };
        Self { digest, body }
    }

    /// Its id, when it has one that can be marked read.
    pub fn id(&self) -> Option<&str> {
        match &self.body {
            Body::Message(message) => Some(&message.id),
            Body::Malformed { id, .. } => id.as_deref(),
        }
    }
}

/// The SHA-256 of the message's `id`, `from`, `kind`, `sentAt` and `text`, in hex.
fn digest(message: &Value) -> String {
    use sha2::Digest as _;
    let fields = ["id", "from", "kind", "sentAt", "text"]
        .map(|key| message.get(key).cloned().unwrap_or(Value::Null));
    let digest = sha2::Sha256::digest(Value::from(fields.to_vec()).to_string().as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Why `state` gave no state.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The call failed or was refused.
    #[error("the state call failed")]
    Broker(#[source] BrokerError),
    /// The broker answered with something that is not a state result.
    #[error("the state result is malformed: {0}")]
    Malformed(String),
}

impl SessionClient {
    /// A client of `broker` with `cap`.
    pub fn new(broker: Arc<dyn Broker>, cap: Capability) -> Self {
        Self { broker, cap }
    }

    /// `role.claim {"run": RUN}`.
    pub fn claim(&self, run: &str) -> Result<(), BrokerError> {
        self.broker.call(&self.cap, Verb::RoleClaim, &json!({"run": run})).map(drop)
    }

    /// `message.read`, marking `after` read first when given: the next unread message, if any.
    pub fn read(&self, after: Option<&str>) -> Result<Option<Incoming>, BrokerError> {
        let args = match after {
            Some(id) => json!({"after": id}),
            None => json!({}),
        };
        let result = self.broker.call(&self.cap, Verb::MessageRead, &args)?;
        Ok(match result.get("message") {
            None | Some(Value::Null) => None,
            Some(message) => Some(Incoming::from_value(message.clone())),
        })
    }

    /// `message.read {"after": ID, "limit": 0}`: marks `id` read and takes nothing. The reply's
    /// message is ignored: a broker that does not know `limit` loses nothing.
    pub fn mark(&self, id: &str) -> Result<(), BrokerError> {
        self.broker.call(&self.cap, Verb::MessageRead, &json!({"after": id, "limit": 0})).map(drop)
    }

    /// `message.read {"limit": 0}`: marks nothing and takes nothing; the reply's message, if the
    /// broker sent one anyway, as it reads.
    pub fn read_nothing(&self) -> Result<Option<Incoming>, BrokerError> {
        let result = self.broker.call(&self.cap, Verb::MessageRead, &json!({"limit": 0}))?;
        Ok(match result.get("message") {
            None | Some(Value::Null) => None,
            Some(message) => Some(Incoming::from_value(message.clone())),
        })
    }

    /// `state {"cap": CAP}`: the launch's state and at most `cap` open tasks.
    pub fn state(&self, cap: u32) -> Result<StateResult, StateError> {
        let result = self
            .broker
            .call(&self.cap, Verb::State, &json!({"cap": cap}))
            .map_err(StateError::Broker)?;
        harness_tools::json::from_value::<StateResult>(result, "")
            .map_err(|error| StateError::Malformed(error.to_string()))
    }

    /// `message.send {"to", "replyTo", "kind": "result", "text"}`: a RESULT to `to`.
    pub fn send_result(&self, to: &str, reply_to: &str, text: &str) -> Result<(), BrokerError> {
        let args = json!({"to": to, "replyTo": reply_to, "kind": "result", "text": text});
        self.broker.call(&self.cap, Verb::MessageSend, &args).map(drop)
    }

    /// `role.release {}`.
    pub fn release(&self) -> Result<(), BrokerError> {
        self.broker.call(&self.cap, Verb::RoleRelease, &json!({})).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_message_keeps_what_can_be_read_of_it() {
        let good =
            json!({"id": "m1", "from": "pm", "kind": "message", "sentAt": "t", "text": "hi"});
        let read = Incoming::from_value(good.clone());
        assert!(matches!(read.body, Body::Message(_)));
        assert_eq!(read.id(), Some("m1"));
        let no_text = json!({"id": "m2", "from": "pm", "kind": "message", "sentAt": "t"});
        let read = Incoming::from_value(no_text);
        match &read.body {
            Body::Malformed { id, from, raw_id, reason } => {
                assert_eq!(
                    (id.as_deref(), from.as_deref(), raw_id),
                    (Some("m2"), Some("pm"), &None)
                );
                assert!(reason.contains("text"), "{reason}");
            }
            Body::Message(_) => panic!("read a message without text"),
        }
        let number_id = Incoming::from_value(json!({"id": 7, "from": ""}));
        match &number_id.body {
            Body::Malformed { id, from, raw_id, .. } => {
                assert_eq!((id, from, raw_id.as_deref()), (&None, &None, Some("7")));
            }
            Body::Message(_) => panic!("read a message with a number id"),
        }
        // The digest covers what the message says, so a changed text is another message.
        let mut changed = good;
        changed["text"] = json!("hi!");
        assert_ne!(Incoming::from_value(changed).digest, read_digest_of_good());
    }

    fn read_digest_of_good() -> String {
        Incoming::from_value(
            json!({"id": "m1", "from": "pm", "kind": "message", "sentAt": "t", "text": "hi"}),
        )
        .digest
    }
}
