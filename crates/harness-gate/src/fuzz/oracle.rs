//! What a tool may open for a call, and where the kernel says that leads.
//!
//! Nothing here calls the gate's own resolution (`walk`, `pattern`, `decide`). What a harness
//! opens comes from Pi's functions as ported ([`crate::pi`], which `cargo xtask verify-pi` holds
//! to Pi's own answers) and, for Claude Code, from what it documents (trim, `~`, make absolute).
//! Where a path leads comes from the kernel: `std::fs::canonicalize` (`realpath(3)`) of its
//! longest existing prefix. The oracle is deliberately generous about what may be opened: every
//! spelling Pi's `resolveReadPath` would try, the lexical and the kernel's reading of `..`, and
//! both the workspace as given and its real path as the working directory.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Harness;
// JavaScript's trim set is a language constant, not a path rule: the oracle shares the gate's
// copy, which `cargo xtask verify-pi` compares with Node's `trim` for every scalar value.
use crate::claude::is_js_space;
use crate::pi::{NormalizeOptions, nfd, normalize_path, resolve_read_path, resolve_to_cwd};

/// What the oracle knows of the tree a call runs in.
#[derive(Debug, Clone)]
pub struct Setting {
    /// The workspace as the policy gives it (absolute, possibly through symlinks).
    pub workspace: String,
    /// The workspace's real path, from `canonicalize`.
    pub workspace_real: PathBuf,
    /// What `~` expands to.
    pub home: String,
}

/// One thing the tool may open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Open {
    /// This absolute path, as the kernel would resolve it.
    Path(String),
    /// Something the oracle cannot bound (a `..` after a wildcard): any allow is an escape.
    Unbounded(String),
    /// This absolute path, written or edited: it must lead inside and not into git metadata.
    Write(String),
}

/// Every path the tool named by `tool` may open for `input`, under `harness`.
///
/// A tool that would throw before opening anything (a bad `file://` URL, a NUL byte) opens
/// nothing. Tools that open no path (typed tools, unknown names) give an empty list.
pub fn opens(harness: Harness, tool: &str, input: &Value, setting: &Setting) -> Vec<Open> {
    let mut out = Vec::new();
    let field = |name: &str| input.get(name).and_then(Value::as_str);
    let bases = bases(setting);
    match (harness, tool) {
        (Harness::Pi, "read" | "write" | "edit" | "grep" | "find" | "ls") => {
            let raw = match field("path") {
                Some(path) if !path.is_empty() => path,
                _ => ".",
            };
            let lexical = pi_opens(raw, &bases, setting, tool == "read", &mut out);
            if matches!(tool, "write" | "edit") {
                as_writes(&mut out);
            }
            let pattern = match tool {
                "grep" => field("glob"),
                "find" => field("pattern"),
                _ => None,
            };
            if let Some(pattern) = pattern {
                pattern_opens(pattern, &lexical, setting, &mut out);
            }
        }
        (Harness::ClaudeCode, "Read" | "Write" | "Edit" | "MultiEdit" | "Grep" | "Glob") => {
            let path_field = if matches!(tool, "Grep" | "Glob") { "path" } else { "file_path" };
            let raw = match field(path_field) {
                Some(path) if !path.is_empty() => path,
                _ => ".",
            };
            let lexical = claude_opens(raw, &bases, setting, tool == "Read", &mut out);
            if matches!(tool, "Write" | "Edit" | "MultiEdit") {
                as_writes(&mut out);
            }
            let pattern = match tool {
                "Grep" => field("glob"),
                "Glob" => field("pattern"),
                _ => None,
            };
            if let Some(pattern) = pattern {
                pattern_opens(pattern, &lexical, setting, &mut out);
            }
            if let (Some(pattern), "Glob") = (field("pattern"), tool) {
                claude_glob_opens(pattern, &mut out);
            }
        }
        _ => {}
    }
    out
}

/// The working directories a tool may run in: the workspace's real path (what `getcwd` gives
/// both adapters) and the workspace as given.
fn bases(setting: &Setting) -> Vec<String> {
    let mut bases = vec![setting.workspace_real.display().to_string()];
    push_unique(&mut bases, setting.workspace.clone());
    bases
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

fn push_open(out: &mut Vec<Open>, open: Open) {
    if !out.contains(&open) {
        out.push(open);
    }
}

/// Pi's opens for a path argument; returns the lexically resolved paths (the search bases).
fn pi_opens(
    raw: &str,
    bases: &[String],
    setting: &Setting,
    read: bool,
    out: &mut Vec<Open>,
) -> Vec<String> {
    let home = Some(setting.home.as_str());
    let mut lexical = Vec::new();
    // Node throws on a NUL byte in any fs call: nothing is opened.
    if raw.contains('\0') {
        return lexical;
    }
    let Ok(normalized) = normalize_path(raw, NormalizeOptions::TOOL, home) else {
        return lexical;
    };
    for base in bases {
        let Ok(resolved) = resolve_to_cwd(raw, base, home) else { continue };
        push_open(out, Open::Path(resolved.clone()));
        if has_dot_dot(&normalized) {
            push_open(out, Open::Path(joined(base, &normalized)));
        }
        if read {
            if let Ok(opened) = resolve_read_path(raw, base, home) {
                push_open(out, Open::Path(opened));
            }
            for spelling in read_spellings(&resolved) {
                if std::fs::symlink_metadata(&spelling).is_ok() {
                    push_open(out, Open::Path(spelling));
                }
            }
        }
        push_unique(&mut lexical, resolved);
    }
    lexical
}

/// Claude Code's opens for a path argument: the path as given and as trimmed (JavaScript's
/// `trim`), `~` expanded, made absolute from the working directory.
fn claude_opens(
    raw: &str,
    bases: &[String],
    setting: &Setting,
    read: bool,
    out: &mut Vec<Open>,
) -> Vec<String> {
    let mut lexical = Vec::new();
    if raw.contains('\0') {
        return lexical;
    }
    for form in [raw, raw.trim_matches(is_js_space)] {
        if form.is_empty() {
            continue;
        }
        let form = if form == "~" {
            setting.home.clone()
        } else if let Some(rest) = form.strip_prefix("~/") {
            format!("{}/{rest}", setting.home)
        } else {
            form.to_owned()
        };
        let from: Vec<&str> = if form.starts_with('/') {
            vec!["/"]
        } else {
            bases.iter().map(String::as_str).collect()
        };
        for base in from {
            let resolved = lexical_resolve(base, &form);
            push_open(out, Open::Path(resolved.clone()));
            if has_dot_dot(&form) {
                push_open(out, Open::Path(joined(base, &form)));
            }
            if read {
                let fallback = claude_read_fallback(&resolved);
                for spelling in read_spellings(&resolved).into_iter().chain(fallback) {
                    if std::fs::symlink_metadata(&spelling).is_ok() {
                        push_open(out, Open::Path(spelling));
                    }
                }
            }
            push_unique(&mut lexical, resolved);
        }
    }
    lexical
}

/// Marks every path opened so far as written.
fn as_writes(out: &mut [Open]) {
    for open in out.iter_mut() {
        if let Open::Path(path) = open {
            *open = Open::Write(std::mem::take(path));
        }
    }
}

/// The directory Claude Code 2.1.296's Glob searches for an absolute pattern, written from its
/// minified source (docs/gate.md) without the gate's code: the text before the first `*`, `?`,
/// `[` or `{`, up to its last `/` (the parent directory when there is no such character),
/// JavaScript-trimmed and folded by `path.normalize`. The untrimmed base, and the kernel's
/// reading of a `..` in it, are added to be generous.
fn claude_glob_opens(pattern: &str, out: &mut Vec<Open>) {
    if !pattern.starts_with('/') || pattern.contains('\0') {
        return;
    }
    let base = match pattern.find(['*', '?', '[', '{']) {
        Some(first) => {
            let before = &pattern[..first];
            let cut = before.rfind('/').unwrap_or(0);
            if cut == 0 { "/".to_owned() } else { before[..cut].to_owned() }
        }
        None => {
            let trimmed = pattern.trim_end_matches('/');
            let cut = trimmed.rfind('/').unwrap_or(0);
            if cut == 0 { "/".to_owned() } else { trimmed[..cut].to_owned() }
        }
    };
    for form in [base.as_str(), base.trim_matches(is_js_space)] {
        push_open(out, Open::Path(lexical_resolve("/", form)));
        if has_dot_dot(form) {
            push_open(out, Open::Path(form.to_owned()));
        }
    }
}

/// The directory a glob pattern searches from each search base: its segments before the first
/// one holding a glob character (`*?[]{}`), which the tool opens as a directory and follows if
/// it is a symlink. Below it the tools list without following links (fd, ripgrep), so a match
/// reveals only a name; but an alternative of a `{...}` group that is absolute, starts with `~`,
/// or has a `..` segment below the literal prefix cannot be bounded.
fn pattern_opens(pattern: &str, bases: &[String], setting: &Setting, out: &mut Vec<Open>) {
    if pattern.contains('\0') {
        return;
    }
    let segments: Vec<&str> = pattern.split('/').collect();
    let wild = segments
        .iter()
        .position(|segment| segment.contains(['*', '?', '[', ']', '{', '}']))
        .unwrap_or(segments.len());
    for alternative in expand_braces(pattern, 0) {
        let climbs = alternative.split('/').skip(wild).any(|segment| segment == "..");
        let moved = alternative.starts_with('/') != pattern.starts_with('/')
            || (alternative.starts_with('~') && !pattern.starts_with('~'));
        if climbs || moved {
            push_open(out, Open::Unbounded(alternative));
        }
    }
    let literal = segments[..wild].join("/");
    let literal = if literal == "~" {
        setting.home.clone()
    } else if let Some(rest) = literal.strip_prefix("~/") {
        format!("{}/{rest}", setting.home)
    } else {
        literal
    };
    if literal.is_empty() && !pattern.starts_with('/') {
        return;
    }
    let literal = if literal.is_empty() { "/".to_owned() } else { literal };
    let from: Vec<&str> = if literal.starts_with('/') {
        vec!["/"]
    } else {
        bases.iter().map(String::as_str).collect()
    };
    for base in from {
        push_open(out, Open::Path(lexical_resolve(base, &literal)));
        if has_dot_dot(&literal) {
            push_open(out, Open::Path(joined(base, &literal)));
        }
    }
}

/// Every alternative of a pattern's `{a,b}` groups (innermost first); at most a few levels.
fn expand_braces(pattern: &str, depth: usize) -> Vec<String> {
    let Some(open) = pattern.rfind('{') else { return vec![pattern.to_owned()] };
    let Some(close) = pattern[open..].find('}').map(|at| open + at) else {
        return vec![pattern.to_owned()];
    };
    if depth > 4 {
        return vec![pattern.to_owned()];
    }
    let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
    pattern[open + 1..close]
        .split(',')
        .flat_map(|choice| expand_braces(&format!("{head}{choice}{tail}"), depth + 1))
        .fold(Vec::new(), |mut all, one| {
            push_unique(&mut all, one);
            all
        })
}

/// Returns true if and only if a `/`-separated segment of `path` is `..`.
fn has_dot_dot(path: &str) -> bool {
    path.split('/').any(|segment| segment == "..")
}

/// The path as the kernel reads it, `..` unresolved.
fn joined(base: &str, path: &str) -> String {
    if path.starts_with('/') { path.to_owned() } else { format!("{base}/{path}") }
}

/// `path.resolve(base, path)` on POSIX: `.` and `..` folded as text, no trailing slash.
fn lexical_resolve(base: &str, path: &str) -> String {
    let full = joined(base, path);
    let mut parts: Vec<&str> = Vec::new();
    for segment in full.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The other spellings Pi 0.85.1's `resolveReadPath` tries (U+202F before `AM.`/`PM.`, NFD,
/// U+2019 for `'`, both), and Claude Code's own swap of U+202F back to a space.
fn read_spellings(resolved: &str) -> Vec<String> {
    let decomposed = nfd(resolved);
    let mut spellings = Vec::new();
    for spelling in [
        am_pm(resolved, ' ', '\u{202F}'),
        decomposed.clone(),
        resolved.replace('\'', "\u{2019}"),
        decomposed.replace('\'', "\u{2019}"),
        am_pm(resolved, '\u{202F}', ' '),
    ] {
        if spelling != resolved {
            push_unique(&mut spellings, spelling);
        }
    }
    spellings
}

/// Claude Code 2.1.296's Read fallback, rebuilt here from its source apart from the gate's copy:
/// `n=path.basename(e)` must match `/^(.+)([ \u202F])(AM|PM)(\.png)$/`, and then
/// `e.replace(sep+ampm+".png", other+ampm+".png")`, the first occurrence in the whole path.
fn claude_read_fallback(resolved: &str) -> Option<String> {
    let name = resolved.trim_end_matches('/').rsplit('/').next()?;
    let stem = name.strip_suffix(".png")?;
    let am_pm = ["AM", "PM"].into_iter().find(|letters| stem.ends_with(letters))?;
    let mut head = stem[..stem.len() - 2].chars();
    let separator = head.next_back()?;
    let rest = head.as_str();
    let terminator = |c: char| ['\n', '\r', '\u{2028}', '\u{2029}'].contains(&c);
    if !matches!(separator, ' ' | '\u{202F}') || rest.is_empty() || rest.contains(terminator) {
        return None;
    }
    let other = if separator == ' ' { '\u{202F}' } else { ' ' };
    let find = format!("{separator}{am_pm}.png");
    let at = resolved.find(&find)?;
    Some(format!("{}{other}{am_pm}.png{}", &resolved[..at], &resolved[at + find.len()..]))
}

/// `path.replace(/ (AM|PM)\./gi, ...)` with `from` for the space and `to` for its replacement.
fn am_pm(path: &str, from: char, to: char) -> String {
    let mut out = String::with_capacity(path.len() + 4);
    let mut rest = path;
    while let Some(c) = rest.chars().next() {
        let after = &rest[c.len_utf8()..];
        let bytes = after.as_bytes();
        let hit = c == from
            && bytes.len() >= 3
            && matches!(bytes[0].to_ascii_uppercase(), b'A' | b'P')
            && bytes[1].eq_ignore_ascii_case(&b'M')
            && bytes[2] == b'.';
        if hit {
            out.push(to);
            out.push_str(&after[..3]);
            rest = &after[3..];
        } else {
            out.push(c);
            rest = after;
        }
    }
    out
}

/// Where the kernel says `path` leads: `Ok(Some(real target))` from the longest prefix
/// `canonicalize` accepts, with the missing names appended (`..` among them undone);
/// `Ok(None)` when a name stands under a file, so nothing can be opened or made; `Err` with
/// what went wrong when a name on the way is a symlink the kernel cannot resolve (dangling, a
/// loop). A trailing `/` is dropped: it only makes an open fail where the name is a file.
pub fn kernel_target(path: &Path) -> Result<Option<PathBuf>, String> {
    let mut prefix: PathBuf = path.components().collect();
    let mut tail: Vec<OsString> = Vec::new();
    loop {
        match prefix.canonicalize() {
            Ok(_) if !tail.is_empty() && !prefix.is_dir() => {
                // A name under a file: the kernel fails with ENOTDIR, and no directory can be
                // made there either, so nothing is opened.
                return Ok(None);
            }
            Ok(mut target) => {
                // Past the longest existing prefix, the names are missing: an open fails there,
                // and a tool that makes the directories first creates real directories, so a
                // `..` among them undoes a name, and below the prefix climbs its real parents.
                for name in tail.iter().rev() {
                    if name == ".." {
                        target.pop();
                    } else if name != "." {
                        target.push(name);
                    }
                }
                return Ok(Some(target));
            }
            Err(error) => {
                if std::fs::symlink_metadata(&prefix).is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(format!(
                        "{} is a symlink that does not resolve: {error}",
                        prefix.display()
                    ));
                }
                let last = match prefix.file_name() {
                    Some(name) => name.to_owned(),
                    None => match prefix.components().next_back() {
                        Some(component) => component.as_os_str().to_owned(),
                        None => return Err("empty path".to_owned()),
                    },
                };
                tail.push(last);
                if !prefix.pop() {
                    return Err(format!("nothing of {} resolves", path.display()));
                }
            }
        }
    }
}

/// Checks one open: `Ok(())` when the kernel resolves it inside the workspace's real path,
/// else the reason it is an escape.
pub fn check_open(open: &Open, setting: &Setting) -> Result<(), String> {
    match open {
        Open::Unbounded(pattern) => {
            Err(format!("the pattern alternative {pattern:?} cannot be bounded"))
        }
        Open::Path(path) => match kernel_target(Path::new(path)) {
            Ok(None) => Ok(()),
            Ok(Some(target)) if target.starts_with(&setting.workspace_real) => Ok(()),
            Ok(Some(target)) => Err(format!("{path:?} leads to {target:?}, outside")),
            Err(reason) => Err(format!("{path:?}: {reason}")),
        },
        Open::Write(path) => {
            check_open(&Open::Path(path.clone()), setting)?;
            let lexical = Path::new(path);
            let target = kernel_target(lexical).ok().flatten();
            let in_git = |path: &Path| {
                let tail = path.strip_prefix(&setting.workspace_real).unwrap_or(path);
                let tail = tail.strip_prefix(&setting.workspace).unwrap_or(tail);
                tail.components().any(|part| part.as_os_str() == ".git")
            };
            // The workspace's `.git` may itself be a link to the metadata under another name.
            let git_dir = setting.workspace_real.join(".git");
            let linked_git = std::fs::symlink_metadata(&git_dir)
                .is_ok_and(|meta| meta.file_type().is_symlink())
                .then(|| git_dir.canonicalize().ok())
                .flatten();
            let into_linked =
                |target: &Path| linked_git.as_ref().is_some_and(|git| target.starts_with(git));
            match target {
                Some(target) if in_git(&target) || into_linked(&target) => {
                    Err(format!("{path:?} writes {target:?}, in git metadata"))
                }
                _ if in_git(&lexical_fold(lexical)) => {
                    Err(format!("{path:?} writes into git metadata"))
                }
                _ => Ok(()),
            }
        }
    }
}

/// `path` with `.` and `..` folded as text.
fn lexical_fold(path: &Path) -> PathBuf {
    PathBuf::from(lexical_resolve("/", &path.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_expand() {
        assert_eq!(expand_braces("{a,b}/*", 0), ["a/*", "b/*"]);
        assert_eq!(expand_braces("x{,/..}", 0), ["x", "x/.."]);
        assert_eq!(expand_braces("{a,{b,c}}", 0).len(), 3);
    }

    #[test]
    fn lexical_folds() {
        assert_eq!(lexical_resolve("/ws", "a/../../b"), "/b");
        assert_eq!(lexical_resolve("/ws", "/x/./y/"), "/x/y");
        assert_eq!(lexical_resolve("/ws", "../../.."), "/");
    }

    #[test]
    fn claude_fallback_is_the_first_occurrence() {
        let nnbsp = '\u{202F}';
        assert_eq!(
            claude_read_fallback("/w/d AM.png/shot AM.png"),
            Some(format!("/w/d{nnbsp}AM.png/shot AM.png"))
        );
        assert_eq!(
            claude_read_fallback(&format!("/w/e{nnbsp}PM.png/s{nnbsp}PM.png")),
            Some(format!("/w/e PM.png/s{nnbsp}PM.png"))
        );
        assert_eq!(claude_read_fallback("/w/s am.png"), None);
        assert_eq!(claude_read_fallback("/w/ AM.png"), None);
    }

    #[test]
    fn am_pm_spellings() {
        assert_eq!(am_pm("/a 1 PM.png", ' ', '\u{202F}'), "/a 1\u{202F}PM.png");
        assert_eq!(am_pm("/a 1\u{202F}am.x", '\u{202F}', ' '), "/a 1 am.x");
        assert_eq!(am_pm("/a AMX", ' ', '\u{202F}'), "/a AMX");
    }
}
