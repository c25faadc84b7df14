//! The checker: one pass over a reply finds which entries match, and only those entries are
//! compiled alone to report what matched. The engine is the `regex` crate's own
//! (`regex-automata`: the Thompson NFA, the lazy DFA that `regex::RegexSet` runs first, and the
//! PikeVM it falls back to), used directly so that each pattern is parsed once, when the list is
//! loaded, and so that a process that checks one reply builds only the forward automaton it
//! needs, without the reverse automaton and the literal prefilter a general-purpose set builds.
//! None of these engines backtracks: the time is linear in the reply whatever the patterns and the
//! reply hold.
//!
//! Patterns are compiled for bytes with Unicode off: `\b`, `\w`, `\d` and `i` are ASCII, as in a
//! JavaScript `RegExp` without the `u` flag, and the lazy DFA never has to give up on a Unicode
//! word boundary.

use regex_automata::hybrid::dfa::{self as lazy, DFA};
use regex_automata::meta;
use regex_automata::nfa::thompson::{self, NFA, WhichCaptures, pikevm::PikeVM};
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, PatternSet};
use regex_syntax::hir::Hir;
use serde::{Deserialize, Serialize};

use crate::error::UnslopError;
use crate::lists::{Entry, Lists};
use crate::text::clip_chars;

/// The compiled size limit of the set, in bytes of the engine's own accounting.
const SIZE_LIMIT: usize = 64 << 20;
/// The longest matched text a finding carries, in characters.
const MATCH_CHARS: usize = 80;

/// A compiled lists file.
#[derive(Debug)]
pub struct Checker {
    nfa: NFA,
    dfa: DFA,
    entries: Vec<Entry>,
    hirs: Vec<Hir>,
}

/// One entry that matched a reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The entry's id.
    pub id: String,
    /// The entry's source, as the lists file gives it.
    pub source: String,
    /// The first text it matched, at most 80 characters.
    #[serde(rename = "match")]
    pub matched: String,
}

impl Checker {
    /// Compiles `lists`.
    pub fn new(lists: Lists) -> Result<Self, UnslopError> {
        let error = |what: &dyn std::fmt::Display| {
            UnslopError::ListsRule(format!("the patterns do not compile: {what}"))
        };
        let nfa = thompson::Compiler::new()
            .syntax(syntax::Config::new().unicode(false).utf8(false))
            .configure(
                thompson::Config::new()
                    .which_captures(WhichCaptures::None)
                    .nfa_size_limit(Some(SIZE_LIMIT)),
            )
            .build_many_from_hir(lists.hirs())
            .map_err(|e| error(&e))?;
        let dfa = DFA::builder()
            .configure(lazy::Config::new().match_kind(MatchKind::All))
            .build_from_nfa(nfa.clone())
            .map_err(|e| error(&e))?;
        let (entries, hirs) = lists.into_parts();
        Ok(Self { nfa, dfa, entries, hirs })
    }

    /// Returns the entries that match `reply`, in file order; empty when the reply is clean.
    pub fn check(&self, reply: &str) -> Vec<Finding> {
        let haystack = reply.as_bytes();
        let input = Input::new(haystack);
        let mut matched = PatternSet::new(self.nfa.pattern_len());
        let mut cache = self.dfa.create_cache();
        if self.dfa.try_which_overlapping_matches(&mut cache, &input, &mut matched).is_err() {
            // The lazy DFA gives up when its cache thrashes; the PikeVM never does, at a higher
            // constant. Either way the time stays linear.
            matched.clear();
            let pikevm = PikeVM::builder()
                .configure(PikeVM::config().match_kind(MatchKind::All))
                .build_from_nfa(self.nfa.clone());
            if let Ok(pikevm) = pikevm {
                pikevm.which_overlapping_matches(&mut pikevm.create_cache(), &input, &mut matched);
            }
        }
        matched
            .iter()
            .filter_map(|pattern| {
                let index = pattern.as_usize();
                let entry = &self.entries[index];
                // The set compiled this pattern, so it compiles alone; a failure only drops detail.
                // Lean, because it runs once: no prefilter, one-pass DFA or backtracker to build,
                // and the search stops at the first match.
                let single = meta::Builder::new()
                    .configure(
                        meta::Config::new()
                            .nfa_size_limit(Some(SIZE_LIMIT))
                            .which_captures(WhichCaptures::Implicit)
                            .auto_prefilter(false)
                            .onepass(false)
                            .backtrack(false),
                    )
                    .syntax(syntax::Config::new().unicode(false).utf8(false))
                    .build_from_hir(&self.hirs[index])
                    .ok()?;
                let first = single.find(haystack)?;
                let text = String::from_utf8_lossy(&haystack[first.range()]);
                Some(Finding {
                    id: entry.id.clone(),
                    source: entry.source.clone(),
                    matched: clip_chars(text.trim(), MATCH_CHARS),
                })
            })
            .collect()
    }

    /// Returns the number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Returns true if and only if there are no entries (never, for a validated list).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
