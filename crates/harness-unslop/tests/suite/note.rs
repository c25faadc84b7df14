//! The RESULT note: cases for its text, and a property over arbitrary logs and turns that the
//! note never exceeds 600 characters and the RESULT never exceeds 32768, that every flagged reply
//! is told once, in the first RESULT that goes out after it, and a broken check once per run.

use std::io::Write;
use std::path::Path;

use harness_unslop::{ANSWER_LIMIT, NOTE_LIMIT, RESULT_LIMIT, ResultNotes, clip_answer, utf16_len};
use proptest::prelude::*;
use serde_json::{Value, json};

fn flagged(start: &str, ids: &[&str]) -> Value {
    let findings: Vec<Value> =
        ids.iter().map(|id| json!({"id": id, "source": "s", "match": id})).collect();
    json!({"ts": "t", "event": "flagged", "reply_chars": start.len(), "reply_start": start, "findings": findings})
}

fn checked() -> Value {
    json!({"ts": "t", "event": "checked", "reply_chars": 1, "reply_start": "ok"})
}

fn write_lines(log: &Path, lines: &[Value]) {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    for line in lines {
        writeln!(file, "{line}").unwrap();
    }
}

#[test]
fn the_note_names_flagged_replies_and_tells_a_broken_check_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("unslop.jsonl");
    let mut notes = ResultNotes::new(&log);
    notes.gather();
    assert_eq!(notes.compose("answer").text(), "answer", "nothing to tell, no note");

    write_lines(&log, &[checked(), flagged("Certainly! We delve", &["delve", "certainly"])]);
    let gained = notes.gather();
    assert_eq!((gained.checked, gained.flagged), (2, 1));
    // A turn that sends no reply: the note waits.
    write_lines(&log, &[flagged("A rich tapestry", &["tapestry"])]);
    notes.gather();
    let result = notes.compose("Done.");
    assert_eq!(
        result.text(),
        "Done.\n\nunslop: 2 replies flagged: reply 2 \"Certainly! We delve\" (delve, certainly); \
         reply 3 \"A rich tapestry\" (tapestry)"
    );
    // The send failed: nothing is marked told, and the next RESULT carries the same note.
    assert_eq!(notes.compose("Again.").note(), result.note());
    notes.sent(&result);
    assert_eq!(notes.compose("Next.").text(), "Next.");

    write_lines(
        &log,
        &[
            json!({"ts": "t", "event": "broken_lists", "reason": "lists.json: not valid"}),
            json!({"ts": "t", "event": "skipped_broken", "reason": "lists.json: not valid"}),
        ],
    );
    notes.gather();
    let result = notes.compose("Later.");
    assert_eq!(
        result.note(),
        "unslop: the check is broken, replies go unchecked: lists.json: not valid"
    );
    notes.sent(&result);
    write_lines(
        &log,
        &[json!({"ts": "t", "event": "hook_failed", "hook": "claude-stop", "reason": "x"})],
    );
    notes.gather();
    assert_eq!(notes.compose("Once only.").text(), "Once only.");
}

#[test]
fn many_flagged_replies_are_named_until_the_note_is_full_then_counted() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("unslop.jsonl");
    let lines: Vec<Value> =
        (0..30).map(|n| flagged(&format!("reply number {n} with delve"), &["delve"])).collect();
    write_lines(&log, &lines);
    let mut notes = ResultNotes::new(&log);
    notes.gather();
    let note = notes.compose("x").note().to_owned();
    assert!(note.starts_with("unslop: 30 replies flagged: reply 1 "), "{note}");
    assert!(note.contains("; and ") && note.ends_with(" more"), "{note}");
    assert!(utf16_len(&note) <= NOTE_LIMIT, "{}", utf16_len(&note));
}

#[test]
fn a_long_answer_is_clipped_with_a_marker() {
    let answer = "\u{1F600}".repeat(20_000);
    let clipped = clip_answer(&answer);
    assert!(utf16_len(&clipped) <= ANSWER_LIMIT);
    assert!(
        clipped.ends_with("[answer clipped at 32000 characters]"),
        "{}",
        &clipped[clipped.len() - 60..]
    );
    assert_eq!(clip_answer("short"), "short");
}

#[test]
fn an_unreadable_log_is_a_broken_check_told_once() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the log should be: reading it fails.
    let mut notes = ResultNotes::new(dir.path());
    assert!(notes.gather().broken.is_some());
    let result = notes.compose("a");
    assert!(result.note().contains("the check is broken"), "{}", result.note());
    notes.sent(&result);
    notes.gather();
    assert_eq!(notes.compose("b").text(), "b");
}

/// One line the property writes into the log.
#[derive(Debug, Clone)]
enum Line {
    Checked,
    Flagged { start: String, ids: Vec<String> },
    Broken(String),
    HookFailed(String),
    Notice,
    Garbage(String),
}

/// One step of a run.
#[derive(Debug, Clone)]
enum Step {
    /// Hooks wrote these lines.
    Log(Vec<Line>),
    /// A turn ended: the runner gathers, then sends a reply (or not).
    Turn { answer: String, send: Send },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Send {
    NoReply,
    Fails,
    Succeeds,
}

fn any_text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..max).prop_map(|chars| chars.into_iter().collect())
}

fn any_line() -> impl Strategy<Value = Line> {
    prop_oneof![
        Just(Line::Checked),
        (any_text(200), prop::collection::vec(any_text(90), 0..40))
            .prop_map(|(start, ids)| Line::Flagged { start, ids }),
        any_text(3000).prop_map(Line::Broken),
        any_text(500).prop_map(Line::HookFailed),
        Just(Line::Notice),
        any_text(100).prop_map(Line::Garbage),
    ]
}

fn any_answer() -> impl Strategy<Value = String> {
    prop_oneof![
        any_text(50),
        (0usize..40_000, any::<char>(), any_text(20)).prop_map(|(n, c, tail)| std::iter::repeat_n(
            c, n
        )
        .collect::<String>()
            + &tail),
    ]
}

fn any_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        prop::collection::vec(any_line(), 0..20).prop_map(Step::Log),
        (any_answer(), prop_oneof![Just(Send::NoReply), Just(Send::Fails), Just(Send::Succeeds)])
            .prop_map(|(answer, send)| Step::Turn { answer, send }),
    ]
}

fn line_text(line: &Line) -> String {
    match line {
        Line::Checked => checked().to_string(),
        Line::Flagged { start, ids } => {
            flagged(start, &ids.iter().map(String::as_str).collect::<Vec<_>>()).to_string()
        }
        Line::Broken(reason) => {
            json!({"ts": "t", "event": "broken_lists", "reason": reason}).to_string()
        }
        Line::HookFailed(reason) => {
            json!({"ts": "t", "event": "hook_failed", "hook": "pi-agent-end", "reason": reason})
                .to_string()
        }
        Line::Notice => json!({"ts": "t", "event": "notice_injected", "ids": []}).to_string(),
        Line::Garbage(text) => text.replace('\n', " "),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn the_note_and_the_result_stay_within_their_limits(steps in prop::collection::vec(any_step(), 1..12)) {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("unslop.jsonl");
        let mut notes = ResultNotes::new(&log);
        // What the log holds that no successful RESULT has told yet.
        let mut untold_flagged = 0usize;
        let mut gathered_flagged = 0usize;
        let mut broken_seen = false;
        let mut broken_told = 0usize;
        for step in steps {
            match step {
                Step::Log(lines) => {
                    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
                    for line in &lines {
                        writeln!(file, "{}", line_text(line)).unwrap();
                    }
                }
                Step::Turn { answer, send } => {
                    let gained = notes.gather();
                    gathered_flagged += gained.flagged;
                    untold_flagged += gained.flagged;
                    broken_seen |= gained.broken.is_some();
                    if send == Send::NoReply {
                        continue;
                    }
                    let result = notes.compose(&answer);
                    let note = result.note();
                    prop_assert!(utf16_len(note) <= NOTE_LIMIT, "note of {} units", utf16_len(note));
                    prop_assert!(note.chars().count() <= NOTE_LIMIT);
                    prop_assert!(utf16_len(result.text()) <= RESULT_LIMIT, "RESULT of {} units", utf16_len(result.text()));
                    prop_assert!(result.text().starts_with(&clip_answer(&answer)));
                    if utf16_len(&answer) <= ANSWER_LIMIT {
                        prop_assert!(result.text().starts_with(&answer));
                    }
                    let tells_broken = note.contains("unslop: the check is broken");
                    prop_assert_eq!(tells_broken, broken_seen && broken_told == 0, "{}", note);
                    if untold_flagged > 0 {
                        let what = if untold_flagged == 1 { "reply" } else { "replies" };
                        let header = format!("unslop: {untold_flagged} {what} flagged");
                        prop_assert!(note.starts_with(&header), "{:?} does not start {:?}", note, header);
                    } else {
                        prop_assert!(!note.contains(" flagged"), "{}", note);
                    }
                    if send == Send::Succeeds {
                        notes.sent(&result);
                        untold_flagged = 0;
                        broken_told += usize::from(tells_broken);
                    }
                }
            }
        }
        prop_assert!(broken_told <= 1);
        prop_assert_eq!(notes.pending().len(), untold_flagged);
        prop_assert!(gathered_flagged >= untold_flagged);
    }
}
