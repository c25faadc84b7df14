//! The `file://` URL corpus `cargo xtask verify-pi` compares through Pi's own `normalizePath`
//! (Node's `fileURLToPath`) and the port: every WHATWG quirk the gate must read as Node does.

use super::Rng;

/// Hosts: empty, `localhost` in the spellings WHATWG's host parser folds, other hosts, and
/// drive letters, which the parser rereads as the first path segment.
const URL_HOSTS: &[&str] = &[
    "",
    "",
    "",
    "",
    "localhost",
    "LOCALHOST",
    "LocalHost",
    "%6Cocalhost",
    "%6cOCALHOST",
    "\u{ff4c}ocalhost",
    "local\u{ad}host",
    "localhost.",
    "host",
    "127.0.0.1",
    "[::1]",
    "a@b",
    "localhost:80",
    "C:",
    "c|",
    "Z|",
    "C",
    "C:x",
    "%43:",
    "%00",
    "local%20host",
];

/// Path segments: names, every spelling of a dot segment, drive letters in every shape, encoded
/// separators and NULs, bad escapes, characters the parser percent-encodes, Pi's spaces.
const URL_SEGMENTS: &[&str] = &[
    "ws",
    "a",
    "a",
    "..",
    "..",
    ".",
    "%2e",
    "%2E",
    "%2e%2e",
    ".%2E",
    "%2E.",
    "%2e.%2e",
    "...",
    ". .",
    "C:",
    "c|",
    "Z|",
    "C:",
    "%43:",
    "C%7C",
    "C%3A",
    "C|x",
    "CC:",
    ":",
    "|",
    "%2F",
    "%2f",
    "%5C",
    "%00",
    "%25",
    "%252e",
    "%zz",
    "%",
    "%C3%A9",
    "%C3",
    "%E2%82",
    "%ED%A0%80",
    "%C0%AF",
    "\u{e9}",
    "e\u{301}",
    " ",
    "%20",
    "x y",
    "@",
    "~",
    "'",
    "\u{a0}",
    "\u{3000}",
    "\u{202f}",
    "\u{85}",
    "\u{feff}",
    "\u{7f}",
    "\u{1}",
    "\u{1f600}",
    "",
    ";",
    "=",
    "^",
    "`",
    "{",
    "}",
    "<",
    ">",
    "\"",
    "[",
    "]",
    "%3F",
    "%23",
];

/// What stands between segments: slashes, backslashes (a separator in a special URL), and tabs
/// and newlines the parser deletes wherever they are.
const URL_SEPARATORS: &[&str] = &["/", "/", "/", "/", "\\", "//", "\\/", "/\t", "\n/", "/\r", "\t"];

/// What ends a URL: nothing, a slash or dot segment, a query or fragment the path ignores,
/// trailing spaces and controls the parser strips, an encoded NUL.
const URL_ENDS: &[&str] = &[
    "", "", "", "", "/", "/..", "/.", "\\..", "?", "?a/../..", "#", "#x/../..", " ", "  \u{1}",
    "\t", "%00", "?%2F", "#%zz",
];

/// The text before the host: what Pi tests with `/^file:\/\//`, and forms its other steps
/// rewrite first (one `@`, Unicode spaces) or that it does not take for a URL at all.
const URL_STARTS: &[&str] = &[
    "file://",
    "file://",
    "file://",
    "file://",
    "file://",
    "file://",
    "@file://",
    "\u{a0}file://",
    "File://",
    "file:/",
    "file:\\\\",
];

/// Returns true if and only if Pi hands `input` to `fileURLToPath` (after dropping one `@`).
pub fn reaches_file_url_to_path(input: &str) -> bool {
    input.strip_prefix('@').unwrap_or(input).starts_with("file://")
}

/// URLs made of the parts above, from a fixed seed, until `count` of them reach
/// `fileURLToPath` (the others test Pi's own prefix test): `cargo xtask verify-pi` runs them
/// through Pi's own `normalizePath` and the port.
pub fn file_url_corpus(count: usize) -> Vec<String> {
    let mut rng = Rng::for_tree(0x5eed_f11e_2e2e, 0);
    let mut urls = Vec::with_capacity(count * 3 / 2);
    let mut reaching = 0;
    while reaching < count {
        let mut url = String::from(*rng.pick(URL_STARTS));
        url.push_str(rng.pick::<&str>(URL_HOSTS));
        for _ in 0..rng.below(9) {
            url.push_str(rng.pick::<&str>(URL_SEPARATORS));
            url.push_str(rng.pick::<&str>(URL_SEGMENTS));
            if rng.below(6) == 0 {
                url.push_str(rng.pick::<&str>(URL_SEGMENTS));
            }
        }
        url.push_str(rng.pick::<&str>(URL_ENDS));
        reaching += usize::from(reaches_file_url_to_path(&url));
        urls.push(url);
    }
    urls
}
