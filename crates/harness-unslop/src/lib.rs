//! The unslop check: every reply the agent sends is checked against a list of slop patterns; the
//! check never blocks a reply, but the sender learns which replies were flagged and the agent gets
//! a correction notice on its next turn (spec row 66).
//!
//! [`Lists`] is `lists.json` validated; [`Checker`] runs it over a reply in linear time and returns
//! [`Finding`]s. The hooks ([`run_hook`]) write the JSONL log ([`log`]), with whole appends under
//! concurrent writers. [`unslop_counts`] reads a finished log; [`ResultNotes`] is the runner's
//! state for the note at the end of each RESULT, with its limits ([`NOTE_LIMIT`],
//! [`ANSWER_LIMIT`]).
//!
//! It deliberately does not block or rewrite a reply (a later decision, Q84 option B), does not
//! spawn anything, and does not know how a harness is wired: the bundle writes Claude Code's
//! settings and the runner sets the environment.

mod checker;
mod counts;
mod error;
mod hook;
mod lists;
mod note;
mod text;

pub mod log;

pub use checker::{Checker, Finding};
pub use counts::{UnslopCounts, unslop_counts};
pub use error::UnslopError;
#[cfg(feature = "test-hooks")]
pub use hook::PANIC_FOR_TEST;
pub use hook::{
    Hook, HookConfig, HookOutput, LISTS_ENV, MAX_PAYLOAD, NOTICE_HEADING, notice_text, run_hook,
};
pub use lists::{Entry, LISTS_VERSION, Lists, MAX_ENTRIES, MAX_LISTS_BYTES, MAX_PATTERN_BYTES};
pub use note::{
    ANSWER_LIMIT, FlaggedReply, Gained, NOTE_LIMIT, NotesCursor, OutgoingResult, RESULT_LIMIT,
    ResultNotes, clip_answer,
};
pub use text::utf16_len;
