//! Pi 0.85.1's path handling, ported line by line.
//!
//! The source is `dist/utils/paths.js` (`normalizePath`, `resolvePath`) and
//! `dist/core/tools/path-utils.js` (`resolveToCwd`, `resolveReadPath*` and its spellings) of
//! `@earendil-works/pi-coding-agent` 0.85.1. `cargo xtask verify-pi` runs Pi's own functions and
//! these side by side and keeps the sha256 of those files, so a Pi upgrade cannot drift silently.

use unicode_normalization::UnicodeNormalization;

use crate::file_url;
use crate::node_path;

/// The characters Pi's `UNICODE_SPACES` replaces with an ASCII space.
fn is_unicode_space(c: char) -> bool {
    matches!(c, '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}')
}

/// What `normalizePath` does beyond `~` and `file://` (Pi's `options`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NormalizeOptions {
    /// Replace the Unicode spaces with an ASCII space.
    pub normalize_unicode_spaces: bool,
    /// Drop one leading `@`.
    pub strip_at_prefix: bool,
}

impl NormalizeOptions {
    /// The options `resolveToCwd` passes: both on.
    pub const TOOL: Self = Self { normalize_unicode_spaces: true, strip_at_prefix: true };
}

/// Why Pi could not turn a path argument into a path; Pi's tool would throw.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PiPathError {
    /// `new URL()` rejected the `file://` URL (a host it cannot parse).
    #[error("not a valid URL: {0}")]
    InvalidUrl(String),
    /// The `file://` URL names a host other than `localhost`.
    #[error("a file URL must not name a host")]
    FileUrlHost,
    /// The `file://` URL encodes a `/` as `%2F`.
    #[error("a file URL must not include encoded / characters")]
    FileUrlEncodedSlash,
    /// `decodeURIComponent` rejected the URL's path.
    #[error("a file URL's path is not valid percent-encoded UTF-8")]
    FileUrlDecode,
    /// `~` must be expanded but no home directory is known.
    #[error("~ cannot be expanded: HOME is not set")]
    NoHome,
    /// Neither the path nor the base is absolute, so Node would use its own working directory.
    #[error("the base directory {0:?} is not absolute")]
    RelativeBase(String),
}

/// Pi's `normalizePath(input, options)` with `homedir()` = `home`.
pub fn normalize_path(
    input: &str,
    options: NormalizeOptions,
    home: Option<&str>,
) -> Result<String, PiPathError> {
    let mut normalized = if options.normalize_unicode_spaces {
        input.chars().map(|c| if is_unicode_space(c) { ' ' } else { c }).collect::<String>()
    } else {
        input.to_owned()
    };
    if options.strip_at_prefix && normalized.starts_with('@') {
        normalized.remove(0);
    }
    if normalized == "~" {
        return home.map(str::to_owned).ok_or(PiPathError::NoHome);
    }
    if let Some(rest) = normalized.strip_prefix("~/") {
        let home = home.ok_or(PiPathError::NoHome)?;
        return Ok(node_path::join(&[home, rest]));
    }
    if normalized.starts_with("file://") {
        return file_url::file_url_to_path(&normalized);
    }
    Ok(normalized)
}

/// Pi's `resolvePath(input, baseDir, options)`.
fn resolve_path(
    input: &str,
    base_dir: &str,
    options: NormalizeOptions,
    home: Option<&str>,
) -> Result<String, PiPathError> {
    let normalized = normalize_path(input, options, home)?;
    let normalized_base = normalize_path(base_dir, NormalizeOptions::default(), home)?;
    let base = if node_path::is_absolute(&normalized) { "/" } else { normalized_base.as_str() };
    node_path::resolve(base, &normalized).ok_or(PiPathError::RelativeBase(normalized_base))
}

/// Pi's `resolveToCwd(filePath, cwd)`: the path every file tool but read opens.
pub fn resolve_to_cwd(path: &str, cwd: &str, home: Option<&str>) -> Result<String, PiPathError> {
    resolve_path(path, cwd, NormalizeOptions::TOOL, home)
}

/// Pi's `tryMacOSScreenshotPath`: `/ (AM|PM)\./gi` replaced by U+202F, the letters, and `.`.
fn am_pm_spelling(path: &str) -> String {
    swap_before_am_pm(path, ' ', '\u{202F}')
}

/// Claude Code's Read fallback the other way round: U+202F before `AM.`/`PM.` becomes a space.
fn am_pm_space_spelling(path: &str) -> String {
    swap_before_am_pm(path, '\u{202F}', ' ')
}

/// Replaces `from` with `to` wherever `from` stands before `AM.` or `PM.` (ASCII letters in any
/// case), scanning left to right without overlaps, as a global JavaScript regex replace does.
fn swap_before_am_pm(path: &str, from: char, to: char) -> String {
    let chars: Vec<char> = path.chars().collect();
    let mut out = String::with_capacity(path.len() + 2);
    let mut index = 0;
    while let Some(&c) = chars.get(index) {
        let tail = chars.get(index + 1..index + 4);
        let matches = c == from
            && tail.is_some_and(|tail| {
                matches!(tail[0], 'a' | 'A' | 'p' | 'P')
                    && matches!(tail[1], 'm' | 'M')
                    && tail[2] == '.'
            });
        if matches {
            out.push(to);
            out.extend(&chars[index + 1..index + 4]);
            index += 4;
        } else {
            out.push(c);
            index += 1;
        }
    }
    out
}

/// Pi's `tryNFDVariant`: the canonical decomposition, as JavaScript's `normalize("NFD")`.
pub fn nfd(path: &str) -> String {
    path.nfd().collect()
}

/// Pi's `tryCurlyQuoteVariant`: every `'` becomes U+2019.
fn curly_spelling(path: &str) -> String {
    path.replace('\'', "\u{2019}")
}

/// Pi's four fallback spellings of a resolved read path, in the order Pi tries them.
fn pi_read_spellings(resolved: &str) -> [String; 4] {
    let nfd = nfd(resolved);
    let nfd_curly = curly_spelling(&nfd);
    [am_pm_spelling(resolved), nfd, curly_spelling(resolved), nfd_curly]
}

/// Claude Code 2.1.296's Read fallback, tried when the file does not exist (`cXe` in its
/// binary): `let n=path.basename(e),r=/^(.+)([ \u202F])(AM|PM)(\.png)$/,s=n.match(r);if(!s)return;
/// let h=s[2],y=h===" "?"\u202F":" ";return e.replace(`${h}${s[3]}${s[4]}`,`${y}${s[3]}${s[4]}`)`.
/// The basename must match (case-sensitive `AM`/`PM`, `.png`, at least one character before the
/// separator and none of them a JavaScript line terminator); then the FIRST occurrence of the
/// separator, `AM`/`PM` and `.png` in the whole path, a directory component included, is
/// swapped for the other separator, on every platform.
pub(crate) fn claude_read_spelling(resolved: &str) -> Option<String> {
    let (separator, ending) = claude_screenshot_name(resolved)?;
    let other = if separator == ' ' { '\u{202F}' } else { ' ' };
    Some(resolved.replacen(&format!("{separator}{ending}"), &format!("{other}{ending}"), 1))
}

/// The separator and `AM.png`/`PM.png` of a basename matching `^(.+)([ \u202F])(AM|PM)(\.png)$`.
fn claude_screenshot_name(path: &str) -> Option<(char, &str)> {
    let base = node_basename(path);
    let ending = ["AM.png", "PM.png"].into_iter().find(|ending| base.ends_with(ending))?;
    let head = &base[..base.len() - ending.len()];
    let separator = head.chars().next_back()?;
    let before = &head[..head.len() - separator.len_utf8()];
    let line_terminator = |c: char| matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}');
    let matched = matches!(separator, ' ' | '\u{202F}')
        && !before.is_empty()
        && !before.chars().any(line_terminator);
    matched.then_some((separator, ending))
}

/// Node's `path.posix.basename` for an absolute path: the last segment, trailing `/`s ignored.
fn node_basename(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// A wider reading of the same fallback, kept as a margin: the first separator of the whole path
/// (space or U+202F, whichever comes first) swapped for the other one, when the basename matches.
fn claude_first_separator_spelling(resolved: &str) -> Option<String> {
    claude_screenshot_name(resolved)?;
    let (at, found) = resolved.char_indices().find(|(_, c)| matches!(c, ' ' | '\u{202F}'))?;
    let other = if found == ' ' { "\u{202F}" } else { " " };
    Some(format!("{}{other}{}", &resolved[..at], &resolved[at + found.len_utf8()..]))
}

/// Every other spelling of `resolved` that the harness's read tool might open instead; the
/// resolved path itself is left out. Pi: its four (`resolveReadPath`). Claude Code: its own
/// fallback ([`claude_read_spelling`]) and the margin beside it, plus, as before, Pi's four and
/// the U+202F-to-space swap before `AM.`/`PM.` anywhere in the path.
pub(crate) fn read_spellings(harness: crate::policy::Harness, resolved: &str) -> Vec<String> {
    let mut spellings: Vec<String> = Vec::with_capacity(7);
    let [am_pm, nfd, curly, nfd_curly] = pi_read_spellings(resolved);
    let mut all = vec![am_pm, nfd, curly, nfd_curly];
    if harness == crate::policy::Harness::ClaudeCode {
        all.push(am_pm_space_spelling(resolved));
        all.extend(claude_read_spelling(resolved));
        all.extend(claude_first_separator_spelling(resolved));
    }
    for spelling in all {
        if spelling != resolved && !spellings.contains(&spelling) {
            spellings.push(spelling);
        }
    }
    spellings
}

/// Pi's `resolveReadPath(filePath, cwd)`: the first spelling that exists (following symlinks,
/// as `access(F_OK)`), else the resolved path.
pub fn resolve_read_path(path: &str, cwd: &str, home: Option<&str>) -> Result<String, PiPathError> {
    let resolved = resolve_to_cwd(path, cwd, home)?;
    let exists = |candidate: &str| std::fs::metadata(candidate).is_ok();
    if exists(&resolved) {
        return Ok(resolved);
    }
    let spellings = pi_read_spellings(&resolved);
    Ok(spellings
        .into_iter()
        .find(|spelling| *spelling != resolved && exists(spelling))
        .unwrap_or(resolved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Harness;

    const HOME: Option<&str> = Some("/home/jo");

    fn norm(input: &str) -> Result<String, PiPathError> {
        normalize_path(input, NormalizeOptions::TOOL, HOME)
    }

    #[test]
    fn normalize_path_cases() {
        assert_eq!(norm("@~/x").as_deref(), Ok("/home/jo/x"));
        assert_eq!(norm("@@x").as_deref(), Ok("@x"));
        assert_eq!(norm("~").as_deref(), Ok("/home/jo"));
        assert_eq!(norm("~user/x").as_deref(), Ok("~user/x"));
        assert_eq!(norm("~/../../etc/").as_deref(), Ok("/etc/"));
        assert_eq!(norm("a\u{3000}b\u{00A0}c").as_deref(), Ok("a b c"));
        assert_eq!(norm("file:///etc/pass%77d").as_deref(), Ok("/etc/passwd"));
        assert_eq!(norm("file://localhost/etc").as_deref(), Ok("/etc"));
        assert_eq!(norm("file:///a/../etc").as_deref(), Ok("/etc"));
        assert_eq!(norm("file://host/etc"), Err(PiPathError::FileUrlHost));
        assert_eq!(norm("file:///a%2Fb"), Err(PiPathError::FileUrlEncodedSlash));
        assert_eq!(norm("file:///a%C3"), Err(PiPathError::FileUrlDecode));
        assert_eq!(norm("FILE:///etc").as_deref(), Ok("FILE:///etc"));
        assert_eq!(normalize_path("~", NormalizeOptions::TOOL, None), Err(PiPathError::NoHome));
    }

    #[test]
    fn resolve_to_cwd_cases() {
        assert_eq!(resolve_to_cwd("a/../b", "/ws", HOME).as_deref(), Ok("/ws/b"));
        assert_eq!(resolve_to_cwd("../../etc", "/ws", HOME).as_deref(), Ok("/etc"));
        assert_eq!(resolve_to_cwd("@/etc/", "/ws", HOME).as_deref(), Ok("/etc"));
        assert_eq!(resolve_to_cwd("", "/ws", HOME).as_deref(), Ok("/ws"));
    }

    #[test]
    fn spellings_follow_pi() {
        assert_eq!(am_pm_spelling("/s/Shot 1.02 pm.png"), "/s/Shot 1.02\u{202F}pm.png");
        assert_eq!(am_pm_spelling("/s/a AM. PM."), "/s/a\u{202F}AM.\u{202F}PM.");
        assert_eq!(am_pm_spelling("/s/a AMX"), "/s/a AMX");
        assert_eq!(curly_spelling("/jo's/x"), "/jo\u{2019}s/x");
        assert_eq!(nfd("/caf\u{e9}"), "/cafe\u{301}");
        assert_eq!(read_spellings(Harness::Pi, "/plain/name"), Vec::<String>::new());
        assert_eq!(read_spellings(Harness::Pi, "/d'\u{e9}").len(), 3);
    }

    #[test]
    fn claude_fallback_swaps_the_first_occurrence_in_the_whole_path() {
        let nnbsp = '\u{202F}';
        // The directory's spelling changes, not the basename's: the first occurrence wins.
        assert_eq!(
            claude_read_spelling("/ws/d AM.png/shot AM.png").as_deref(),
            Some(format!("/ws/d{nnbsp}AM.png/shot AM.png").as_str())
        );
        assert_eq!(
            claude_read_spelling(&format!("/ws/e{nnbsp}AM.png/shot{nnbsp}AM.png")).as_deref(),
            Some(format!("/ws/e AM.png/shot{nnbsp}AM.png").as_str())
        );
        assert_eq!(
            claude_read_spelling("/ws/a b/shot 1 PM.png").as_deref(),
            Some(format!("/ws/a b/shot 1{nnbsp}PM.png").as_str())
        );
        // Not a match: lower case, another extension, nothing before the separator, a newline.
        for name in ["/ws/shot am.png", "/ws/shot AM.jpg", "/ws/ AM.png", "/ws/a\nb AM.png"] {
            assert_eq!(claude_read_spelling(name), None, "{name:?}");
        }
        assert_eq!(
            claude_first_separator_spelling("/ws/a b/shot PM.png").as_deref(),
            Some(format!("/ws/a{nnbsp}b/shot PM.png").as_str())
        );
        assert!(read_spellings(Harness::Pi, "/ws/d AM.png/shot AM.png").len() == 1);
        assert!(read_spellings(Harness::ClaudeCode, "/ws/d AM.png/shot AM.png").len() >= 2);
    }
}
