//! The reply cap: a reply is the compact JSON whole, or an error naming its size and the cap.

use harness_tools::{REPLY_CAP, reply_len, reply_text};
use proptest::prelude::*;
use serde_json::{Value, json};

#[test]
fn a_reply_is_compact_json() {
    let value = json!({"tasks": [{"ref": "T-1", "title": "a b"}], "total": 1});
    assert_eq!(reply_text(&value).unwrap(), r#"{"tasks":[{"ref":"T-1","title":"a b"}],"total":1}"#);
}

#[test]
fn the_cap_counts_utf16_units_and_the_error_names_size_and_cap() {
    // A string of n chars serializes to n + 2 (the quotes).
    let at_cap = Value::String("a".repeat(REPLY_CAP - 2));
    assert_eq!(reply_text(&at_cap).unwrap().len(), REPLY_CAP);
    let over = Value::String("a".repeat(REPLY_CAP - 1));
    let error = reply_text(&over).unwrap_err();
    assert_eq!((error.size, error.cap), (REPLY_CAP + 1, REPLY_CAP));
    let text = error.to_string();
    assert!(text.contains("40001") && text.contains("40000") && text.contains("narrow"), "{text}");
    // An emoji is two UTF-16 units, as JavaScript counts it.
    assert_eq!(reply_len("😀"), 2);
    let emoji = Value::String("😀".repeat(REPLY_CAP / 2));
    assert_eq!(reply_text(&emoji).unwrap_err().size, REPLY_CAP + 2);
}

proptest! {
    /// The cap never cuts a reply: the text is the whole compact JSON, or there is no text.
    #[test]
    fn the_cap_never_cuts_a_reply(text in ".{0,200}", repeat in 0usize..400) {
        let value = json!({"items": vec![text.clone(); repeat]});
        let whole = value.to_string();
        match reply_text(&value) {
            Ok(reply) => {
                prop_assert_eq!(&reply, &whole);
                prop_assert!(reply_len(&reply) <= REPLY_CAP);
            }
            Err(error) => {
                prop_assert_eq!(error.size, reply_len(&whole));
                prop_assert!(error.size > REPLY_CAP);
            }
        }
    }
}
