//! Every pattern of the shipped list is accepted by both the `regex` crate and Node 24's
//! JavaScript `RegExp` (with and without the `u` flag), and both find the same entries, with the
//! same first match, on every entry's example and on a corpus of near misses.
//!
//! Node is `.tools/bin/node`; under HARNESS_REQUIRE_CLIS=1 the test fails without it.

use std::io::Write;
use std::process::{Command, Stdio};

use harness_unslop::Lists;
use serde_json::{Value, json};

use super::{default_checker, default_lists_path};

const SCRIPT: &str = r#"
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const { entries, texts } = JSON.parse(input);
  const compiled = [];
  const refused = [];
  for (const entry of entries) {
    try {
      new RegExp(entry.pattern, entry.flags + "u");
      compiled.push([entry.id, new RegExp(entry.pattern, entry.flags)]);
    } catch (error) {
      refused.push(`${entry.id}: ${error.message}`);
    }
  }
  const results = texts.map((text) =>
    compiled.flatMap(([id, re]) => {
      const m = re.exec(text);
      return m ? [[id, m[0]]] : [];
    }));
  process.stdout.write(JSON.stringify({ refused, results }));
});
"#;

const NEAR_MISSES: &[&str] = &[
    "The runner starts one turn per message and sends its output back.",
    "shelve, delver, delves, DELVE, Delving",
    "snake_case uses an underscore; it underscored nothing",
    "showcase SHOWCASED show case",
    "realm realms overrealm",
    "It's not just fast, it's safe. It is not only fast but safe.",
    "Certainly, yes.\nAbsolutely! Of course,",
    "overall\nOverall, fine. In summary: done",
    "one \u{2014} two \u{2014} three \u{2014} four\nfive \u{2014} six",
    "As an AI, as a large language model, as an AI language model",
    "As of my last knowledge update; up to my training cut-off",
    "let me know whether; feel free to ask any",
    "d\u{e9}lve caf\u{e9} na\u{ef}ve \u{1F600} delve",
    "game-changer gamechanger revolutionised revolutionize",
    "plays a key role, played an important role",
];

#[test]
fn every_pattern_is_accepted_by_both_engines_and_they_agree() {
    let Some(node) = harness_testkit::require_node() else { return };
    let lists = Lists::load(&default_lists_path()).unwrap();
    let mut texts: Vec<String> =
        lists.entries().iter().filter_map(|entry| entry.example.clone()).collect();
    texts.extend(NEAR_MISSES.iter().map(|text| (*text).to_owned()));
    let entries: Vec<Value> = lists
        .entries()
        .iter()
        .map(|e| json!({"id": e.id, "pattern": e.pattern, "flags": e.flags}))
        .collect();

    #[expect(clippy::disallowed_methods, reason = "the test runs Node to compile the patterns")]
    let mut command = Command::new(&node);
    command
        .args(["--input-type=module", "-e", SCRIPT])
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let input = json!({"entries": entries, "texts": texts}).to_string();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "node failed: {stderr}");
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["refused"], json!([]), "patterns JavaScript refuses");

    let checker = default_checker();
    for (text, js) in texts.iter().zip(answer["results"].as_array().unwrap()) {
        let rust: Vec<(String, String)> =
            checker.check(text).into_iter().map(|f| (f.id, f.matched)).collect();
        let js: Vec<(String, String)> = js
            .as_array()
            .unwrap()
            .iter()
            .map(|pair| {
                (pair[0].as_str().unwrap().to_owned(), pair[1].as_str().unwrap().trim().to_owned())
            })
            .collect();
        assert_eq!(rust, js, "Rust and JavaScript disagree on {text:?}");
    }
}
