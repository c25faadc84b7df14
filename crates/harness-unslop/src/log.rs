//! The JSONL log that `MOSAIC_UNSLOP_LOG` names: one JSON object per line, appended whole.
//!
//! Every append is one line built in memory and written with one `write` on a descriptor opened
//! with `O_APPEND`, under an exclusive `flock`; two hooks appending at once therefore never
//! interleave, and a reader that stops at the last newline never sees half a line.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::checker::Finding;
use crate::error::UnslopError;

/// The environment variable naming the log.
pub const LOG_ENV: &str = harness_contract::AdapterEnv::UnslopLog.name();

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// When the line was written: RFC 3339, UTC, milliseconds.
    pub ts: String,
    /// Which harness wrote it: `claude-code` or `pi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<String>,
    /// The harness's session id, when the hook knew it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
}

/// What a log line records; `event` names the variant in snake case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A reply was checked and nothing matched.
    Checked {
        /// The reply, as the check saw it.
        #[serde(flatten)]
        reply: ReplyInfo,
    },
    /// A reply was checked and at least one entry matched.
    Flagged {
        /// The reply, as the check saw it.
        #[serde(flatten)]
        reply: ReplyInfo,
        /// What matched, in the lists file's order.
        findings: Vec<Finding>,
    },
    /// The next turn got the correction notice for the last flagged reply.
    NoticeInjected {
        /// The ids of that reply's findings.
        ids: Vec<String>,
    },
    /// The lists file could not be used; logged once per log.
    BrokenLists {
        /// Why.
        reason: String,
    },
    /// A reply went unchecked because the lists file could not be used.
    SkippedBroken {
        /// Why.
        reason: String,
    },
    /// A hook could not do its job (bad payload, unwritable log, a panic); it still exited 0.
    HookFailed {
        /// The hook: `claude-stop`, `claude-prompt`, `pi-agent-end`, `pi-before-start`.
        hook: String,
        /// Why.
        reason: String,
    },
}

/// What the log keeps of a checked reply: its size and its start, so a note can name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyInfo {
    /// The reply's length in characters.
    pub reply_chars: usize,
    /// The reply's first characters, on one line.
    pub reply_start: String,
}

impl Event {
    /// Returns the `event` name as written in the log.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Checked { .. } => "checked",
            Self::Flagged { .. } => "flagged",
            Self::NoticeInjected { .. } => "notice_injected",
            Self::BrokenLists { .. } => "broken_lists",
            Self::SkippedBroken { .. } => "skipped_broken",
            Self::HookFailed { .. } => "hook_failed",
        }
    }
}

impl Record {
    /// Returns a record of `event` stamped now.
    pub fn now(harness: Option<&str>, session: Option<&str>, event: Event) -> Self {
        Self {
            ts: rfc3339_now(),
            harness: harness.map(str::to_owned),
            session: session.map(str::to_owned),
            event,
        }
    }
}

/// Appends `record` to the log at `path` as one whole line, creating the log with mode 0600.
pub fn append(path: &Path, record: &Record) -> Result<(), UnslopError> {
    let log_error =
        |operation, source| UnslopError::Log { operation, path: path.to_path_buf(), source };
    let mut line = serde_json::to_vec(record)
        .map_err(|error| log_error("append to", std::io::Error::other(error)))?;
    line.push(b'\n');
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| log_error("open", source))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|errno| log_error("lock", errno.into()))?;
    // One write_all of the whole line, under the lock: a concurrent writer cannot slip in between
    // two partial writes, and with O_APPEND each write lands at the end.
    let written = file.write_all(&line).map_err(|source| log_error("append to", source));
    // Closing the descriptor releases the lock either way.
    drop(file);
    written
}

/// The complete lines of a log from a byte offset on.
#[derive(Debug, Default)]
pub struct LogSlice {
    /// The records that parsed, in order.
    pub records: Vec<Record>,
    /// Lines that were not a record this crate reads.
    pub unreadable: usize,
    /// The offset just past the last complete line; where the next read starts.
    pub end: u64,
}

/// Reads the complete lines of the log at `path` from byte `from` on. A missing log reads as
/// empty. A last line without its newline is being written and is left for the next read.
pub fn read_from(path: &Path, from: u64) -> Result<LogSlice, UnslopError> {
    let log_error =
        |source| UnslopError::Log { operation: "read", path: path.to_path_buf(), source };
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(LogSlice { end: from, ..LogSlice::default() });
        }
        Err(error) => return Err(log_error(error)),
    };
    let len = file.metadata().map_err(log_error)?.len();
    // A log shorter than the offset was replaced; read nothing rather than re-tell old lines.
    let from = if from > len { len } else { from };
    file.seek(SeekFrom::Start(from)).map_err(log_error)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(log_error)?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
    let mut slice = LogSlice { end: from + complete as u64, ..LogSlice::default() };
    for line in bytes[..complete].split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Record>(line) {
            Ok(record) => slice.records.push(record),
            Err(_) => slice.unreadable += 1,
        }
    }
    Ok(slice)
}

/// The most [`read_slice`] reads in one call.
pub const MAX_SLICE_BYTES: u64 = 4 * 1024 * 1024;

/// Reads the complete lines of the log at `path` from byte `from` on, as the runner must read a
/// file the session can replace: never through a symbolic link (a link to `/dev/zero`), never
/// blocking (a FIFO in the log's place), only a regular file, and at most [`MAX_SLICE_BYTES`]
/// from `from` (the rest waits for the next call). A missing log reads as empty; anything else
/// that is not a regular file is an error, which the caller counts as a broken check.
pub fn read_slice(path: &Path, from: u64) -> Result<LogSlice, UnslopError> {
    use rustix::fs::{FileType, Mode, OFlags};
    let log_error =
        |source| UnslopError::Log { operation: "read", path: path.to_path_buf(), source };
    let flags =
        OFlags::RDONLY.union(OFlags::NOFOLLOW).union(OFlags::NONBLOCK).union(OFlags::CLOEXEC);
    let fd = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(LogSlice { end: from, ..LogSlice::default() }),
        Err(error) => return Err(log_error(error.into())),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|error| log_error(error.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(log_error(std::io::Error::other("the log is not a regular file")));
    }
    let len = u64::try_from(stat.st_size).unwrap_or(0);
    let mut file = File::from(fd);
    // A log shorter than the offset was replaced; read nothing rather than re-tell old lines.
    let from = from.min(len);
    file.seek(SeekFrom::Start(from)).map_err(log_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_SLICE_BYTES).read_to_end(&mut bytes).map_err(log_error)?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |at| at + 1);
    if complete == 0 && bytes.len() as u64 >= MAX_SLICE_BYTES {
        return Err(log_error(std::io::Error::other(format!(
            "a line of the log is over {MAX_SLICE_BYTES} bytes"
        ))));
    }
    Ok(parse_lines(&bytes[..complete], from))
}

fn parse_lines(bytes: &[u8], from: u64) -> LogSlice {
    let mut slice = LogSlice { end: from + bytes.len() as u64, ..LogSlice::default() };
    for line in bytes.split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Record>(line) {
            Ok(record) => slice.records.push(record),
            Err(_) => slice.unreadable += 1,
        }
    }
    slice
}

/// Returns true if and only if the log at `path` already holds a `broken_lists` line. A log that
/// cannot be read counts as not holding one, so the reason is logged rather than lost.
pub(crate) fn has_broken_lists(path: &Path) -> bool {
    std::fs::read(path)
        .is_ok_and(|bytes| bytes.windows(BROKEN_NEEDLE.len()).any(|window| window == BROKEN_NEEDLE))
}

const BROKEN_NEEDLE: &[u8] = br#""event":"broken_lists""#;

/// Returns the current time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn rfc3339_now() -> String {
    rfc3339(jiff::Timestamp::now())
}

/// `at` in UTC with milliseconds, truncated (RFC 3339, as JavaScript's `toISOString` writes it).
fn rfc3339(at: jiff::Timestamp) -> String {
    let millis = jiff::Timestamp::from_millisecond(at.as_millisecond()).unwrap_or(at);
    format!("{millis:.3}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        let at = |ms: i64| jiff::Timestamp::from_millisecond(ms).unwrap();
        assert_eq!(rfc3339(at(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(1_767_225_600_123)), "2026-01-01T00:00:00.123Z");
        let late = jiff::Timestamp::new(1_767_225_600, 999_999_999).unwrap();
        assert_eq!(rfc3339(late), "2026-01-01T00:00:00.999Z");
        assert_eq!(rfc3339_now().len(), "2026-11-30T03:40:00.000Z".len());
    }
}
