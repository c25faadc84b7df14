//! unslop_counts over a log written as data.

use std::collections::BTreeMap;

use harness_unslop::{UnslopCounts, unslop_counts};

#[test]
fn a_log_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("unslop.jsonl");
    let lines = [
        r#"{"ts":"t","event":"checked","reply_chars":3,"reply_start":"abc"}"#,
        r#"{"ts":"t","event":"flagged","reply_chars":5,"reply_start":"delve","findings":[{"id":"delve","source":"s","match":"delve"},{"id":"realm","source":"s","match":"realm"}]}"#,
        r#"{"ts":"t","event":"notice_injected","ids":["delve","realm"]}"#,
        r#"{"ts":"t","event":"flagged","reply_chars":5,"reply_start":"delve","findings":[{"id":"delve","source":"s","match":"delve"}]}"#,
        r#"{"ts":"t","event":"hook_failed","hook":"claude-stop","reason":"the payload is not JSON"}"#,
        r#"{"ts":"t","event":"broken_lists","reason":"lists.json: not valid"}"#,
        r#"{"ts":"t","event":"skipped_broken","reason":"lists.json: not valid"}"#,
        r#"{"ts":"t","event":"something_new"}"#,
        "",
    ];
    std::fs::write(&log, lines.join("\n")).unwrap();
    let counts = unslop_counts(&log).unwrap();
    assert_eq!(
        counts,
        UnslopCounts {
            replies_checked: 3,
            replies_flagged: 2,
            findings: BTreeMap::from([("delve".into(), 2), ("realm".into(), 1)]),
            notices: 1,
            skipped_broken: 1,
            hook_failures: 1,
            first_broken_reason: Some("claude-stop: the payload is not JSON".into()),
            unreadable_lines: 1,
        }
    );
    assert_eq!(unslop_counts(&dir.path().join("none")).unwrap(), UnslopCounts::default());
}
