//! Node 24's `fileURLToPath(string)` on POSIX, for the `file://` URLs Pi's `normalizePath` takes.
//!
//! `fileURLToPath` parses the string with `new URL()` (the WHATWG URL Standard, implemented by
//! ada in Node 24), requires the host to be empty (`localhost` becomes empty), refuses an encoded
//! `/` (`%2F`, `%2f`) anywhere in the pathname, and returns `decodeURIComponent(pathname)`.
//!
//! Only the parts of the WHATWG parser a string starting with `file://` can reach are written out
//! here, state by state, with the spec's names: the file host state and the path start and path
//! states of a special URL without a base. The `url` crate is not used for the path because it
//! keeps a Windows drive letter (`C:`, `C|`) from being removed by `..` in any position, while the
//! standard protects it only as the first segment: with the crate, `file:///ws/C|/../../x` stayed
//! under `/ws`, and Node opens `/x`. It is still used for a non-empty host, whose parsing (IDNA,
//! IPv4, forbidden code points) only decides between `localhost` and an error: any other host
//! makes Pi throw, so a host that the crate reads differently from Node can only block a call.
//!
//! Percent-encoding of the path is left out on purpose: every code point the parser would encode
//! comes back unchanged from `decodeURIComponent`, the encoding never produces `%2F`, and a
//! segment that holds an encodable code point is never a dot segment or a drive letter. So the
//! pathname is kept raw, and decoding it byte by byte (a literal code point as its UTF-8 bytes)
//! fails exactly where `decodeURIComponent` throws on the encoded one.

use crate::pi_paths::PiPathError;

/// Returns true for WHATWG's "Windows drive letter": an ASCII letter, then `:` or `|`.
fn is_drive_letter(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    bytes.len() == 2 && bytes[0].is_ascii_alphabetic() && matches!(bytes[1], b':' | b'|')
}

/// Returns true for WHATWG's "normalized Windows drive letter": an ASCII letter, then `:`.
fn is_normalized_drive_letter(segment: &str) -> bool {
    is_drive_letter(segment) && segment.ends_with(':')
}

/// WHATWG's "single-dot URL path segment": `.` or `%2e`, any case.
fn is_single_dot(segment: &str) -> bool {
    segment == "." || segment.eq_ignore_ascii_case("%2e")
}

/// WHATWG's "double-dot URL path segment": `..`, `.%2e`, `%2e.` or `%2e%2e`, any case.
fn is_double_dot(segment: &str) -> bool {
    matches!(segment.to_ascii_lowercase().as_str(), ".." | ".%2e" | "%2e." | "%2e%2e")
}

/// WHATWG's "shorten a URL's path" for a file URL: a lone normalised drive letter stays.
fn shorten(path: &mut Vec<String>) {
    if path.len() == 1 && path.first().is_some_and(|first| is_normalized_drive_letter(first)) {
        return;
    }
    path.pop();
}

/// The pathname `new URL(input).pathname` gives for `input`, which starts with `file://`, kept
/// without its percent-encoding (see the module's comment), or the error `new URL()` or
/// `fileURLToPath`'s host check throws.
fn pathname(input: &str) -> Result<String, PiPathError> {
    // The basic URL parser first strips leading and trailing C0 controls and spaces, then removes
    // every ASCII tab and newline wherever it stands.
    let trimmed = input.trim_matches(|c: char| c <= ' ');
    let cleaned: String = trimmed.chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
    // The scheme state lowercases `file`; the file state and the file slash state each take one
    // of the two slashes (`/` or `\`). The caller's prefix test was `file://`, so both are `/`.
    let after_slashes = cleaned
        .get(..7)
        .filter(|prefix| prefix.eq_ignore_ascii_case("file://"))
        .and_then(|_| cleaned.get(7..))
        .ok_or_else(|| PiPathError::InvalidUrl(format!("{input:?} does not start with file://")))?;
    // The file host state: the buffer runs to the first `/`, `\`, `?`, `#` or the end.
    let host_end = after_slashes.find(['/', '\\', '?', '#']).unwrap_or(after_slashes.len());
    let (host, rest) = after_slashes.split_at(host_end);
    let path_input = if is_drive_letter(host) {
        // A drive letter in the host position is reread as the first path segment, with no
        // path start state (so no slash is taken).
        after_slashes
    } else {
        if !host.is_empty() {
            check_host(host)?;
        }
        // The path start state of a special URL takes one `/` or `\`.
        rest.strip_prefix(['/', '\\']).unwrap_or(rest)
    };
    let path = path_segments(path_input);
    let mut pathname = String::with_capacity(path_input.len() + 1);
    for segment in &path {
        pathname.push('/');
        pathname.push_str(segment);
    }
    Ok(pathname)
}

/// A non-empty host buffer: only one that parses to `localhost` (which the parser empties) is
/// accepted, since `fileURLToPath` refuses any other host.
fn check_host(buffer: &str) -> Result<(), PiPathError> {
    match url::Host::parse(buffer) {
        Ok(url::Host::Domain(domain)) if domain == "localhost" => Ok(()),
        Ok(_) => Err(PiPathError::FileUrlHost),
        Err(error) => Err(PiPathError::InvalidUrl(error.to_string())),
    }
}

/// The path state of a special URL whose scheme is `file`, from its first code point to the end
/// of the input, a `?` or a `#`; returns the URL's path (a list of segments).
fn path_segments(input: &str) -> Vec<String> {
    let end = input.find(['?', '#']).unwrap_or(input.len());
    let body = input.get(..end).unwrap_or_default();
    let mut path: Vec<String> = Vec::new();
    let mut segments = body.split(['/', '\\']).peekable();
    while let Some(buffer) = segments.next() {
        // `c` in the standard: a separator follows unless this is the last segment.
        let separator_follows = segments.peek().is_some();
        if is_double_dot(buffer) {
            shorten(&mut path);
            if !separator_follows {
                path.push(String::new());
            }
        } else if is_single_dot(buffer) {
            if !separator_follows {
                path.push(String::new());
            }
        } else if path.is_empty() && is_drive_letter(buffer) {
            // The Windows drive letter quirk: only while the path is still empty.
            let mut letter = buffer.to_owned();
            letter.replace_range(1..2, ":");
            path.push(letter);
        } else {
            path.push(buffer.to_owned());
        }
    }
    path
}

/// Node 24's `fileURLToPath(input)` on POSIX, for an `input` that starts with `file://`.
pub(crate) fn file_url_to_path(input: &str) -> Result<String, PiPathError> {
    let pathname = pathname(input)?;
    let bytes = pathname.as_bytes();
    for (index, &byte) in bytes.iter().enumerate() {
        if byte == b'%'
            && bytes.get(index + 1) == Some(&b'2')
            && bytes.get(index + 2).is_some_and(|third| third | 0x20 == b'f')
        {
            return Err(PiPathError::FileUrlEncodedSlash);
        }
    }
    if !pathname.contains('%') {
        return Ok(pathname);
    }
    decode_uri_component(&pathname).ok_or(PiPathError::FileUrlDecode)
}

/// JavaScript's `decodeURIComponent`: every `%` starts two hex digits, and the bytes they make
/// must be UTF-8. Returns `None` where JavaScript throws a `URIError`.
fn decode_uri_component(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        if byte == b'%' {
            let high = hex_value(*bytes.get(index + 1)?)?;
            let low = hex_value(*bytes.get(index + 2)?)?;
            out.push(high << 4 | low);
            index += 3;
        } else {
            out.push(byte);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn hex_value(digit: u8) -> Option<u8> {
    char::from(digit).to_digit(16).and_then(|value| u8::try_from(value).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(input: &str) -> Result<String, PiPathError> {
        file_url_to_path(input)
    }

    /// Each expected answer is what Node 24.22 printed for the same input.
    #[test]
    fn drive_letters_follow_whatwg() {
        assert_eq!(path("file:///ws/C|/../../x").as_deref(), Ok("/x"));
        assert_eq!(path("file:///ws/C:/../../x").as_deref(), Ok("/x"));
        assert_eq!(path("file:///C|/../x").as_deref(), Ok("/C:/x"));
        assert_eq!(path("file:///C:/../x").as_deref(), Ok("/C:/x"));
        assert_eq!(path("file://C:/../x").as_deref(), Ok("/C:/x"));
        assert_eq!(path("file://C|\\..\\y").as_deref(), Ok("/C:/y"));
        assert_eq!(path("file://localhost/C|/..").as_deref(), Ok("/C:/"));
        assert_eq!(path("file:///c|").as_deref(), Ok("/c:"));
        assert_eq!(path("file:///%43|/../x").as_deref(), Ok("/x"));
        assert_eq!(path("file:///C%7C/../x").as_deref(), Ok("/x"));
        assert_eq!(path("file:///ws/../C:/..").as_deref(), Ok("/C:/"));
    }

    #[test]
    fn dots_backslashes_and_the_rest() {
        assert_eq!(path("file:///ws/%2e%2E/x").as_deref(), Ok("/x"));
        assert_eq!(path("file:///ws\\..\\x").as_deref(), Ok("/x"));
        assert_eq!(path("file:///ws/\t../x").as_deref(), Ok("/x"));
        assert_eq!(path("file:///x ").as_deref(), Ok("/x"));
        assert_eq!(path("file:///x?a#b").as_deref(), Ok("/x"));
        assert_eq!(path("file:////x").as_deref(), Ok("//x"));
        assert_eq!(path("file:///a/.").as_deref(), Ok("/a/"));
        assert_eq!(path("file:///..").as_deref(), Ok("/"));
        assert_eq!(path("file://").as_deref(), Ok("/"));
        assert_eq!(path("file:///a%25zz").as_deref(), Ok("/a%zz"));
        assert_eq!(path("file:///a%00b").as_deref(), Ok("/a\0b"));
        assert_eq!(path("file:///%E2%82%AC").as_deref(), Ok("/\u{20ac}"));
    }

    #[test]
    fn hosts_and_errors() {
        assert_eq!(path("file://LOCALHOST/x").as_deref(), Ok("/x"));
        assert_eq!(path("file://%6cocalhost/x").as_deref(), Ok("/x"));
        assert_eq!(path("file://host/C:/x"), Err(PiPathError::FileUrlHost));
        assert_eq!(path("file://[::1]/x"), Err(PiPathError::FileUrlHost));
        assert_eq!(path("file://localhost./x"), Err(PiPathError::FileUrlHost));
        assert!(matches!(path("file://a@b/x"), Err(PiPathError::InvalidUrl(_))));
        assert_eq!(path("file:///a/b/..%2f"), Err(PiPathError::FileUrlEncodedSlash));
        assert_eq!(path("file:///a%C3"), Err(PiPathError::FileUrlDecode));
        assert_eq!(path("file:///a%zz"), Err(PiPathError::FileUrlDecode));
    }
}
