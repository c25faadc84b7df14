//! Node's POSIX `path` functions, as Pi 0.85.1 calls them: `resolve`, `join` and `normalize`.
//!
//! They work on text only. `..` is applied lexically, before any symlink, which is what Pi
//! does with a path argument (docs/gate.md).

/// Applies `.` and `..` to the `/`-separated segments of `path`, as Node's `normalizeString`.
///
/// Empty and `.` segments are dropped. A `..` removes the segment before it; with nothing to
/// remove it is kept when `allow_above_root` is true and dropped otherwise (the root's parent is
/// the root).
fn normalize_segments(path: &str, allow_above_root: bool) -> String {
    let mut out: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => match out.last() {
                Some(&last) if last != ".." => {
                    out.pop();
                }
                _ if allow_above_root => out.push(".."),
                _ => {}
            },
            name => out.push(name),
        }
    }
    out.join("/")
}

/// Node's `path.posix.normalize`.
pub fn normalize(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let absolute = path.starts_with('/');
    let trailing_separator = path.ends_with('/');
    let mut normalized = normalize_segments(path, !absolute);
    if normalized.is_empty() {
        if absolute {
            return "/".to_owned();
        }
        return if trailing_separator { "./".to_owned() } else { ".".to_owned() };
    }
    if trailing_separator {
        normalized.push('/');
    }
    if absolute { format!("/{normalized}") } else { normalized }
}

/// Node's `path.posix.join`.
pub(crate) fn join(parts: &[&str]) -> String {
    let joined: Vec<&str> = parts.iter().copied().filter(|part| !part.is_empty()).collect();
    if joined.is_empty() {
        return ".".to_owned();
    }
    normalize(&joined.join("/"))
}

/// Node's `path.posix.resolve`, given a base that is absolute.
///
/// Returns `None` when neither `base` nor `path` is absolute: Node would then use the process's
/// own working directory, which the gate must never depend on.
pub(crate) fn resolve(base: &str, path: &str) -> Option<String> {
    let combined = if path.starts_with('/') {
        path.to_owned()
    } else if base.starts_with('/') {
        if path.is_empty() { base.to_owned() } else { format!("{base}/{path}") }
    } else {
        return None;
    };
    Some(format!("/{}", normalize_segments(&combined, false)))
}

/// Node's `path.posix.dirname`: everything before the last `/` that is not part of a run of
/// trailing slashes, keeping a run of slashes before it (`/a//b` gives `/a/`).
pub fn dirname(path: &str) -> String {
    let bytes = path.as_bytes();
    let Some(&first) = bytes.first() else {
        return ".".to_owned();
    };
    let has_root = first == b'/';
    let mut end = None;
    let mut matched_slash = true;
    for index in (1..bytes.len()).rev() {
        if bytes[index] == b'/' {
            if !matched_slash {
                end = Some(index);
                break;
            }
        } else {
            matched_slash = false;
        }
    }
    match end {
        None => if has_root { "/" } else { "." }.to_owned(),
        Some(1) if has_root => "//".to_owned(),
        Some(end) => path[..end].to_owned(),
    }
}

/// Returns true if and only if `path` is absolute in POSIX terms.
pub(crate) fn is_absolute(path: &str) -> bool {
    path.starts_with('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_matches_node() {
        for (input, expected) in [
            ("", "."),
            ("/", "/"),
            ("//", "/"),
            ("./", "./"),
            ("a/b/../c/", "a/c/"),
            ("../../a", "../../a"),
            ("/../../a", "/a"),
            ("a/..", "."),
            ("a/../", "./"),
            ("/a/./b//c/", "/a/b/c/"),
            ("...", "..."),
            ("a/.../..", "a"),
        ] {
            assert_eq!(normalize(input), expected, "normalize({input:?})");
        }
    }

    #[test]
    fn join_and_resolve_match_node() {
        assert_eq!(join(&["/home/u", "x/"]), "/home/u/x/");
        assert_eq!(join(&["/home/u", ""]), "/home/u");
        assert_eq!(join(&["/home/u", "../../.."]), "/");
        assert_eq!(resolve("/ws", "a/../b/").as_deref(), Some("/ws/b"));
        assert_eq!(resolve("/ws", "").as_deref(), Some("/ws"));
        assert_eq!(resolve("/ws", "/x//y/..").as_deref(), Some("/x"));
        assert_eq!(resolve("/ws", "../../../..").as_deref(), Some("/"));
        assert_eq!(resolve("rel", "x"), None);
    }

    #[test]
    fn dirname_matches_node() {
        for (input, expected) in [
            ("", "."),
            ("/", "/"),
            ("//", "/"),
            ("/a", "/"),
            ("/a/b", "/a"),
            ("/a/b/", "/a"),
            ("/a//b", "/a/"),
            ("//a", "//"),
            ("a", "."),
            ("a/b", "a"),
            ("/a/..\u{a0}", "/a"),
        ] {
            assert_eq!(dirname(input), expected, "dirname({input:?})");
        }
    }
}
