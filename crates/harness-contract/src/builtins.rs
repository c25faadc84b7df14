//! Each CLI's built-in tools and the fields of their input that name a path.
//!
//! The gate checks every path-bearing field listed here; the adapters grant only tools listed
//! here. A tool that is not in its harness's table is not a built-in this build knows, so it can
//! be neither granted by a bundle nor checked field by field by the gate.

use crate::Harness;

/// How one field of a tool's input names what the tool opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// A path the tool opens. A field that is not `required` defaults to the working directory.
    /// `read` is true for a tool that may open another spelling of the name when the name does
    /// not exist (Pi's `read`, Claude Code's `Read`).
    Path {
        /// True if and only if the tool refuses a call without it.
        required: bool,
        /// True if and only if the tool may open another spelling of the name.
        read: bool,
    },
    /// A glob pattern, relative to the tool's path field (or the working directory).
    Pattern {
        /// True if and only if the tool refuses a call without it.
        required: bool,
        /// True if and only if an absolute pattern names its own search directory, so that the
        /// part before its first wildcard moves the search (Claude Code's Glob; docs/gate.md).
        absolute_base: bool,
    },
}

/// One path-bearing field of a tool's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathField {
    /// The field's name in the tool's input object.
    pub name: &'static str,
    /// How it names what the tool opens.
    pub kind: PathKind,
}

/// One built-in tool of one CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinTool {
    /// The tool's name as the CLI and its model name it.
    pub name: &'static str,
    /// The `limits.tools` name (the role file's vocabulary, Pi's names) that grants this tool,
    /// or `None` for a tool no role is granted.
    pub limit: Option<&'static str>,
    /// Its path-bearing fields, in the order the gate checks them (a pattern after the path it
    /// is relative to). Empty for a tool that names no path (`bash`).
    pub fields: &'static [PathField],
    /// True if and only if the tool writes or edits the file its path field names.
    pub writes: bool,
}

const fn path(name: &'static str) -> PathField {
    PathField { name, kind: PathKind::Path { required: true, read: false } }
}
const fn read_path(name: &'static str) -> PathField {
    PathField { name, kind: PathKind::Path { required: true, read: true } }
}
const fn optional_path(name: &'static str) -> PathField {
    PathField { name, kind: PathKind::Path { required: false, read: false } }
}
const fn pattern(name: &'static str, required: bool) -> PathField {
    PathField { name, kind: PathKind::Pattern { required, absolute_base: false } }
}
const fn base_pattern(name: &'static str) -> PathField {
    PathField { name, kind: PathKind::Pattern { required: true, absolute_base: true } }
}
const fn tool(
    name: &'static str,
    limit: Option<&'static str>,
    fields: &'static [PathField],
) -> BuiltinTool {
    BuiltinTool { name, limit, fields, writes: false }
}
const fn writer(
    name: &'static str,
    limit: Option<&'static str>,
    fields: &'static [PathField],
) -> BuiltinTool {
    BuiltinTool { name, limit, fields, writes: true }
}

/// Pi 0.85.1's built-in tools (its `--tools` names, which are also the `limits.tools` names).
/// `bash` names no path: it is limited only by the tool limit (S0 line 5).
const PI: &[BuiltinTool] = &[
    tool("read", Some("read"), &[read_path("path")]),
    writer("write", Some("write"), &[path("path")]),
    writer("edit", Some("edit"), &[path("path")]),
    tool("grep", Some("grep"), &[optional_path("path"), pattern("glob", false)]),
    tool("find", Some("find"), &[optional_path("path"), pattern("pattern", true)]),
    tool("ls", Some("ls"), &[optional_path("path")]),
    tool("bash", Some("bash"), &[]),
];

/// Claude Code 2.1.296's built-in tools that touch files, and Bash. A role's `limits.tools`
/// grants the five file tools with a Pi counterpart; `bash` has none because the adapter runs
/// Claude Code with `--restricted`, which removes Bash. MultiEdit, NotebookEdit and LS are never
/// granted (2.1.296 registers no MultiEdit or LS tool at all; the names appear only in its
/// permission code), but the gate still knows their fields, so a call to one is checked, not
/// guessed at.
const CLAUDE_CODE: &[BuiltinTool] = &[
    tool("Read", Some("read"), &[read_path("file_path")]),
    writer("Write", Some("write"), &[path("file_path")]),
    writer("Edit", Some("edit"), &[path("file_path")]),
    tool("Grep", Some("grep"), &[optional_path("path"), pattern("glob", false)]),
    tool("Glob", Some("find"), &[optional_path("path"), base_pattern("pattern")]),
    writer("MultiEdit", None, &[path("file_path")]),
    writer("NotebookEdit", None, &[path("notebook_path")]),
    tool("LS", None, &[path("path")]),
    tool("Bash", None, &[]),
];

/// The built-in tools of `harness`.
pub fn builtins(harness: Harness) -> &'static [BuiltinTool] {
    match harness {
        Harness::Pi => PI,
        Harness::ClaudeCode => CLAUDE_CODE,
    }
}

/// The built-in tools of `harness` that a role's `limits.tools` grants, in the table's order. A
/// limit that names no tool of this harness grants nothing: the gate would block such a tool.
pub fn granted(harness: Harness, limits: &[String]) -> Vec<&'static str> {
    builtins(harness)
        .iter()
        .filter(|tool| tool.limit.is_some_and(|limit| limits.iter().any(|l| l == limit)))
        .map(|tool| tool.name)
        .collect()
}

/// The built-in tool `name` of `harness`, or `None`.
pub fn builtin(harness: Harness, name: &str) -> Option<&'static BuiltinTool> {
    builtins(harness).iter().find(|tool| tool.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_grant_in_table_order_and_unknown_names_grant_nothing() {
        let limits: Vec<String> =
            ["ls", "read", "find", "frobnicate", "bash"].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(granted(Harness::Pi, &limits), ["read", "find", "ls", "bash"]);
        assert_eq!(granted(Harness::ClaudeCode, &limits), ["Read", "Glob"]);
        assert!(granted(Harness::ClaudeCode, &[]).is_empty());
    }

    #[test]
    fn every_limit_name_is_a_pi_tool() {
        for harness in Harness::ALL {
            for tool in builtins(harness) {
                if let Some(limit) = tool.limit {
                    assert!(builtin(Harness::Pi, limit).is_some(), "{harness} {}", tool.name);
                }
            }
        }
    }

    #[test]
    fn a_pattern_comes_after_the_path_it_is_relative_to() {
        for harness in Harness::ALL {
            for tool in builtins(harness) {
                let first_pattern =
                    tool.fields.iter().position(|f| matches!(f.kind, PathKind::Pattern { .. }));
                if let Some(at) = first_pattern {
                    assert!(
                        tool.fields[..at].iter().any(|f| matches!(f.kind, PathKind::Path { .. })),
                        "{harness} {}",
                        tool.name
                    );
                }
            }
        }
    }
}
