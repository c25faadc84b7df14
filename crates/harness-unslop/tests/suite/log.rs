//! The log: appends stay whole under concurrent writers, and a reader never takes half a line.

use std::io::Write;

use harness_unslop::log::{Event, Record, ReplyInfo, append, read_from};

fn big_record(writer: usize, n: usize) -> Record {
    // Lines of about 40 KiB, well past any size the kernel would write in one piece by chance.
    let start = format!("writer {writer} line {n} ") + &"x".repeat(40_000);
    Record::now(
        Some("pi"),
        Some(&format!("w{writer}")),
        Event::Checked { reply: ReplyInfo { reply_chars: n, reply_start: start } },
    )
}

#[test]
fn concurrent_appends_stay_whole() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("unslop.jsonl");
    const WRITERS: usize = 8;
    const LINES: usize = 50;
    std::thread::scope(|scope| {
        for writer in 0..WRITERS {
            let log = &log;
            scope.spawn(move || {
                for n in 0..LINES {
                    append(log, &big_record(writer, n)).unwrap();
                }
            });
        }
    });
    let slice = read_from(&log, 0).unwrap();
    assert_eq!(slice.unreadable, 0);
    assert_eq!(slice.records.len(), WRITERS * LINES);
    for writer in 0..WRITERS {
        let session = format!("w{writer}");
        let numbers: Vec<usize> = slice
            .records
            .iter()
            .filter(|record| record.session.as_deref() == Some(session.as_str()))
            .map(|record| match &record.event {
                Event::Checked { reply } => reply.reply_chars,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(numbers, (0..LINES).collect::<Vec<_>>(), "writer {writer}'s lines in order");
    }
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&log).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_reader_leaves_a_line_without_its_newline_for_later() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("unslop.jsonl");
    let record = big_record(0, 1);
    append(&log, &record).unwrap();
    let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(br#"{"ts":"x","event":"chec"#).unwrap();
    let first = read_from(&log, 0).unwrap();
    assert_eq!((first.records.len(), first.unreadable), (1, 0));
    file.write_all(b"ked\",\"reply_chars\":2,\"reply_start\":\"b\"}\nnot json\n").unwrap();
    let second = read_from(&log, first.end).unwrap();
    assert_eq!((second.records.len(), second.unreadable), (1, 1));
    assert_eq!(second.records[0].event.name(), "checked");
    let missing = read_from(&dir.path().join("none.jsonl"), 0).unwrap();
    assert_eq!((missing.records.len(), missing.end), (0, 0));
}
