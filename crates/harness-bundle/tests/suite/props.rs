//! A property over skill names and contents: the build either copies every file byte for byte
//! into the bundle and the prompt, or refuses with `bundle-refused` exactly when an oracle says
//! a name, an encoding, the closing tag or the size is wrong, and then leaves nothing behind.

use harness_bundle::{Route, SKILL_BYTES, build_bundle};
use proptest::prelude::*;

use super::env::{Env, request, resolved};

/// Name pieces: good ones, and some outside `[A-Za-z0-9._/-]`.
const NAME_PIECES: &[&str] =
    &["a", "B", "9", ".", "_", "-", "notes", "x.md", " ", "\u{e9}", ":", "~"];
/// Content pieces: text, the closing tag, a stray byte that is not UTF-8.
const TEXT_PIECES: &[&[u8]] =
    &[b"hello", b"\n", b"</skill-file>", b"<skill-file", b"\xff", b"\xc3\xa9", b"   "];

fn name() -> impl Strategy<Value = String> {
    prop::collection::vec(0..NAME_PIECES.len(), 1..4)
        .prop_map(|parts| parts.into_iter().map(|i| NAME_PIECES[i]).collect::<String>())
        .prop_filter("not a special name", |name| name != "." && name != ".." && name != "SKILL.md")
}

fn content() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0..TEXT_PIECES.len(), 0..8)
        .prop_map(|parts| parts.into_iter().flat_map(|i| TEXT_PIECES[i].to_vec()).collect())
}

fn allowed(name: &str) -> bool {
    name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-'))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn files_are_copied_byte_for_byte_or_refused_for_a_reason(
        files in prop::collection::btree_map(name(), content(), 1..4),
        big in prop::bool::weighted(0.1),
    ) {
        let env = Env::new();
        let dir = env.skills.join("gen");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), b"# gen\n").unwrap();
        let mut total = 6;
        for (name, bytes) in &files {
            std::fs::write(dir.join(name), bytes).unwrap();
            total += bytes.len();
        }
        if big {
            std::fs::write(dir.join("pad.txt"), vec![b'x'; SKILL_BYTES]).unwrap();
            total += SKILL_BYTES;
        }
        let expect_refused = total > SKILL_BYTES
            || files.iter().any(|(name, bytes)| {
                !allowed(name)
                    || std::str::from_utf8(bytes).is_err()
                    || std::str::from_utf8(bytes).is_ok_and(|text| text.contains("</skill-file>"))
            });
        let mut instance = resolved("pm");
        instance.skills = vec!["gen".to_owned()];
        match build_bundle(&request(&env, &instance, Route::Primary)) {
            Ok(bundle) => {
                prop_assert!(!expect_refused, "built although the oracle refuses: {files:?}");
                let prompt = std::fs::read_to_string(bundle.dir.join("prompt.md")).unwrap();
                for (name, bytes) in &files {
                    let copy = std::fs::read(bundle.dir.join("skills/gen").join(name)).unwrap();
                    prop_assert_eq!(&copy, bytes);
                    let text = std::str::from_utf8(bytes).unwrap();
                    let open = format!("<skill-file skill=\"gen\" path=\"{name}\">\n{text}");
                    prop_assert!(prompt.contains(&open), "{name} is not in the prompt verbatim");
                }
            }
            Err(error) => {
                prop_assert!(expect_refused, "refused although the oracle allows: {error}");
                prop_assert_eq!(error.code(), "bundle-refused");
                prop_assert!(env.out_is_empty());
            }
        }
    }
}
