//! The reply cap: a reply reaches the model as compact JSON, whole, or not at all.
//!
//! Claude Code 2.1.296 saves an MCP result over 50000 characters to a file outside the workspace,
//! which the gate refuses to read, so a reply over [`REPLY_CAP`] becomes an error that names its
//! size and the cap and asks for a narrower query; it is never cut. Characters are counted as
//! JavaScript counts a string's `length` (UTF-16 code units), the unit of both CLIs' thresholds.

use serde_json::Value;

/// The most characters (UTF-16 code units) a reply may have.
pub const REPLY_CAP: usize = 40_000;

/// A reply over the cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "reply-too-large: the reply is {size} characters, over the cap of {cap}; narrow the query \
     (a filter, a smaller limit, or one item at a time) and call again"
)]
pub struct ReplyTooLarge {
    /// The reply's size in characters.
    pub size: usize,
    /// The cap.
    pub cap: usize,
}

impl ReplyTooLarge {
    /// Returns the stable code, `reply-too-large`.
    pub fn code(&self) -> &'static str {
        "reply-too-large"
    }
}

/// Returns the length of `text` as JavaScript counts it (UTF-16 code units).
pub fn reply_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// Returns `result` as compact JSON, or the cap error if that is over [`REPLY_CAP`].
pub fn reply_text(result: &Value) -> Result<String, ReplyTooLarge> {
    let text = result.to_string();
    let size = reply_len(&text);
    if size > REPLY_CAP { Err(ReplyTooLarge { size, cap: REPLY_CAP }) } else { Ok(text) }
}
