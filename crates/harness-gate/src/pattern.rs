//! find/Glob patterns and grep's glob filter: which directory a pattern can reach.
//!
//! A pattern is split at `/`. Its leading segments without a wildcard character form the
//! literal prefix, a directory that is resolved and checked like any path argument. After the
//! first wildcard nothing can be resolved, so the rest is held to rules instead: no `..` in any
//! later segment, and no `/`, `~` or `..` inside a `{...}` group (an alternative could otherwise
//! name an absolute path or climb out).

/// Characters that make a segment a wildcard in some glob dialect Pi (fd) or Claude Code uses:
/// `*?[]` everywhere, `{}` braces, `()!` extglobs and negation, and `\` escapes. Counting too
/// many only shortens the literal prefix that is resolved; the rules then apply to more segments.
fn is_wildcard_char(c: char) -> bool {
    matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '(' | ')' | '!' | '\\')
}

/// What a pattern means for the gate.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct PatternPrefix {
    /// The literal prefix (may be empty, absolute, or start with `~`).
    pub(crate) literal: String,
}

/// Why a pattern is refused before any path is resolved.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PatternError {
    /// The pattern holds a NUL byte.
    Nul,
    /// A `..` stands after a wildcard, where it cannot be resolved.
    DotDotAfterWildcard,
    /// A `{...}` group holds `/`, `~` or `..`.
    BraceEscape,
    /// A `{` is never closed, so the extent of the group cannot be known.
    UnclosedBrace,
}

impl PatternError {
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            Self::Nul => "the pattern holds a NUL byte",
            Self::DotDotAfterWildcard => "the pattern has `..` after a wildcard",
            Self::BraceEscape => "a {...} group in the pattern holds `/`, `~` or `..`",
            Self::UnclosedBrace => "the pattern has a `{` that is never closed",
        }
    }
}

/// Splits `pattern` into its literal prefix, refusing what cannot be checked.
pub(crate) fn analyse(pattern: &str) -> Result<PatternPrefix, PatternError> {
    if pattern.contains('\0') {
        return Err(PatternError::Nul);
    }
    check_braces(pattern)?;
    let mut literal: Vec<&str> = Vec::new();
    let mut wildcard_seen = false;
    for segment in pattern.split('/') {
        if !wildcard_seen && !segment.chars().any(is_wildcard_char) {
            literal.push(segment);
            continue;
        }
        wildcard_seen = true;
        if segment.contains("..") {
            return Err(PatternError::DotDotAfterWildcard);
        }
    }
    let mut literal = literal.join("/");
    if literal.is_empty() && pattern.starts_with('/') {
        literal.push('/');
    }
    Ok(PatternPrefix { literal })
}

fn check_braces(pattern: &str) -> Result<(), PatternError> {
    let mut depth = 0usize;
    let mut group = String::new();
    for c in pattern.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    if group.contains("..") {
                        return Err(PatternError::BraceEscape);
                    }
                    group.clear();
                }
            }
            '/' | '~' if depth > 0 => return Err(PatternError::BraceEscape),
            _ if depth > 0 => group.push(c),
            _ => {}
        }
    }
    if depth > 0 { Err(PatternError::UnclosedBrace) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literal(pattern: &str) -> Result<String, PatternError> {
        analyse(pattern).map(|prefix| prefix.literal)
    }

    #[test]
    fn literal_prefixes() {
        assert_eq!(literal("**/*.rs").as_deref(), Ok(""));
        assert_eq!(literal("src/**/*.rs").as_deref(), Ok("src"));
        assert_eq!(literal("/etc/*").as_deref(), Ok("/etc"));
        assert_eq!(literal("/*").as_deref(), Ok("/"));
        assert_eq!(literal("../../*").as_deref(), Ok("../.."));
        assert_eq!(literal("src/main.rs").as_deref(), Ok("src/main.rs"));
        assert_eq!(literal("~/x/*").as_deref(), Ok("~/x"));
        assert_eq!(literal("").as_deref(), Ok(""));
        assert_eq!(literal("src/{a,b}/*.rs").as_deref(), Ok("src"));
    }

    #[test]
    fn refusals() {
        assert_eq!(literal("*/../../etc"), Err(PatternError::DotDotAfterWildcard));
        assert_eq!(literal("**/..*"), Err(PatternError::DotDotAfterWildcard));
        assert_eq!(literal("{..,x}/secret"), Err(PatternError::BraceEscape));
        assert_eq!(literal("{/etc/passwd,x}"), Err(PatternError::BraceEscape));
        assert_eq!(literal("{~,x}"), Err(PatternError::BraceEscape));
        assert_eq!(literal("a{b"), Err(PatternError::UnclosedBrace));
        assert_eq!(literal("a\0b"), Err(PatternError::Nul));
    }
}
