//! Text measured as the bus measures it: in UTF-16 code units, JavaScript's `String.length`.
//! A limit that holds in UTF-16 units holds in characters too, since no character is shorter.

/// Returns the length of `text` in UTF-16 code units.
pub fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// Returns the longest prefix of `text` at most `limit` UTF-16 code units long, cut between
/// characters (never inside a surrogate pair).
pub(crate) fn prefix_utf16(text: &str, limit: usize) -> &str {
    let mut units = 0;
    for (index, c) in text.char_indices() {
        units += c.len_utf16();
        if units > limit {
            return &text[..index];
        }
    }
    text
}

/// Returns `text` cut to at most `limit` UTF-16 code units, ending in `…` when cut.
pub(crate) fn clip_chars(text: &str, limit: usize) -> String {
    if utf16_len(text) <= limit {
        return text.to_owned();
    }
    let mut out = prefix_utf16(text, limit.saturating_sub(1)).to_owned();
    out.push('…');
    out
}

/// Returns `text` with every run of whitespace (newlines included) as one space, trimmed.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clips_between_characters() {
        assert_eq!(clip_chars("abcdef", 4), "abc…");
        assert_eq!(clip_chars("abc", 3), "abc");
        // U+1F600 is two UTF-16 units: it does not fit in the one unit left before the ellipsis.
        assert_eq!(clip_chars("ab\u{1F600}cd", 4), "ab…");
        assert_eq!(utf16_len("ab\u{1F600}"), 4);
        assert_eq!(prefix_utf16("\u{1F600}", 1), "");
    }
}
