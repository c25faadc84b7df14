//! lists.json: the shipped list is valid and cites a source for every entry; a broken file is
//! refused with a reason that says what is wrong.

use harness_unslop::{Checker, Lists};

use super::{default_checker, default_lists_path};

#[test]
fn the_default_list_is_valid_and_every_entry_cites_a_source_and_flags_its_example() {
    let lists = Lists::load(&default_lists_path()).unwrap();
    let checker = default_checker();
    assert!(lists.entries().len() >= 30, "{}", lists.entries().len());
    for entry in lists.entries() {
        let cites = ["https://", "arXiv:"].iter().any(|mark| entry.source.contains(mark));
        assert!(cites, "{}: the source names no URL or paper: {}", entry.id, entry.source);
        let example =
            entry.example.as_deref().unwrap_or_else(|| panic!("{} has no example", entry.id));
        let ids: Vec<String> = checker.check(example).into_iter().map(|f| f.id).collect();
        assert!(ids.contains(&entry.id), "{}: its example {example:?} gave {ids:?}", entry.id);
    }
}

/// Asserts that `json` is refused with a message containing `expected`.
#[track_caller]
fn check_refused(json: &str, expected: &str) {
    let error = match Lists::from_json(json.as_bytes()).and_then(Checker::new) {
        Ok(_) => panic!("accepted: {json}"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains(expected), "{json}\n  gave {error:?}\n  expected {expected:?}");
}

fn one(pattern: &str, flags: &str) -> String {
    serde_json::json!({"version": 1, "entries": [
        {"id": "x", "pattern": pattern, "flags": flags, "source": "a test"}
    ]})
    .to_string()
}

#[test]
fn broken_lists_are_refused_with_their_reason() {
    check_refused("{", "not valid");
    check_refused(r#"{"version": 2, "entries": []}"#, "version 2");
    check_refused(r#"{"version": 1, "entries": []}"#, "no entries");
    check_refused(r#"{"version": 1, "entries": [], "extra": 1}"#, "unknown field");
    check_refused(
        r#"{"version": 1, "entries": [{"id": "x", "pattern": "a", "source": "s", "colour": 1}]}"#,
        "unknown field",
    );
    check_refused(
        r#"{"version": 1, "entries": [{"id": "x", "pattern": "a", "source": "s"},
                                      {"id": "x", "pattern": "b", "source": "s"}]}"#,
        "appears twice",
    );
    check_refused(
        r#"{"version": 1, "entries": [{"id": "Bad Id", "pattern": "a", "source": "s"}]}"#,
        "the id",
    );
    check_refused(
        r#"{"version": 1, "entries": [{"id": "x", "pattern": "a", "source": " "}]}"#,
        "no source",
    );
    check_refused(&one("a", "g"), "only \"\" and \"i\"");
    check_refused(&one("a", "ii"), "only \"\" and \"i\"");
    check_refused(&one("", ""), "1 to 2000 bytes");
    check_refused(&one("(unclosed", ""), "does not parse");
    check_refused(&one("a*", ""), "empty string");
    check_refused(&one(r"\b", ""), "empty string");
}

#[test]
fn what_javascript_reads_differently_is_refused() {
    check_refused(&one("(?i)delve", ""), "only `(?:` groups");
    check_refused(&one("(?P<w>delve)", ""), "only `(?:` groups");
    check_refused(&one("delve(?=s)", ""), "only `(?:` groups");
    check_refused(&one(r"(a)\1", ""), "does not parse");
    check_refused(&one(r"\Adelve", ""), r"`\A`");
    check_refused(&one(r"delve\z", ""), r"`\z`");
    check_refused(&one(r"\pL+", ""), r"`\p`");
    check_refused(&one(r"\<delve\>", ""), r"`\<`");
    check_refused(&one("[[:alpha:]]+", ""), "POSIX");
    check_refused(&one("[a-z&&[^x]]", ""), "not portable");
    check_refused(&one("[a-z--x]", ""), "set operations");
}

#[test]
fn a_lists_file_that_cannot_be_read_names_its_path() {
    let error = Lists::load(std::path::Path::new("/no/such/lists.json")).unwrap_err();
    assert!(error.to_string().contains("/no/such/lists.json"), "{error}");
}
