//! The checker on the default list: one line per case, the reply and the ids it must yield.

use std::time::{Duration, Instant};

use super::default_checker;

#[track_caller]
fn check(reply: &str, expected: &[&str]) {
    let ids: Vec<String> = default_checker().check(reply).into_iter().map(|f| f.id).collect();
    assert_eq!(ids, expected, "{reply:?}");
}

#[test]
fn replies_and_their_findings() {
    check("The runner starts one turn per message.", &[]);
    check("Let us delve into it.", &["delve"]);
    check("DELVING deeper", &["delve"]);
    check("shelve the patch", &[]);
    check("Rename the file with an underscore.", &[]);
    check("This underscores the point.", &["underscore-verb"]);
    check("It is important to note that it works.", &["important-to-note"]);
    check("Tests pass.\nIn conclusion, ship it.", &["in-conclusion"]);
    check("The overall plan works.", &[]);
    check("Certainly! Done.", &["certainly"]);
    check("It is certainly done.", &[]);
    check("one \u{2014} two \u{2014} three", &[]);
    check("one \u{2014} two \u{2014} three \u{2014} four", &["em-dash-run"]);
    check("one \u{2014} two\n\u{2014} three \u{2014} four", &[]);
    check("As an AI language model, I cannot.", &["as-an-ai"]);
    check("d\u{e9}lve is not delve", &["delve"]);
    check(
        "Certainly! We delve into a rich tapestry.",
        &["delve", "tapestry", "rich-heritage", "certainly"],
    );
}

#[test]
fn a_finding_names_its_source_and_the_first_match() {
    let findings = default_checker().check("We Delve. They delved. Nobody delves.");
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].id, "delve");
    assert_eq!(findings[0].matched, "Delve");
    assert!(findings[0].source.contains("arXiv:2406.07016"), "{}", findings[0].source);
}

#[test]
fn time_is_linear_on_adversarial_replies() {
    let checker = default_checker();
    // Inputs that make a backtracking engine go quadratic or worse on these patterns: many
    // openings of `not only … but` and `it's not just …,` that never close, and long dash runs.
    let inputs = [
        "not only ".repeat(60_000),
        "it's not just ".repeat(40_000),
        "\u{2014}a".repeat(100_000),
        "let me know ".repeat(40_000),
    ];
    for input in &inputs {
        let started = Instant::now();
        let _ = checker.check(input);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(5), "{} bytes took {took:?}", input.len());
    }
}
