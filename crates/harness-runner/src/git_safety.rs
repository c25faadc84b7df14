//! The runner's git never runs what the session wrote (issue 12, item 11).
//!
//! The clone lives in the workspace, so the session can write its `.git`: its config, its hooks,
//! `commondir`, `objects/info/alternates`, or replace `.git` with a file or a link naming another
//! repository. Every git the runner runs therefore:
//!
//! - runs with a cleared environment, no system or global configuration, and
//!   `GIT_ALLOW_PROTOCOL=file`, which overrides every `protocol.*.allow` a configuration sets:
//!   no `ext::` command, no ssh, no remote helper, whatever `url.*.insteadOf` rewrites a URL to;
//! - gets every configuration key known to run a command or to change what git reads set on its
//!   command line, which git reads last, so it wins over the clone's value ([`OVERRIDES`]);
//! - names its repository explicitly (`--git-dir`, `--work-tree`), so no discovery walks up;
//! - refuses a `.git` that is not a plain directory, or that holds `commondir` or
//!   `objects/info/alternates` (`refused: unsafe-git-dir`), before git starts;
//! - runs under the session's own Landlock domain (plus `RUN/tmp` for its bundles), so whatever a
//!   configuration still manages to run reaches no more than the session does.
//!
//! What `-c` cannot reset: multi-valued keys that add (`url.<base>.insteadOf`, `include.path`,
//! `includeIf`), keys named by the session (`filter.<driver>.*`, `diff.<driver>.*`,
//! `merge.<driver>.*`, `remote.<name>.*`), and first-match keys (`core.gitProxy`). None of them
//! is used by the commands the runner runs (`rev-parse`, `bundle create`, `fetch` from a bundle
//! file), or they are bounded: an insteadOf rewrite can only name a protocol `GIT_ALLOW_PROTOCOL`
//! refuses or another file the domain lets the session read anyway (and the fetched commit is
//! checked against the reviewed one); `GIT_PROXY_COMMAND=""` disables `core.gitProxy`; includes
//! read only what the domain allows, and the command line still wins over what they set.

use std::ffi::OsString;
use std::path::Path;

use crate::error::Refusal;

/// `-c` overrides, each a key known to run a command or to change where git reads or writes.
pub(crate) const OVERRIDES: &[&str] = &[
    // Hooks, and the file-system monitor (a command or hook git runs on index reads).
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    // Transports that run commands (all also refused by GIT_ALLOW_PROTOCOL=file).
    "core.sshCommand=false",
    "ssh.variant=simple",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "protocol.ext.allow=never",
    "protocol.ssh.allow=never",
    "protocol.git.allow=never",
    "protocol.http.allow=never",
    "protocol.https.allow=never",
    "protocol.ftp.allow=never",
    "protocol.ftps.allow=never",
    // Commands run with alternates, and by upload-pack (the latter is read only from protected
    // configuration, which the runner's git has none of, but it costs nothing to pin).
    "core.alternateRefsCommand=",
    "core.alternateRefsPrefixes=",
    "uploadpack.packObjectsHook=",
    // Credentials and prompts: an empty helper clears the list; an empty askpass asks no one.
    "credential.helper=",
    "core.askPass=",
    // Signing and verification programs.
    "gpg.program=false",
    "gpg.openpgp.program=false",
    "gpg.x509.program=false",
    "gpg.ssh.program=false",
    "gpg.ssh.defaultKeyCommand=",
    // Editors, pagers, external diff.
    "core.editor=false",
    "sequence.editor=false",
    "core.pager=cat",
    "diff.external=",
    // What fetch would start or read besides the bundle: submodules (their own configs), bundle
    // URIs, and maintenance afterwards.
    "fetch.recurseSubmodules=false",
    "submodule.recurse=false",
    "fetch.bundleURI=",
    "transfer.bundleURI=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "fetch.writeCommitGraph=false",
    // Attributes (filters are chosen by them) from the system.
    "core.attributesFile=/dev/null",
];

/// The environment of every git the runner runs: nothing of the runner's but `path` (its
/// `PATH`, from the runner's one environment source).
pub(crate) fn environment(home: &Path, path: OsString) -> Vec<(OsString, OsString)> {
    [
        ("PATH", path),
        ("HOME", home.as_os_str().to_owned()),
        ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ("GIT_CONFIG_GLOBAL", "/dev/null".into()),
        ("GIT_ATTR_NOSYSTEM", "1".into()),
        ("GIT_TERMINAL_PROMPT", "0".into()),
        ("GIT_ALLOW_PROTOCOL", "file".into()),
        ("GIT_PROXY_COMMAND", "".into()),
        ("GIT_NO_REPLACE_OBJECTS", "1".into()),
    ]
    .into_iter()
    .map(|(name, value)| (OsString::from(name), value))
    .collect()
}

/// The arguments before git's subcommand: no pager, the overrides, and the repository named.
pub(crate) fn global_args(clone: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--no-pager".into()];
    for pair in OVERRIDES {
        args.push("-c".into());
        args.push((*pair).into());
    }
    let mut git_dir = OsString::from("--git-dir=");
    git_dir.push(clone.join(".git"));
    let mut work_tree = OsString::from("--work-tree=");
    work_tree.push(clone);
    args.extend([git_dir, work_tree]);
    args
}

/// Checks `clone/.git`: `NotAClone` if it is missing, `UnsafeGitDir` if it is
/// anything but a plain directory (a file such as `gitdir: ...`, a symlink) or holds
/// `commondir` or `objects/info/alternates` in any form (a file, a link, a directory).
pub(crate) fn check_git_dir(clone: &Path) -> Result<(), Refusal> {
    let git = clone.join(".git");
    let meta = match std::fs::symlink_metadata(&git) {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(Refusal::NotAClone);
        }
        Err(_) => return Err(Refusal::UnsafeGitDir),
    };
    if !meta.file_type().is_dir() {
        return Err(Refusal::UnsafeGitDir);
    }
    for name in ["commondir", "objects/info/alternates", "objects/info/http-alternates"] {
        match std::fs::symlink_metadata(git.join(name)) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            _ => return Err(Refusal::UnsafeGitDir),
        }
    }
    // `objects` or `objects/info` as a link would move where git reads objects from.
    for name in ["objects", "objects/info", "config", "refs"] {
        if std::fs::symlink_metadata(git.join(name)).is_ok_and(|meta| meta.file_type().is_symlink())
        {
            return Err(Refusal::UnsafeGitDir);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_dir_that_names_another_repository_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let clone = dir.path().join("web");
        std::fs::create_dir_all(&clone).unwrap();
        assert_eq!(check_git_dir(&clone), Err(Refusal::NotAClone));
        std::fs::write(clone.join(".git"), "gitdir: /elsewhere\n").unwrap();
        assert_eq!(check_git_dir(&clone), Err(Refusal::UnsafeGitDir));
        std::fs::remove_file(clone.join(".git")).unwrap();
        std::os::unix::fs::symlink(dir.path(), clone.join(".git")).unwrap();
        assert_eq!(check_git_dir(&clone), Err(Refusal::UnsafeGitDir));
        std::fs::remove_file(clone.join(".git")).unwrap();
        std::fs::create_dir_all(clone.join(".git/objects/info")).unwrap();
        assert_eq!(check_git_dir(&clone), Ok(()));
        std::fs::write(clone.join(".git/commondir"), "/elsewhere\n").unwrap();
        assert_eq!(check_git_dir(&clone), Err(Refusal::UnsafeGitDir));
        std::fs::remove_file(clone.join(".git/commondir")).unwrap();
        std::fs::write(clone.join(".git/objects/info/alternates"), "/elsewhere\n").unwrap();
        assert_eq!(check_git_dir(&clone), Err(Refusal::UnsafeGitDir));
        std::fs::remove_file(clone.join(".git/objects/info/alternates")).unwrap();
        std::fs::create_dir_all(clone.join(".git/objects/info/alternates")).unwrap();
        assert_eq!(check_git_dir(&clone), Err(Refusal::UnsafeGitDir), "alternates in any form");
        std::fs::remove_dir(clone.join(".git/objects/info/alternates")).unwrap();
        std::fs::remove_dir(clone.join(".git/objects/info")).unwrap();
        std::os::unix::fs::symlink(dir.path(), clone.join(".git/objects/info")).unwrap();
        assert_eq!(check_git_dir(&clone), Err(Refusal::UnsafeGitDir), "objects/info as a link");
    }

    /// A scratch world: a repository with one commit, a bundle of it, a marker path.
    struct World {
        dir: tempfile::TempDir,
    }

    impl World {
        fn new() -> World {
            let world = World { dir: tempfile::tempdir().unwrap() };
            let repo = world.repo();
            std::fs::create_dir_all(&repo).unwrap();
            world.git(false, &["init", "--quiet", "-b", "main"], None);
            std::fs::write(repo.join("file.txt"), "one\n").unwrap();
            world.git(false, &["add", "file.txt"], None);
            world.git(false, &["commit", "--quiet", "-m", "one"], None);
            let bundle = world.bundle();
            world.git(
                false,
                &["bundle", "create", "--quiet", bundle.to_str().unwrap(), "main"],
                None,
            );
            world
        }

        fn repo(&self) -> std::path::PathBuf {
            self.dir.path().join("clone")
        }

        fn bundle(&self) -> std::path::PathBuf {
            self.dir.path().join("work.bundle")
        }

        fn marker(&self) -> std::path::PathBuf {
            self.dir.path().join("MARKER")
        }

        /// A script that creates the marker.
        fn script(&self) -> std::path::PathBuf {
            use std::os::unix::fs::PermissionsExt;
            let path = self.dir.path().join("attack.sh");
            let body = format!("#!/bin/sh\ntouch '{}'\nexit 1\n", self.marker().display());
            std::fs::write(&path, body).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            path
        }

        fn configure(&self, text: &str) {
            use std::io::Write;
            let mut config = std::fs::OpenOptions::new()
                .append(true)
                .open(self.repo().join(".git/config"))
                .unwrap();
            config.write_all(text.as_bytes()).unwrap();
        }

        /// Runs git in the clone, plain (no configuration but the clone's) or hardened.
        #[expect(clippy::disallowed_methods, reason = "the test runs the real git")]
        fn git(&self, hardened: bool, args: &[&str], stdin: Option<&str>) -> bool {
            use std::io::Write;
            let mut command = std::process::Command::new("git");
            command.env_clear();
            if hardened {
                command
                    .envs(environment(
                        self.dir.path(),
                        std::env::var_os("PATH").unwrap_or_default(),
                    ))
                    .args(global_args(&self.repo()));
            } else {
                command
                    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                    .env("HOME", self.dir.path())
                    .env("GIT_CONFIG_NOSYSTEM", "1")
                    .env("GIT_CONFIG_GLOBAL", "/dev/null")
                    .env("GIT_TERMINAL_PROMPT", "0");
            }
            command
                .envs([
                    ("GIT_AUTHOR_NAME", "Test"),
                    ("GIT_AUTHOR_EMAIL", "test@example.invalid"),
                    ("GIT_COMMITTER_NAME", "Test"),
                    ("GIT_COMMITTER_EMAIL", "test@example.invalid"),
                ])
                .arg("-C")
                .arg(self.repo())
                .args(args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            let mut child = command.spawn().unwrap();
            let mut pipe = child.stdin.take().unwrap();
            let _ = pipe.write_all(stdin.unwrap_or("").as_bytes());
            drop(pipe);
            child.wait().unwrap().success()
        }
    }

    /// One attack: what the session writes in the clone's config, and the git command that
    /// would run it. Plain git runs it (the marker appears), so the attack is real; the
    /// hardened git does not.
    fn attack(
        name: &str,
        config: impl Fn(&World) -> String,
        trigger: &[&str],
        stdin: Option<&str>,
    ) {
        for hardened in [false, true] {
            let world = World::new();
            world.configure(&config(&world));
            let args: Vec<String> = trigger
                .iter()
                .map(|arg| arg.replace("BUNDLE", world.bundle().to_str().unwrap()))
                .collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            world.git(hardened, &args, stdin);
            assert_eq!(
                world.marker().exists(),
                !hardened,
                "{name}: {} git {}",
                if hardened { "the hardened" } else { "plain" },
                if hardened { "ran the session's command" } else { "did not run it (no attack)" }
            );
        }
    }

    const FETCH: &[&str] =
        &["fetch", "--quiet", "--no-tags", "BUNDLE", "+refs/heads/main:refs/remotes/working/main"];

    #[test]
    fn an_ext_url_rewrite_runs_nothing() {
        attack(
            "url.ext::.insteadOf with protocol.ext.allow",
            |w| {
                format!(
                    "[url \"ext::sh -c touch% {}% \"]\n\tinsteadOf = /\n[protocol \"ext\"]\n\tallow = always\n",
                    w.marker().display()
                )
            },
            FETCH,
            None,
        );
    }

    #[test]
    fn an_ssh_rewrite_with_core_ssh_command_runs_nothing() {
        attack(
            "core.sshCommand with an ssh rewrite",
            |w| {
                format!(
                    "[url \"ssh://evil.invalid/x\"]\n\tinsteadOf = /\n[core]\n\tsshCommand = {}\n",
                    w.script().display()
                )
            },
            FETCH,
            None,
        );
    }

    #[test]
    fn hooks_in_the_clone_or_named_by_core_hooks_path_do_not_run() {
        attack(
            "core.hooksPath",
            |w| {
                use std::os::unix::fs::PermissionsExt;
                let hooks = w.dir.path().join("hooks");
                std::fs::create_dir_all(&hooks).unwrap();
                let hook = hooks.join("reference-transaction");
                std::fs::copy(w.script(), &hook).unwrap();
                std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
                format!("[core]\n\thooksPath = {}\n", hooks.display())
            },
            FETCH,
            None,
        );
    }

    #[test]
    fn core_fsmonitor_runs_nothing() {
        attack(
            "core.fsmonitor",
            |w| format!("[core]\n\tfsmonitor = {}\n", w.script().display()),
            &["status", "--porcelain"],
            None,
        );
    }

    #[test]
    fn credential_helpers_and_askpass_run_nothing() {
        let fill = Some("protocol=https\nhost=example.invalid\n\n");
        attack(
            "credential.helper",
            |w| format!("[credential]\n\thelper = !{}\n", w.script().display()),
            &["credential", "fill"],
            fill,
        );
        attack(
            "core.askPass",
            |w| format!("[core]\n\taskPass = {}\n", w.script().display()),
            &["credential", "fill"],
            fill,
        );
    }

    #[test]
    fn signing_editor_and_external_diff_programs_run_nothing() {
        attack(
            "gpg.program",
            |w| format!("[gpg]\n\tprogram = {}\n", w.script().display()),
            &["commit", "--quiet", "--allow-empty", "-S", "-m", "signed"],
            None,
        );
        attack(
            "core.editor",
            |w| format!("[core]\n\teditor = {}\n", w.script().display()),
            &["commit", "--quiet", "--allow-empty"],
            None,
        );
        attack(
            "diff.external",
            |w| {
                std::fs::write(w.repo().join("file.txt"), "two\n").unwrap();
                format!("[diff]\n\texternal = {}\n", w.script().display())
            },
            &["diff"],
            None,
        );
    }

    #[test]
    fn a_remote_named_after_the_bundle_path_is_never_used() {
        // git never takes an absolute path as a remote's name, so a `[remote "<bundle path>"]`
        // the session writes cannot move the fetch nor name an upload-pack command.
        let world = World::new();
        let src = world.dir.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        world.configure(&format!(
            "[remote \"{}\"]\n\turl = {}\n\tuploadpack = {}\n\tvcs = evil\n",
            world.bundle().display(),
            src.display(),
            world.script().display()
        ));
        let args: Vec<String> = FETCH
            .iter()
            .map(|arg| arg.replace("BUNDLE", world.bundle().to_str().unwrap()))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert!(world.git(true, &args, None), "the fetch from the bundle itself works");
        assert!(!world.marker().exists());
    }

    #[test]
    fn every_override_is_a_key_and_a_value() {
        for pair in OVERRIDES {
            let (key, _) = pair.split_once('=').unwrap();
            assert!(key.contains('.') && !key.is_empty(), "{pair}");
        }
    }
}
