//! find/Glob patterns and grep's glob filter: which directories a pattern can name.
//!
//! A pattern's `{...}` groups are expanded first (nested groups too, up to
//! [`MAX_ALTERNATIVES`] alternatives). Each alternative is split at `/`; its leading segments
//! without a wildcard character form a literal prefix, a directory that is resolved and checked
//! like any path argument. After the first wildcard nothing can be resolved, so the rest is held
//! to rules instead: no segment that is exactly `..` (a `..` inside a name, `*..*` or `..foo`, is
//! a name, not a climb), and no alternative that a group makes absolute, starts with `~`, or
//! gives a `..` segment the pattern did not have before its first wildcard.
//!
//! Every tool but one uses its pattern only as a filter on what it lists below its search path
//! (fd's `--glob`, ripgrep's `--glob`; docs/gate.md): such a pattern cannot leave that path, and
//! these rules are kept as a second line. The exception, Claude Code's Glob with an absolute
//! pattern, searches a directory cut out of the pattern: [`claude_glob_base`] gives it.

use crate::node_path;

/// The most alternatives a pattern's `{...}` groups may expand to; beyond it the pattern is
/// refused rather than checked partly.
const MAX_ALTERNATIVES: usize = 256;

/// Characters that end the literal prefix: `*?[]` and the braces. `( ) !` and `\` are left in
/// it: fd's and ripgrep's globs have no extglobs, and Claude Code's Glob cuts its base only at
/// `* ? [ {`, so a name such as `a(b)` or `l!nk` is a directory to resolve, which may be a link
/// out, not a wildcard to skip.
fn is_wildcard_char(c: char) -> bool {
    matches!(c, '*' | '?' | '[' | ']' | '{' | '}')
}

/// Why a pattern is refused before any path is resolved.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PatternError {
    /// The pattern holds a NUL byte.
    Nul,
    /// A `..` segment stands after a wildcard, where it cannot be resolved.
    DotDotAfterWildcard,
    /// A `{...}` group makes an alternative absolute, start with `~`, or climb with `..`.
    BraceEscape,
    /// A `{` is never closed, so the extent of the group cannot be known.
    UnclosedBrace,
    /// The `{...}` groups expand to more than [`MAX_ALTERNATIVES`] alternatives.
    TooManyAlternatives,
}

impl PatternError {
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Self::Nul => "the pattern holds a NUL byte",
            Self::DotDotAfterWildcard => "the pattern has a `..` segment after a wildcard",
            Self::BraceEscape => {
                "a {...} group in the pattern makes an alternative absolute, start with `~` or \
                 climb with `..`"
            }
            Self::UnclosedBrace => "the pattern has a `{` that is never closed",
            Self::TooManyAlternatives => {
                "the pattern's {...} groups expand to too many alternatives"
            }
        }
    }
}

/// How many leading `/`-separated segments of `text` hold no wildcard character.
fn literal_segments(text: &str) -> usize {
    text.split('/').take_while(|segment| !segment.chars().any(is_wildcard_char)).count()
}

/// The literal prefix of a brace-free alternative: its leading segments without a wildcard.
fn literal_prefix(alternative: &str) -> String {
    let count = literal_segments(alternative);
    let mut literal = alternative.split('/').take(count).collect::<Vec<_>>().join("/");
    if literal.is_empty() && alternative.starts_with('/') {
        literal.push('/');
    }
    literal
}

/// Splits `pattern` into the literal prefixes of its alternatives (each may be empty, absolute,
/// or start with `~`), refusing what cannot be checked.
pub(crate) fn analyse(pattern: &str) -> Result<Vec<String>, PatternError> {
    if pattern.contains('\0') {
        return Err(PatternError::Nul);
    }
    let prefix_segments = literal_segments(pattern);
    if pattern.split('/').skip(prefix_segments).any(|segment| segment == "..") {
        return Err(PatternError::DotDotAfterWildcard);
    }
    let mut alternatives = Vec::new();
    expand(pattern, &mut alternatives)?;
    let mut literals: Vec<String> = Vec::new();
    for alternative in &alternatives {
        let leading = |c: char| alternative.starts_with(c) && !pattern.starts_with(c);
        if leading('/') || leading('~') {
            return Err(PatternError::BraceEscape);
        }
        // The segments up to the pattern's first wildcard are the pattern's own; a `..` further
        // on was made by a group (`{..,x}`, `.{.,}`).
        if alternative.split('/').skip(prefix_segments).any(|segment| segment == "..") {
            return Err(PatternError::BraceEscape);
        }
        let literal = literal_prefix(alternative);
        if !literals.contains(&literal) {
            literals.push(literal);
        }
    }
    Ok(literals)
}

/// Expands the `{a,b}` groups of `pattern` into `out`, the first group first, as brace
/// expansion does (a `}` without its `{` is a plain character).
fn expand(pattern: &str, out: &mut Vec<String>) -> Result<(), PatternError> {
    let Some(open) = pattern.find('{') else {
        if out.len() >= MAX_ALTERNATIVES {
            return Err(PatternError::TooManyAlternatives);
        }
        out.push(pattern.to_owned());
        return Ok(());
    };
    let mut depth = 0usize;
    let mut close = None;
    let mut commas = Vec::new();
    for (index, c) in pattern.char_indices().skip_while(|&(index, _)| index < open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(index);
                    break;
                }
            }
            ',' if depth == 1 => commas.push(index),
            _ => {}
        }
    }
    let close = close.ok_or(PatternError::UnclosedBrace)?;
    let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
    let mut start = open + 1;
    for end in commas.into_iter().chain(std::iter::once(close)) {
        let option = &pattern[start..end];
        expand(&format!("{head}{option}{tail}"), out)?;
        start = end + 1;
    }
    Ok(())
}

/// The directory Claude Code 2.1.296's Glob searches for `pattern`, before its own trim and
/// normalisation, when the pattern is absolute; `None` for a relative pattern, which Claude
/// Code only matches below the tool's path (docs/gate.md gives the minified source).
///
/// The base is everything before the last `/` ahead of the first `*`, `?`, `[` or `{` (`/` when
/// that is the first character), or the pattern's `path.dirname` when there is none of them.
pub(crate) fn claude_glob_base(pattern: &str) -> Option<String> {
    if !node_path::is_absolute(pattern) {
        return None;
    }
    let Some(first) = pattern.find(['*', '?', '[', '{']) else {
        return Some(node_path::dirname(pattern));
    };
    let before = &pattern[..first];
    let slash = before.rfind('/')?;
    let base = &before[..slash];
    Some(if base.is_empty() { "/".to_owned() } else { base.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literals(pattern: &str) -> Result<Vec<String>, PatternError> {
        analyse(pattern)
    }

    fn one(pattern: &str) -> Result<String, PatternError> {
        let mut all = analyse(pattern)?;
        assert_eq!(all.len(), 1, "{pattern:?} has one alternative");
        Ok(all.remove(0))
    }

    #[test]
    fn literal_prefixes() {
        assert_eq!(one("**/*.rs").as_deref(), Ok(""));
        assert_eq!(one("src/**/*.rs").as_deref(), Ok("src"));
        assert_eq!(one("/etc/*").as_deref(), Ok("/etc"));
        assert_eq!(one("/*").as_deref(), Ok("/"));
        assert_eq!(one("../../*").as_deref(), Ok("../.."));
        assert_eq!(one("src/main.rs").as_deref(), Ok("src/main.rs"));
        assert_eq!(one("~/x/*").as_deref(), Ok("~/x"));
        assert_eq!(one("").as_deref(), Ok(""));
        assert_eq!(one("foo..bar").as_deref(), Ok("foo..bar"));
        assert_eq!(one("*..*").as_deref(), Ok(""));
        assert_eq!(one("**/..foo").as_deref(), Ok(""));
        assert_eq!(one("**/..*").as_deref(), Ok(""));
    }

    #[test]
    fn braces_expand() {
        assert_eq!(literals("src/{a,b}/*.rs"), Ok(vec!["src/a".to_owned(), "src/b".to_owned()]));
        assert_eq!(literals("{src/**,docs/**}"), Ok(vec!["src".to_owned(), "docs".to_owned()]));
        assert_eq!(literals("{a,{b,c}}/x").map(|all| all.len()), Ok(3));
        assert_eq!(literals("x}"), Ok(vec![String::new()]));
        assert_eq!(literals("../{a,b}/*"), Ok(vec!["../a".to_owned(), "../b".to_owned()]));
    }

    #[test]
    fn refusals() {
        assert_eq!(literals("*/../../etc"), Err(PatternError::DotDotAfterWildcard));
        assert_eq!(literals("**/.."), Err(PatternError::DotDotAfterWildcard));
        assert_eq!(literals("{..,x}/secret"), Err(PatternError::BraceEscape));
        assert_eq!(literals("{src/..,x}/secret"), Err(PatternError::BraceEscape));
        assert_eq!(literals("*/.{.,}/x"), Err(PatternError::BraceEscape));
        assert_eq!(literals("{/etc/passwd,x}"), Err(PatternError::BraceEscape));
        assert_eq!(literals("{~,x}"), Err(PatternError::BraceEscape));
        assert_eq!(literals("a{b"), Err(PatternError::UnclosedBrace));
        assert_eq!(literals("a\0b"), Err(PatternError::Nul));
        assert_eq!(literals(&"{a,b,c,d}".repeat(5)), Err(PatternError::TooManyAlternatives));
    }

    #[test]
    fn claude_glob_bases() {
        assert_eq!(claude_glob_base("**/*.rs"), None);
        assert_eq!(claude_glob_base("/ws/src/**/*.rs").as_deref(), Some("/ws/src"));
        assert_eq!(claude_glob_base("/*").as_deref(), Some("/"));
        assert_eq!(claude_glob_base("/ws/..\u{a0}/*").as_deref(), Some("/ws/..\u{a0}"));
        assert_eq!(claude_glob_base("/ws/a!(b)/c]/x*").as_deref(), Some("/ws/a!(b)/c]"));
        assert_eq!(claude_glob_base("/ws/a\\*/x").as_deref(), Some("/ws"));
        assert_eq!(claude_glob_base("/ws/file.txt").as_deref(), Some("/ws"));
        assert_eq!(claude_glob_base("/ws//x").as_deref(), Some("/ws/"));
        assert_eq!(claude_glob_base("/ws/x/").as_deref(), Some("/ws"));
    }
}
