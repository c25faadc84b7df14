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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git_repo::{CallRepo, Clone};

    /// Runs the real git with the runner's environment on `repo`, tracing every process it
    /// starts into `trace`; true if it succeeded.
    #[expect(clippy::disallowed_methods, reason = "the test runs the real git")]
    fn runners_git(repo: &Path, trace: &Path, args: &[&str]) -> bool {
        std::process::Command::new("git")
            .env_clear()
            .envs(environment(repo, std::env::var_os("PATH").unwrap_or_default()))
            .env("GIT_TRACE", trace)
            .args(global_args(repo))
            .args(args)
            .current_dir(repo)
            .stdin(std::process::Stdio::null())
            .status()
            .unwrap()
            .success()
    }

    /// Plain git in `dir`, for the test's own setup.
    #[expect(clippy::disallowed_methods, reason = "the test runs the real git")]
    fn plain(dir: &Path, args: &[&str]) -> String {
        let output = std::process::Command::new("git")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs([
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_CONFIG_GLOBAL", "/dev/null"),
                ("GIT_AUTHOR_NAME", "Test"),
                ("GIT_AUTHOR_EMAIL", "test@example.invalid"),
                ("GIT_COMMITTER_NAME", "Test"),
                ("GIT_COMMITTER_EMAIL", "test@example.invalid"),
            ])
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// A fetch into the call's repository needs to know what the clone has (a bundle's
    /// prerequisites must be reachable from a ref). git would ask the alternate by starting
    /// `git --git-dir=CLONE for-each-ref`, which reads the clone's configuration with the
    /// command line's `-c` values dropped; the runner's `core.alternateRefsCommand` answers
    /// instead, from the ids the runner read, the missing ones left out.
    #[test]
    fn a_fetch_starts_no_git_in_the_clone_and_a_missing_ref_does_not_stop_it() {
        let dir = tempfile::tempdir().unwrap();
        let clone = dir.path().join("web");
        std::fs::create_dir_all(&clone).unwrap();
        plain(&clone, &["init", "--quiet", "-b", "main"]);
        std::fs::write(clone.join("file.txt"), "one\n").unwrap();
        plain(&clone, &["add", "file.txt"]);
        plain(&clone, &["commit", "--quiet", "-m", "one"]);
        // The review: a commit on top of the clone's, bundled with the clone's as prerequisite.
        let other = dir.path().join("other");
        plain(dir.path(), &["clone", "--quiet", clone.to_str().unwrap(), other.to_str().unwrap()]);
        std::fs::write(other.join("file.txt"), "two\n").unwrap();
        plain(&other, &["commit", "--quiet", "-am", "two"]);
        let reviewed = plain(&other, &["rev-parse", "HEAD"]);
        let bundle = dir.path().join("review.bundle");
        plain(
            &other,
            &["bundle", "create", "--quiet", bundle.to_str().unwrap(), "main", "^origin/main"],
        );
        // A ref of the clone's to a commit that does not exist.
        std::fs::write(clone.join(".git/refs/heads/ghost"), format!("{}\n", "1".repeat(40)))
            .unwrap();

        let state = dir.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        let clone_dir = Clone::open(dir.path(), "web").unwrap();
        let repo = CallRepo::create(&state).unwrap();
        repo.init(Format::Sha1, clone_dir.objects_path(), &clone_dir.ref_ids()).unwrap();
        let trace = dir.path().join("trace");
        let spec = "+refs/heads/main:refs/remotes/working/main";
        assert!(runners_git(
            repo.path(),
            &trace,
            &["fetch", "--quiet", "--no-tags", bundle.to_str().unwrap(), spec]
        ));
        assert!(runners_git(
            repo.path(),
            &trace,
            &["rev-parse", "--verify", "--quiet", "refs/remotes/working/main"]
        ));
        let trace = std::fs::read_to_string(&trace).unwrap();
        assert!(
            trace.contains("--alternate-refs"),
            "the fetch asked for the alternate's refs: {trace}"
        );
        assert!(!trace.contains("for-each-ref"), "git ran in the clone: {trace}");
        clone_dir.import(&repo).unwrap();
        clone_dir.write_ref("refs/remotes/working/main", &reviewed).unwrap();
        assert_eq!(plain(&clone, &["rev-parse", "refs/remotes/working/main^{commit}"]), reviewed);
        // Every object of the review is in the clone's own store now.
        plain(&clone, &["rev-list", "--objects", &reviewed]);
    }

    #[test]
    fn the_configuration_is_one_git_reads() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config");
        std::fs::write(&file, config(dir.path(), Format::Sha256).unwrap()).unwrap();
        let listed = {
            #[expect(clippy::disallowed_methods, reason = "the test runs the real git")]
            let output = std::process::Command::new("git")
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .args(["config", "--file", file.to_str().unwrap(), "--list"])
                .output()
                .unwrap();
            String::from_utf8(output.stdout).unwrap()
        };
        for key in [
            "core.hookspath=/dev/null",
            "fetch.fsckobjects=true",
            "extensions.objectformat=sha256",
            "core.alternaterefscommand=git --git-dir=",
        ] {
            assert!(listed.contains(key), "{key}: {listed}");
        }
        assert!(config(Path::new("/a'b"), Format::Sha1).is_err(), "a path a shell would misread");
    }
}
