//! What the runner's git reads: its environment and the one configuration it has (issue 20).
//!
//! git never runs on the session's clone (crate::git_repo): it runs with `--git-dir` of a bare
//! repository the runner made for the call, so the only configuration, attributes, hooks,
//! `commondir`, grafts or replace refs git could read are the runner's. The clone's object
//! store is named in that repository's `objects/info/alternates` and only read. Every git runs:
//!
//! - with a cleared environment: `PATH`, `HOME` (the call's repository, which holds no
//!   `.gitconfig`, `.config/git/attributes` or `ignore`), `GIT_CONFIG_NOSYSTEM=1`,
//!   `GIT_CONFIG_GLOBAL=/dev/null`, `GIT_ATTR_NOSYSTEM=1`, `GIT_NO_LAZY_FETCH=1`,
//!   `GIT_NO_REPLACE_OBJECTS=1`, `GIT_ALLOW_PROTOCOL=file`, `GIT_TERMINAL_PROMPT=0` and an
//!   empty `GIT_PROXY_COMMAND` ([`environment`]);
//! - with the repository's configuration written by the runner ([`config`]): no hooks
//!   (`core.hooksPath=/dev/null`), fsck on for what comes in, no maintenance, and
//!   `core.alternateRefsCommand` set to a command of the runner's. The last matters: to learn
//!   what an alternate already has, git otherwise starts `git --git-dir=ALTERNATE for-each-ref`
//!   with the command line's `-c` values dropped, which would read the clone's configuration.
//!   The runner's command lists the ids of the clone's refs (read by the runner itself) that
//!   name objects present, through git's `cat-file` on the call's repository.

use std::ffi::OsString;
use std::path::Path;

use crate::git_repo::{Format, line_safe};

/// The environment of every git the runner runs: nothing of the runner's but `path` (its
/// `PATH`, from the runner's one environment source).
pub(crate) fn environment(repo: &Path, path: OsString) -> Vec<(OsString, OsString)> {
    [
        ("PATH", path),
        ("HOME", repo.as_os_str().to_owned()),
        ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ("GIT_CONFIG_GLOBAL", "/dev/null".into()),
        ("GIT_ATTR_NOSYSTEM", "1".into()),
        ("GIT_TERMINAL_PROMPT", "0".into()),
        ("GIT_ALLOW_PROTOCOL", "file".into()),
        ("GIT_PROXY_COMMAND", "".into()),
        ("GIT_NO_REPLACE_OBJECTS", "1".into()),
        ("GIT_NO_LAZY_FETCH", "1".into()),
    ]
    .into_iter()
    .map(|(name, value)| (OsString::from(name), value))
    .collect()
}

/// The arguments before git's subcommand: no pager, and the call's repository named.
pub(crate) fn global_args(repo: &Path) -> Vec<OsString> {
    let mut git_dir = OsString::from("--git-dir=");
    git_dir.push(repo);
    vec!["--no-pager".into(), git_dir]
}

/// The configuration of the call's repository at `repo`, of object format `format`.
pub(crate) fn config(repo: &Path, format: Format) -> std::io::Result<String> {
    let path = repo.to_str().filter(|text| line_safe(text)).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the state directory cannot be named to git",
        )
    })?;
    // The ids of the clone's refs whose objects are there (a missing one would stop git's walk):
    // `cat-file` answers `ID missing` for those. The trailing `:` swallows the path git appends.
    let alternate_refs = format!(
        "git --git-dir='{path}' cat-file '--batch-check=%(objectname)' <'{path}/seeds' | grep -v ' missing$'; :"
    );
    let (version, extensions) = match format {
        Format::Sha1 => (0, ""),
        Format::Sha256 => (1, "[extensions]\n\tobjectFormat = sha256\n"),
    };
    Ok(format!(
        "[core]\n\
         \trepositoryformatversion = {version}\n\
         \tbare = true\n\
         \thooksPath = /dev/null\n\
         \tfsmonitor = false\n\
         \tattributesFile = /dev/null\n\
         \texcludesFile = /dev/null\n\
         \tsshCommand = false\n\
         \taskPass =\n\
         \teditor = false\n\
         \tpager = cat\n\
         \talternateRefsCommand = \"{alternate_refs}\"\n\
         {extensions}\
         [protocol]\n\tallow = never\n\
         [protocol \"file\"]\n\tallow = always\n\
         [fetch]\n\tfsckObjects = true\n\twriteCommitGraph = false\n\trecurseSubmodules = false\n\
         [transfer]\n\tfsckObjects = true\n\tbundleURI = false\n\
         [gc]\n\tauto = 0\n\
         [maintenance]\n\tauto = false\n\
         [credential]\n\thelper =\n"
    ))
}
