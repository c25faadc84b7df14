//! `decide`: one tool call in, one decision out.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use harness_contract::{BuiltinTool, PathField, PathKind};
use serde_json::Value;

use crate::call::ToolCall;
use crate::ignore_files;
use crate::node_path;
use crate::pattern;
use crate::pi_paths::{self, NormalizeOptions};
use crate::policy::{Harness, Policy};
use crate::walk::{self, Resolution};

/// The prefix Claude Code gives the tools of the `mosaic` MCP server.
const CLAUDE_TYPED_PREFIX: &str = harness_contract::TYPED_PREFIX_CLAUDE;

/// Why a call was blocked, with a stable code for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The tool is neither a built-in of the policy nor one of its typed tools.
    ToolNotAllowed,
    /// The input is not what the tool takes (not an object, a path that is not a string, ...).
    BadInput,
    /// A path argument cannot be turned into a path (NUL byte, empty, a bad `file://` URL, `~`
    /// without a home).
    BadPath,
    /// A pattern cannot be checked (`..` after a wildcard, an escaping `{...}` group, ...).
    BadPattern,
    /// A path or one of its spellings resolves outside the workspace.
    OutsideWorkspace,
    /// A path or one of its spellings goes through a symlink whose target is missing.
    DanglingSymlink,
    /// Too many symlinks to follow.
    SymlinkLoop,
    /// A `..` climbs out of a name that does not exist or is not a directory.
    ClimbsOutOfAbsent,
    /// The path enters `/proc`, whose magic links depend on the process that opens them.
    ThroughProc,
    /// A component could not be examined, so nothing can be promised about the path.
    CannotCheck,
    /// A file tool would write or edit inside git metadata (a `.git` component).
    GitMetadata,
}

impl Rule {
    /// The stable code, as printed in block reasons.
    pub fn code(self) -> &'static str {
        match self {
            Self::ToolNotAllowed => "tool-not-allowed",
            Self::BadInput => "bad-input",
            Self::BadPath => "bad-path",
            Self::BadPattern => "bad-pattern",
            Self::OutsideWorkspace => "outside-workspace",
            Self::DanglingSymlink => "dangling-symlink",
            Self::SymlinkLoop => "symlink-loop",
            Self::ClimbsOutOfAbsent => "climbs-out-of-absent",
            Self::ThroughProc => "through-proc",
            Self::CannotCheck => "cannot-check",
            Self::GitMetadata => "git-metadata",
        }
    }
}

/// A blocked call: the rule and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The rule that blocked the call.
    pub rule: Rule,
    /// What was wrong, on one line (paths are quoted with their control characters escaped).
    pub reason: String,
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (rule {})", self.reason, self.rule.code())
    }
}

/// The gate's answer to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The call may run.
    Allow,
    /// The call must not run.
    Block(Block),
}

impl Decision {
    /// Returns true if and only if the call may run.
    pub fn is_allow(&self) -> bool {
        matches!(self, Self::Allow)
    }
}

fn block(rule: Rule, reason: String) -> Block {
    Block { rule, reason }
}

/// Answers one tool call under `policy`.
///
/// The policy's built-in tools pass when every path argument (and find/Glob pattern) resolves
/// inside the workspace after symlinks; its typed tools pass; everything else is blocked.
pub fn decide(policy: &Policy, call: &ToolCall) -> Decision {
    match check(policy, call) {
        Ok(()) => Decision::Allow,
        Err(blocked) => Decision::Block(blocked),
    }
}

fn check(policy: &Policy, call: &ToolCall) -> Result<(), Block> {
    let name = call.tool.as_str();
    // The built-in tools and their path fields come from harness-contract, the table the
    // adapters grant tools from, so the gate knows every tool a bundle can grant.
    let known = harness_contract::builtin(policy.harness, name);
    if policy.tools.iter().any(|tool| tool == name) {
        return match known {
            Some(tool) => check_args(policy, call, tool),
            // A policy can only list such a tool if it was not built by this version's bundle;
            // what such a tool opens is unknown, so it does not run.
            None => Err(block(
                Rule::ToolNotAllowed,
                format!(
                    "{name:?} is not a {} built-in tool this gate knows the paths of",
                    policy.harness
                ),
            )),
        };
    }
    if is_typed(policy, name) {
        // A typed tool named like a built-in file tool still gets its paths checked.
        return match known {
            Some(tool) => check_args(policy, call, tool),
            None => Ok(()),
        };
    }
    Err(block(Rule::ToolNotAllowed, format!("the tool {name:?} is not allowed in this session")))
}

fn is_typed(policy: &Policy, name: &str) -> bool {
    let typed_name = match policy.harness {
        Harness::Pi => Some(name),
        Harness::ClaudeCode => name.strip_prefix(CLAUDE_TYPED_PREFIX),
    };
    typed_name.is_some_and(|typed| policy.typed.iter().any(|tool| tool == typed))
}

fn input_object(call: &ToolCall) -> Result<&serde_json::Map<String, Value>, Block> {
    call.input.as_object().ok_or_else(|| {
        block(Rule::BadInput, format!("the input of {:?} is not a JSON object", call.tool))
    })
}

/// Reads a string field: `Ok(None)` when absent or null, an error when of another type.
fn string_field<'a>(
    call: &'a ToolCall,
    object: &'a serde_json::Map<String, Value>,
    field: &str,
) -> Result<Option<&'a str>, Block> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => {
            Err(block(Rule::BadInput, format!("{:?} of {:?} is not a string", field, call.tool)))
        }
    }
}

fn check_args(policy: &Policy, call: &ToolCall, tool: &BuiltinTool) -> Result<(), Block> {
    if tool.fields.is_empty() {
        return Ok(());
    }
    let object = input_object(call)?;
    // Where a pattern is relative to: the tool's own path argument, or the workspace.
    let mut search_bases: Option<Vec<String>> = None;
    // Where a search tool walks: every form of its path (each already checked to be inside).
    let mut search_roots: Vec<String> = Vec::new();
    for &PathField { name: field, kind } in tool.fields {
        match kind {
            PathKind::Path { required, read } => {
                let value = string_field(call, object, field)?;
                let raw = match value {
                    Some(raw) if !raw.is_empty() => raw,
                    _ if required => {
                        return Err(block(
                            Rule::BadPath,
                            format!("{:?} needs a non-empty {field:?}", call.tool),
                        ));
                    }
                    // Pi and Claude Code search the working directory when the path is left out.
                    _ => ".",
                };
                let candidates = path_candidates(policy, raw)?;
                for candidate in &candidates.primary {
                    let real = check_resolved(policy, raw, candidate)?;
                    if tool.writes {
                        check_not_git(policy, raw, candidate, &real)?;
                    }
                }
                if read {
                    check_spellings(policy, raw, &candidates.primary)?;
                }
                search_roots.extend(candidates.primary);
                search_bases = Some(candidates.lexical);
            }
            PathKind::Pattern { required, absolute_base } => {
                let Some(raw) = string_field(call, object, field)? else {
                    if required {
                        return Err(block(
                            Rule::BadInput,
                            format!("{:?} needs a {field:?}", call.tool),
                        ));
                    }
                    continue;
                };
                let bases = match &search_bases {
                    Some(bases) => bases.clone(),
                    None => workspace_bases(policy),
                };
                check_pattern(policy, raw, &bases)?;
                if absolute_base {
                    check_claude_glob_base(policy, raw)?;
                }
            }
        }
    }
    // Last, as the most costly check: what the search tool reads on its own below its path.
    if let Some(search) = ignore_files::search_of(policy.harness, call.tool.as_str()) {
        ignore_files::check(policy, search, &search_roots)?;
    }
    Ok(())
}

fn workspace_bases(policy: &Policy) -> Vec<String> {
    let mut bases = vec![policy.workspace.clone()];
    push_unique(&mut bases, policy.workspace_real.clone());
    bases
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// The paths a path argument may open.
struct Candidates {
    /// Every path the tool may open: each must resolve inside, existing or not.
    primary: Vec<String>,
    /// The lexically resolved forms, which patterns are relative to.
    lexical: Vec<String>,
}

/// Returns true if and only if a `/`-separated segment of `text` is `..`, where the lexical
/// (`path.resolve`) and the kernel's reading of a path can differ.
fn has_dot_dot(text: &str) -> bool {
    text.split('/').any(|segment| segment == "..")
}

/// JavaScript's `String.prototype.trim` white space (WhiteSpace and LineTerminator): what
/// Claude Code's own trim removes. `cargo xtask verify-pi` compares it with Node's `trim` for
/// every Unicode scalar value.
pub fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | ' '
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
            | '\u{feff}'
    )
}

/// JavaScript's white space with Rust's added (U+0085): a trim in another runtime. It does not
/// replace JavaScript's own: a path that ends in U+0085 keeps it in Claude Code's trim.
fn is_trimmed_space(c: char) -> bool {
    is_js_space(c) || c.is_whitespace()
}

/// The forms of a path argument the harness may turn it into before resolving it.
fn path_forms(policy: &Policy, raw: &str) -> Result<Vec<String>, Block> {
    if raw.contains('\0') {
        return Err(block(Rule::BadPath, format!("the path {raw:?} holds a NUL byte")));
    }
    let home = policy.home.as_deref();
    let bad = |error: pi_paths::PiPathError| {
        block(Rule::BadPath, format!("the path {raw:?} cannot be used: {error}"))
    };
    match policy.harness {
        // Pi: exactly its normalizePath (Unicode spaces, one `@`, `~`, `file://`).
        Harness::Pi => {
            let normalized =
                pi_paths::normalize_path(raw, NormalizeOptions::TOOL, home).map_err(bad)?;
            // A `file://` URL's `%00` decodes to a NUL byte, which Node's fs refuses.
            if normalized.contains('\0') {
                return Err(block(
                    Rule::BadPath,
                    format!("the path {raw:?} decodes to a NUL byte"),
                ));
            }
            Ok(vec![normalized])
        }
        // Claude Code trims the path and expands `~` itself (docs/gate.md): check the path as
        // given, as JavaScript trims it, and trimmed of Rust's white space too, each with `~`
        // expanded both folded and as text.
        Harness::ClaudeCode => {
            let mut forms = Vec::with_capacity(3);
            for form in [raw, raw.trim_matches(is_js_space), raw.trim_matches(is_trimmed_space)] {
                if form.is_empty() {
                    return Err(block(Rule::BadPath, format!("the path {raw:?} is blank")));
                }
                let options = NormalizeOptions::default();
                if form == "~" || form.starts_with("~/") {
                    push_unique(
                        &mut forms,
                        pi_paths::normalize_path(form, options, home).map_err(bad)?,
                    );
                    push_unique(&mut forms, unfolded_tilde(form, home).map_err(bad)?);
                } else {
                    push_unique(&mut forms, form.to_owned());
                }
            }
            Ok(forms)
        }
    }
}

/// `~` or `~/rest` expanded as text, `..` left in place: how Claude Code's expansion reads if it
/// does not fold (it is known only from strings in its binary, docs/gate.md), so that the kernel's
/// reading of a `..` after a symlink is checked too.
fn unfolded_tilde(form: &str, home: Option<&str>) -> Result<String, pi_paths::PiPathError> {
    let home = home.ok_or(pi_paths::PiPathError::NoHome)?;
    Ok(match form.strip_prefix("~/") {
        Some(rest) => format!("{home}/{rest}"),
        None => home.to_owned(),
    })
}

fn path_candidates(policy: &Policy, raw: &str) -> Result<Candidates, Block> {
    let mut primary = Vec::new();
    let mut lexical = Vec::new();
    for form in path_forms(policy, raw)? {
        add_candidates(policy, &form, &mut primary, &mut lexical);
    }
    Ok(Candidates { primary, lexical })
}

/// Adds what `form` (already normalised, absolute or relative) may open: resolved lexically as
/// the harness does and, when it holds `..`, also as the kernel would read it unresolved. A
/// relative form is resolved from the workspace as given and from its real path.
fn add_candidates(
    policy: &Policy,
    form: &str,
    primary: &mut Vec<String>,
    lexical: &mut Vec<String>,
) {
    let bases =
        if node_path::is_absolute(form) { vec!["/".to_owned()] } else { workspace_bases(policy) };
    for base in &bases {
        if let Some(resolved) = node_path::resolve(base, form) {
            push_unique(primary, resolved.clone());
            push_unique(lexical, resolved);
        }
        if has_dot_dot(form) {
            let joined = if node_path::is_absolute(form) {
                form.to_owned()
            } else {
                format!("{base}/{form}")
            };
            push_unique(primary, joined);
        }
    }
}

/// Requires `candidate` to resolve inside the workspace's real path; returns that real path.
fn check_resolved(policy: &Policy, raw: &str, candidate: &str) -> Result<PathBuf, Block> {
    let shown = |what: &str| {
        if candidate == raw {
            format!("{raw:?} {what}")
        } else {
            format!("{raw:?} (as {candidate:?}) {what}")
        }
    };
    match walk::resolve(Path::new(candidate)) {
        Resolution::Existing(real) | Resolution::Absent(real) => {
            if real.starts_with(&policy.workspace_real) {
                Ok(real)
            } else {
                Err(block(
                    Rule::OutsideWorkspace,
                    shown(&format!(
                        "resolves to {real:?}, outside the workspace {:?}",
                        policy.workspace_real
                    )),
                ))
            }
        }
        Resolution::Dangling(missing) => Err(block(
            Rule::DanglingSymlink,
            shown(&format!("goes through a dangling symlink ({missing:?} does not exist)")),
        )),
        Resolution::Loop(link) => Err(block(
            Rule::SymlinkLoop,
            shown(&format!("follows too many symlinks (at {link:?})")),
        )),
        Resolution::ClimbsOutOfAbsent(dir) => Err(block(
            Rule::ClimbsOutOfAbsent,
            shown(&format!("climbs with `..` out of {dir:?}, which is not an existing directory")),
        )),
        Resolution::ThroughProc(at) => Err(block(
            Rule::ThroughProc,
            shown(&format!("enters {at:?}, whose links depend on the process that opens them")),
        )),
        Resolution::Unreadable(at, error) => {
            Err(block(Rule::CannotCheck, shown(&format!("cannot be checked: {at:?}: {error}"))))
        }
    }
}

/// Checks every other spelling of each resolved read path that exists as a name.
fn check_spellings(policy: &Policy, raw: &str, primary: &[String]) -> Result<(), Block> {
    for resolved in primary {
        for spelling in pi_paths::read_spellings(policy.harness, resolved) {
            if std::fs::symlink_metadata(&spelling).is_ok() {
                check_resolved(policy, raw, &spelling)?;
            }
        }
    }
    Ok(())
}

fn check_pattern(policy: &Policy, raw: &str, bases: &[String]) -> Result<(), Block> {
    let literals = pattern::analyse(raw).map_err(|error| {
        block(Rule::BadPattern, format!("the pattern {raw:?} is refused: {}", error.describe()))
    })?;
    let mut primary = Vec::new();
    for literal in literals {
        // An empty literal prefix only reaches the search directory, checked as the tool's path.
        if !literal.is_empty() {
            literal_candidates(policy, raw, &literal, bases, &mut primary)?;
        }
    }
    for candidate in &primary {
        check_resolved(policy, raw, candidate)?;
    }
    Ok(())
}

/// Adds the paths a pattern's literal prefix may name: `~` expanded both ways, an absolute one
/// as itself, a relative one below each search base (lexically, and as the kernel reads `..`).
fn literal_candidates(
    policy: &Policy,
    raw: &str,
    literal: &str,
    bases: &[String],
    primary: &mut Vec<String>,
) -> Result<(), Block> {
    let mut lexical = Vec::new();
    if literal == "~" || literal.starts_with("~/") {
        let home = policy.home.as_deref();
        let refused =
            |error| block(Rule::BadPattern, format!("the pattern {raw:?} is refused: {error}"));
        // Folded as Pi's normalizePath does, and as text with `..` left for the kernel.
        let folded = pi_paths::normalize_path(literal, NormalizeOptions::default(), home)
            .map_err(refused)?;
        let unfolded = unfolded_tilde(literal, home).map_err(refused)?;
        add_candidates(policy, &folded, primary, &mut lexical);
        add_candidates(policy, &unfolded, primary, &mut lexical);
    } else if node_path::is_absolute(literal) {
        add_candidates(policy, literal, primary, &mut lexical);
    } else {
        for base in bases {
            if let Some(resolved) = node_path::resolve(base, literal) {
                push_unique(primary, resolved);
            }
            if has_dot_dot(literal) {
                push_unique(primary, format!("{base}/{literal}"));
            }
        }
    }
    Ok(())
}

/// Claude Code's Glob searches, for an absolute pattern, a directory it cuts out of the pattern
/// and passes through its path expansion (JavaScript `trim`, then `path.normalize`); the tool's
/// `path` is then ignored. That directory is checked as given, JavaScript-trimmed, trimmed of
/// Rust's white space too, each normalised and (when it holds `..`) as the kernel reads it.
fn check_claude_glob_base(policy: &Policy, raw: &str) -> Result<(), Block> {
    let Some(base) = pattern::claude_glob_base(raw) else {
        return Ok(());
    };
    let mut primary = Vec::new();
    let mut lexical = Vec::new();
    for form in [base.as_str(), base.trim_matches(is_js_space), base.trim_matches(is_trimmed_space)]
    {
        if !form.is_empty() {
            add_candidates(policy, form, &mut primary, &mut lexical);
        }
    }
    for candidate in &primary {
        check_resolved(policy, raw, candidate)?;
    }
    Ok(())
}

/// Where the workspace's own `.git` leads when it is not a plain directory: the real path of a
/// `.git` symlink, or the directory a `.git` file names (`gitdir: PATH`, as a linked worktree or
/// a submodule has). Writes there are git metadata under another name.
fn git_dir_targets(policy: &Policy) -> Vec<PathBuf> {
    let dot_git = Path::new(&policy.workspace_real).join(GIT_DIR);
    let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
        return Vec::new();
    };
    let named = if meta.file_type().is_symlink() {
        dot_git
    } else if meta.is_file() {
        // Only the first line matters to git; a bounded read keeps a huge file harmless.
        let mut head = Vec::with_capacity(4096);
        let read = std::fs::File::open(&dot_git).and_then(|file| {
            std::io::Read::read_to_end(&mut std::io::Read::take(file, 4096), &mut head)
        });
        let text = String::from_utf8_lossy(&head);
        match (read, text.lines().next().and_then(|line| line.strip_prefix("gitdir:"))) {
            (Ok(_), Some(target)) => Path::new(&policy.workspace_real).join(target.trim()),
            _ => return Vec::new(),
        }
    } else {
        return Vec::new();
    };
    match walk::resolve(&named) {
        Resolution::Existing(real) | Resolution::Absent(real) => vec![real],
        _ => Vec::new(),
    }
}

/// The name git keeps its metadata under. Linux names are case-sensitive, and git on Linux opens
/// exactly `.git`, so `.GIT` is an ordinary name.
const GIT_DIR: &str = ".git";

/// Refuses a write whose path, as the tool spells it (`candidate`) or as it really leads
/// (`real`), has a `.git` component below the workspace.
fn check_not_git(policy: &Policy, raw: &str, candidate: &str, real: &Path) -> Result<(), Block> {
    let below_workspace = |path: &Path| -> bool {
        let tail = [policy.workspace.as_str(), policy.workspace_real.as_str()]
            .iter()
            .find_map(|workspace| path.strip_prefix(workspace).ok())
            .unwrap_or(path);
        tail.components().any(|component| component == Component::Normal(GIT_DIR.as_ref()))
    };
    let into_git_dir = || git_dir_targets(policy).iter().any(|target| real.starts_with(target));
    if below_workspace(Path::new(candidate)) || below_workspace(real) || into_git_dir() {
        return Err(block(
            Rule::GitMetadata,
            format!(
                "{raw:?} (as {real:?}) is inside git metadata (a {GIT_DIR:?} directory), which \
                 no file tool may write"
            ),
        ));
    }
    Ok(())
}
