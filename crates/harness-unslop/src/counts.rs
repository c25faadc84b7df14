//! `unslop_counts`: what a finished session's log says, in numbers.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::error::UnslopError;
use crate::log::{Event, read_from};

/// The totals of one log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UnslopCounts {
    /// Replies that got a verdict: `checked` plus `flagged` lines.
    pub replies_checked: u64,
    /// Replies flagged.
    pub replies_flagged: u64,
    /// Per pattern id, the flagged replies it matched (one per reply, however often it matched).
    pub findings: BTreeMap<String, u64>,
    /// `notice_injected` lines: turns that got the correction notice.
    pub notices: u64,
    /// Replies that went unchecked because the lists file was broken (`skipped_broken`).
    pub skipped_broken: u64,
    /// Hook runs that failed (`hook_failed`).
    pub hook_failures: u64,
    /// The first reason the check broke: of the first `broken_lists`, `skipped_broken` or
    /// `hook_failed` line, in that line's words.
    pub first_broken_reason: Option<String>,
    /// Lines that were not a record this crate reads.
    pub unreadable_lines: u64,
}

/// Reads the log at `path` and counts it. A missing log counts as empty: no hook ever wrote.
pub fn unslop_counts(path: &Path) -> Result<UnslopCounts, UnslopError> {
    let slice = read_from(path, 0)?;
    let mut counts =
        UnslopCounts { unreadable_lines: slice.unreadable as u64, ..Default::default() };
    for record in slice.records {
        let broken = match record.event {
            Event::Checked { .. } => {
                counts.replies_checked += 1;
                None
            }
            Event::Flagged { findings, .. } => {
                counts.replies_checked += 1;
                counts.replies_flagged += 1;
                for finding in findings {
                    *counts.findings.entry(finding.id).or_default() += 1;
                }
                None
            }
            Event::NoticeInjected { .. } => {
                counts.notices += 1;
                None
            }
            Event::BrokenLists { reason } => Some(reason),
            Event::SkippedBroken { reason } => {
                counts.skipped_broken += 1;
                Some(reason)
            }
            Event::HookFailed { hook, reason } => {
                counts.hook_failures += 1;
                Some(format!("{hook}: {reason}"))
            }
        };
        if counts.first_broken_reason.is_none() {
            counts.first_broken_reason = broken;
        }
    }
    Ok(counts)
}
