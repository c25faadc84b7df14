//! The RESULT note: after each turn the runner reads what the log gained, and the next RESULT it
//! sends ends with a note naming the replies flagged since the last note went out, and, once per
//! run, that the check is broken.
//!
//! The state is in [`ResultNotes`], one per run. [`ResultNotes::gather`] after every turn;
//! [`ResultNotes::compose`] when a reply is about to go out, which changes nothing; and
//! [`ResultNotes::sent`] only once the send succeeded. A turn that sends no reply, or whose send
//! fails, therefore leaves the note for the next reply.

use std::path::PathBuf;

use crate::error::error_chain;
use serde::{Deserialize, Serialize};

use crate::log::{Event, read_slice};
use crate::text::{clip_chars, prefix_utf16, utf16_len};

/// The most the note may hold, both parts together, in UTF-16 code units.
pub const NOTE_LIMIT: usize = 600;
/// The most the answer before the note may hold, in UTF-16 code units.
pub const ANSWER_LIMIT: usize = 32_000;
/// The bus's limit for a message body, in UTF-16 code units; a RESULT stays under it.
pub const RESULT_LIMIT: usize = 32_768;

/// What separates the answer from the note.
const SEPARATOR: &str = "\n\n";
/// The most of a flagged reply's start that the note quotes, in UTF-16 code units.
const QUOTE_CHARS: usize = 40;
/// The most of a flagged reply's pattern ids the note lists, in UTF-16 code units.
const IDS_CHARS: usize = 80;
/// The most the broken part may take, in UTF-16 code units.
const BROKEN_CHARS: usize = 220;
const BROKEN_PREFIX: &str = "unslop: the check is broken, replies go unchecked: ";

/// The runner's unslop state for one run.
#[derive(Debug, Clone)]
pub struct ResultNotes {
    log: PathBuf,
    cursor: u64,
    replies_seen: u64,
    pending: Vec<FlaggedReply>,
    broken: Broken,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Broken {
    Fine,
    Untold(String),
    Told,
}

/// A flagged reply not yet named in a sent RESULT.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlaggedReply {
    /// The reply's number in the run, counting every reply that got a verdict, from 1.
    pub number: u64,
    /// The reply's first characters, as the log has them.
    pub start: String,
    /// The ids of the entries it matched.
    pub ids: Vec<String>,
}

/// Where a [`ResultNotes`] stands, for the runner to keep across a restart: the log offset read
/// so far, the replies counted, the flagged replies not yet told and whether the broken check
/// was told. It is the runner's own state; its fields are not an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotesCursor {
    cursor: u64,
    replies_seen: u64,
    pending: Vec<FlaggedReply>,
    broken: Broken,
}

/// What one [`ResultNotes::gather`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gained {
    /// Replies checked, flagged or not.
    pub checked: usize,
    /// Replies flagged.
    pub flagged: usize,
    /// The first reason the check broke, if a line in this stretch says it did.
    pub broken: Option<String>,
}

/// A RESULT ready to send: the clipped answer and the note, and what the note told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingResult {
    text: String,
    note: String,
    told_through: Option<u64>,
    told_broken: bool,
}

impl OutgoingResult {
    /// Returns the RESULT's body: the answer, clipped at [`ANSWER_LIMIT`], then the note if any.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Returns the note alone; empty when there is nothing to tell.
    pub fn note(&self) -> &str {
        &self.note
    }
}

impl ResultNotes {
    /// Starts the state for a run whose hooks write the log at `log`.
    pub fn new(log: impl Into<PathBuf>) -> Self {
        Self {
            log: log.into(),
            cursor: 0,
            replies_seen: 0,
            pending: Vec::new(),
            broken: Broken::Fine,
        }
    }

    /// Resumes the state a runner kept with [`ResultNotes::cursor`], for the same log: nothing
    /// told before is told again.
    pub fn resume(log: impl Into<PathBuf>, kept: NotesCursor) -> Self {
        Self {
            log: log.into(),
            cursor: kept.cursor,
            replies_seen: kept.replies_seen,
            pending: kept.pending,
            broken: kept.broken,
        }
    }

    /// Returns where this state stands, for [`ResultNotes::resume`].
    pub fn cursor(&self) -> NotesCursor {
        NotesCursor {
            cursor: self.cursor,
            replies_seen: self.replies_seen,
            pending: self.pending.clone(),
            broken: self.broken.clone(),
        }
    }

    /// Reads what the log gained since the last call. A log that cannot be read is a broken check
    /// (told once, like any other), never an error for the runner.
    pub fn gather(&mut self) -> Gained {
        let mut gained = Gained::default();
        let slice = match read_slice(&self.log, self.cursor) {
            Ok(slice) => slice,
            Err(error) => {
                let reason = error_chain(&error);
                self.note_broken(&reason);
                gained.broken = Some(reason);
                return gained;
            }
        };
        self.cursor = slice.end;
        for record in slice.records {
            let broken = match record.event {
                Event::Checked { .. } => {
                    self.replies_seen += 1;
                    gained.checked += 1;
                    None
                }
                Event::Flagged { reply, findings } => {
                    self.replies_seen += 1;
                    gained.checked += 1;
                    gained.flagged += 1;
                    self.pending.push(FlaggedReply {
                        number: self.replies_seen,
                        start: reply.reply_start,
                        ids: findings.into_iter().map(|finding| finding.id).collect(),
                    });
                    None
                }
                Event::NoticeInjected { .. } => None,
                Event::BrokenLists { reason } | Event::SkippedBroken { reason } => Some(reason),
                Event::HookFailed { hook, reason } => Some(format!("{hook}: {reason}")),
            };
            if let Some(reason) = broken {
                self.note_broken(&reason);
                gained.broken.get_or_insert(reason);
            }
        }
        gained
    }

    fn note_broken(&mut self, reason: &str) {
        if self.broken == Broken::Fine {
            self.broken = Broken::Untold(reason.to_owned());
        }
    }

    /// Returns the flagged replies the next note will tell of, oldest first.
    pub fn pending(&self) -> &[FlaggedReply] {
        &self.pending
    }

    /// Builds the RESULT for `answer` with the note as it stands; changes nothing.
    pub fn compose(&self, answer: &str) -> OutgoingResult {
        let broken_part = match &self.broken {
            Broken::Untold(reason) => Some(broken_text(reason)),
            Broken::Fine | Broken::Told => None,
        };
        let budget = match &broken_part {
            Some(part) => NOTE_LIMIT.saturating_sub(utf16_len(part) + 1),
            None => NOTE_LIMIT,
        };
        let flagged_part = flagged_text(&self.pending, budget);
        let note = [flagged_part, broken_part].into_iter().flatten().collect::<Vec<_>>().join("\n");
        // The parts are built to fit; this only guards the limit against a slip in that arithmetic.
        let note = prefix_utf16(&note, NOTE_LIMIT).to_owned();
        let mut text = clip_answer(answer);
        if !note.is_empty() {
            text.push_str(SEPARATOR);
            text.push_str(&note);
        }
        OutgoingResult {
            text,
            note,
            told_through: self.pending.last().map(|reply| reply.number),
            told_broken: matches!(self.broken, Broken::Untold(_)),
        }
    }

    /// Records that `result` went out: the replies and the broken check it told of are not told
    /// again. Call it only when the send succeeded.
    pub fn sent(&mut self, result: &OutgoingResult) {
        if let Some(through) = result.told_through {
            self.pending.retain(|reply| reply.number > through);
        }
        if result.told_broken {
            self.broken = Broken::Told;
        }
    }
}

/// Returns `answer` clipped at [`ANSWER_LIMIT`] UTF-16 code units, marker included.
pub fn clip_answer(answer: &str) -> String {
    if utf16_len(answer) <= ANSWER_LIMIT {
        return answer.to_owned();
    }
    let marker = format!("\n[answer clipped at {ANSWER_LIMIT} characters]");
    let mut out = prefix_utf16(answer, ANSWER_LIMIT - utf16_len(&marker)).to_owned();
    out.push_str(&marker);
    out
}

fn broken_text(reason: &str) -> String {
    let room = BROKEN_CHARS - utf16_len(BROKEN_PREFIX);
    format!("{BROKEN_PREFIX}{}", clip_chars(&crate::text::one_line(reason), room))
}

/// Names as many of `replies` as fit in `budget`, and counts the rest.
fn flagged_text(replies: &[FlaggedReply], budget: usize) -> Option<String> {
    let total = replies.len();
    if total == 0 {
        return None;
    }
    let header =
        format!("unslop: {total} {} flagged: ", if total == 1 { "reply" } else { "replies" });
    let items: Vec<String> = replies.iter().map(item_text).collect();
    let mut text = header.clone();
    let mut named = 0;
    for item in &items {
        let rest = total - named - 1;
        let tail = if rest > 0 { format!("; and {rest} more") } else { String::new() };
        let joint = if named == 0 { "" } else { "; " };
        if utf16_len(&text) + utf16_len(joint) + utf16_len(item) + utf16_len(&tail) > budget {
            break;
        }
        text.push_str(joint);
        text.push_str(item);
        named += 1;
    }
    let text = match (named, total - named) {
        (0, _) => {
            format!("unslop: {total} {} flagged.", if total == 1 { "reply" } else { "replies" })
        }
        (_, 0) => text,
        (_, rest) => format!("{text}; and {rest} more"),
    };
    Some(prefix_utf16(&text, budget).to_owned())
}

fn item_text(reply: &FlaggedReply) -> String {
    let start = clip_chars(&crate::text::one_line(&reply.start), QUOTE_CHARS);
    let ids = clip_chars(&reply.ids.join(", "), IDS_CHARS);
    format!("reply {} \"{start}\" ({ids})", reply.number)
}
