//! `lists.json`: the slop patterns, each with an id, a source and flags, and the rules a file must
//! keep to be used at all.
//!
//! A pattern is written in the common subset of the Rust `regex` crate and JavaScript's `RegExp`
//! (no lookaround, no backreferences, no inline flags), so the same list means the same thing
//! wherever it is read; the crate's tests compile every pattern of the shipped list in both.

use std::io::Read;
use std::path::Path;

use regex_syntax::hir::Hir;
use serde::Deserialize;

use crate::error::UnslopError;

/// The largest lists file accepted, in bytes.
pub const MAX_LISTS_BYTES: u64 = 1 << 20;
/// The most entries a lists file may hold.
pub const MAX_ENTRIES: usize = 1000;
/// The longest pattern accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 2000;
/// The only `version` this crate reads.
pub const LISTS_VERSION: u64 = 1;

/// A validated lists file, each pattern parsed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lists {
    entries: Vec<Entry>,
    hirs: Vec<Hir>,
}

/// One slop pattern.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// A stable name: lowercase ASCII letters, digits and `-`, at most 64 bytes.
    pub id: String,
    /// The pattern, in the common subset of the `regex` crate and JavaScript.
    pub pattern: String,
    /// Where the pattern comes from: a style guide or study, with its title and URL or venue.
    pub source: String,
    /// Flags: empty, or `i` (ASCII case-insensitive).
    #[serde(default)]
    pub flags: String,
    /// A sentence the pattern flags; the tests check it in both engines.
    #[serde(default)]
    pub example: Option<String>,
    /// A short note on why the pattern is there, for people reading the file.
    #[serde(default)]
    pub note: Option<String>,
}

impl Entry {
    /// Returns true if and only if the entry matches without regard to ASCII case.
    pub fn case_insensitive(&self) -> bool {
        self.flags.contains('i')
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListsFile {
    version: u64,
    #[serde(default)]
    #[expect(dead_code, reason = "read so that deny_unknown_fields accepts it; for people only")]
    description: Option<String>,
    entries: Vec<Entry>,
}

impl Lists {
    /// Reads and validates the lists file at `path`.
    pub fn load(path: &Path) -> Result<Self, UnslopError> {
        let read_error =
            |source: std::io::Error| UnslopError::ReadLists { path: path.to_path_buf(), source };
        let file = std::fs::File::open(path).map_err(read_error)?;
        let mut bytes = Vec::new();
        file.take(MAX_LISTS_BYTES + 1).read_to_end(&mut bytes).map_err(read_error)?;
        if bytes.len() as u64 > MAX_LISTS_BYTES {
            return Err(UnslopError::ListsTooLarge {
                path: path.to_path_buf(),
                limit: MAX_LISTS_BYTES,
            });
        }
        Self::from_json(&bytes)
    }

    /// Parses and validates a lists file's contents.
    pub fn from_json(bytes: &[u8]) -> Result<Self, UnslopError> {
        let file: ListsFile = serde_json::from_slice(bytes).map_err(UnslopError::ListsJson)?;
        if file.version != LISTS_VERSION {
            return Err(UnslopError::ListsRule(format!(
                "version {} is not {LISTS_VERSION}",
                file.version
            )));
        }
        Self::new(file.entries)
    }

    /// Validates `entries` as a list.
    pub fn new(entries: Vec<Entry>) -> Result<Self, UnslopError> {
        if entries.is_empty() {
            return Err(UnslopError::ListsRule("it has no entries".into()));
        }
        if entries.len() > MAX_ENTRIES {
            return Err(UnslopError::ListsRule(format!(
                "it has {} entries, more than {MAX_ENTRIES}",
                entries.len()
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        // One parser per flag setting, reused: parsing is most of what loading a list costs.
        let parser = |case_insensitive| {
            regex_syntax::ParserBuilder::new()
                .unicode(false)
                .utf8(false)
                .case_insensitive(case_insensitive)
                .build()
        };
        let mut parsers = [parser(false), parser(true)];
        let mut hirs = Vec::with_capacity(entries.len());
        for entry in &entries {
            let parser = &mut parsers[usize::from(entry.case_insensitive())];
            hirs.push(check_entry(entry, parser)?);
            if !seen.insert(entry.id.as_str()) {
                return Err(UnslopError::ListsRule(format!("the id {:?} appears twice", entry.id)));
            }
        }
        Ok(Self { entries, hirs })
    }

    /// Returns the entries in file order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Returns the parsed patterns, in the entries' order.
    pub(crate) fn hirs(&self) -> &[Hir] {
        &self.hirs
    }

    /// Returns the entries and their parsed patterns.
    pub(crate) fn into_parts(self) -> (Vec<Entry>, Vec<Hir>) {
        (self.entries, self.hirs)
    }
}

fn check_entry(entry: &Entry, parser: &mut regex_syntax::Parser) -> Result<Hir, UnslopError> {
    let id_ok = !entry.id.is_empty()
        && entry.id.len() <= 64
        && entry.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !entry.id.starts_with('-');
    if !id_ok {
        return Err(UnslopError::ListsRule(format!(
            "the id {:?} is not 1 to 64 of [a-z0-9-], starting with a letter or digit",
            entry.id
        )));
    }
    let rule = |reason: String| UnslopError::Pattern { id: entry.id.clone(), reason };
    if entry.source.trim().is_empty() {
        return Err(rule("it has no source".into()));
    }
    if entry.flags.chars().any(|flag| flag != 'i') || entry.flags.len() > 1 {
        return Err(rule(format!("flags {:?}: only \"\" and \"i\" are allowed", entry.flags)));
    }
    if entry.pattern.is_empty() || entry.pattern.len() > MAX_PATTERN_BYTES {
        return Err(rule(format!("the pattern must be 1 to {MAX_PATTERN_BYTES} bytes")));
    }
    check_portable_syntax(&entry.pattern).map_err(rule)?;
    let hir = parser
        .parse(&entry.pattern)
        .map_err(|error| rule(format!("the pattern does not parse: {}", one_line(&error))))?;
    if hir.properties().minimum_len().unwrap_or(0) == 0 {
        return Err(rule("the pattern can match the empty string".into()));
    }
    Ok(hir)
}

/// Refuses what the `regex` crate accepts but JavaScript reads differently or not at all: inline
/// flags and named groups (`(?i)`, `(?P<n>`), `\A`, `\z`, `\p{..}`, `\Q`, POSIX classes
/// (`[[:alpha:]]`), and class set operations (`&&`, `--`, `~~`). The rest of the common subset is
/// proven by compiling in both engines (the crate's tests).
fn check_portable_syntax(pattern: &str) -> Result<(), String> {
    let bytes = pattern.as_bytes();
    let mut i = 0;
    let mut in_class = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                let next = bytes.get(i + 1).copied().unwrap_or(b'\\');
                if matches!(next, b'A' | b'z' | b'p' | b'P' | b'Q' | b'E' | b'<' | b'>') {
                    return Err(format!("`\\{}` is not portable to JavaScript", next as char));
                }
                i += 2;
                continue;
            }
            b'[' if in_class && bytes.get(i + 1) == Some(&b':') => {
                return Err("POSIX classes (`[[:name:]]`) are not portable".into());
            }
            b'[' if in_class => return Err("a nested class is not portable".into()),
            b'[' => in_class = true,
            b']' if in_class => in_class = false,
            b'&' | b'-' | b'~' if in_class && bytes.get(i + 1) == Some(&bytes[i]) => {
                return Err("class set operations are not portable".into());
            }
            b'(' if !in_class
                && bytes.get(i + 1) == Some(&b'?')
                && bytes.get(i + 2) != Some(&b':') =>
            {
                return Err("only `(?:` groups are portable (no inline flags, no named groups, \
                            no lookaround)"
                    .into());
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

fn one_line(error: &dyn std::fmt::Display) -> String {
    error.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}
