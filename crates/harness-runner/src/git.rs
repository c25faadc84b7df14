//! The tools the runner answers itself through the host's sockets: the git tools
//! (`push_working`, `fetch_review`, `land_work`) and `launch` (spec, "Typed tools").
//!
//! Commits move as git bundles. git never runs on the session's clone: each call gets a bare
//! repository of the runner's in `STATE/git/` (crate::git_repo), whose alternates name the
//! clone's object store, and git runs there with the runner's configuration only
//! (crate::git_safety), under a 300 s clock. The push bundle goes from git's stdout into a file
//! with no name and from that descriptor to the host; the fetched bundle comes into the call's
//! repository, which is removed with everything in it on every path. Bundles are capped at
//! 32 MiB both ways.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use harness_bus::{Backend, BackendError, Capability, HostSocket, HostSocketConfig};
use harness_tools::{GitOp, Route, ToolDef};
use serde_json::{Value, json};

use crate::error::Refusal;
use crate::git_repo::{CallRepo, Clone, Format, object_id};
use crate::supervise::{self, Spawn, StderrTo, StdoutTo};

/// The largest bundle moved either way.
pub const MAX_BUNDLE_BYTES: u64 = 32 * 1024 * 1024;
/// How long git may run (spec, Limits: the tool call itself gives up after 60 s).
const GIT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the host's socket may take for one call.
const HOST_TIMEOUT: Duration = Duration::from_secs(150);

/// The most of git's stdout and stderr kept (a ref name, a commit; an error message).
const GIT_OUTPUT_CAP: usize = 64 * 1024;

fn refused(refusal: Refusal) -> BackendError {
    refusal.into()
}

fn failed(what: impl std::fmt::Display) -> BackendError {
    BackendError::Failed(what.to_string())
}

/// Returns true if and only if `name` is a plain git ref component path: `[A-Za-z0-9._/-]`, no
/// `..`, no leading `-` or `/`, no `//`, no trailing `/` or `.lock`.
fn plain_ref(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b))
        && !name.starts_with(['-', '/', '.'])
        && !name.ends_with(['/', '.'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("/.")
        && !name.contains(".lock/")
}

/// The git tools.
#[derive(Debug)]
pub(crate) struct GitTools {
    host: HostSocket,
    workspace: PathBuf,
    /// The runner's state directory: the calls' repositories live in its `git/`.
    state: PathBuf,
    clones: Vec<String>,
    /// `PATH` for git, from the runner's one environment source.
    path: OsString,
    /// True from a landing's start until its outcome arrives (a second one refuses land-busy).
    landing: AtomicBool,
    /// What git's Landlock domain is built from (crate::confinement).
    confine: crate::confinement::GitPaths,
}

impl GitTools {
    pub(crate) fn new(
        socket: PathBuf,
        workspace: PathBuf,
        state: PathBuf,
        clones: Vec<String>,
        path: OsString,
        confine: crate::confinement::GitPaths,
    ) -> Self {
        let host = HostSocket::new(HostSocketConfig {
            socket,
            timeout: HOST_TIMEOUT,
            max_bytes: MAX_BUNDLE_BYTES,
        });
        Self { host, workspace, state, clones, path, landing: AtomicBool::new(false), confine }
    }

    /// The landing's outcome arrived: land_work may start another.
    pub(crate) fn landing_done(&self) {
        self.landing.store(false, Ordering::SeqCst);
    }

    fn clone(&self, project: &str) -> Result<Clone, BackendError> {
        if !self.clones.iter().any(|clone| clone == project) {
            return Err(refused(Refusal::NotAClone));
        }
        Clone::open(&self.workspace, project).map_err(refused)
    }

    fn call_repo(&self) -> Result<CallRepo, BackendError> {
        CallRepo::create(&self.state)
            .map_err(|error| failed(format!("could not make git's repository: {error}")))
    }

    /// Runs git on the call's repository `repo` (never on the clone), with the runner's
    /// environment and configuration only, under the supervisor: its own process group, killed
    /// as a group at the deadline, in git's Landlock domain.
    fn git(
        &self,
        repo: &CallRepo,
        args: &[&str],
        stdout: StdoutTo,
    ) -> Result<String, BackendError> {
        let env = crate::git_safety::environment(repo.path(), self.path.clone());
        let mut argv = crate::git_safety::global_args(repo.path());
        argv.extend(args.iter().map(OsString::from));
        let domain = crate::confinement::git_domain(&self.confine).map_err(failed)?;
        let outcome = supervise::run(Spawn {
            program: Path::new("git"),
            args: argv,
            env,
            cwd: repo.path(),
            stdout,
            stderr: StderrTo::Capture(GIT_OUTPUT_CAP),
            deadline: GIT_TIMEOUT,
            stop: None,
            pre_exec: Some(&domain),
        })
        .map_err(|error| failed(format!("git could not run: {error}")))?;
        let what = format!("git {}", subcommand(args));
        if !outcome.success() {
            let stderr = String::from_utf8_lossy(&outcome.stderr);
            return Err(failed(format!(
                "{}: {}",
                outcome.ended.describe(&what, GIT_TIMEOUT),
                stderr.trim()
            )));
        }
        Ok(String::from_utf8_lossy(&outcome.stdout).trim().to_owned())
    }

    fn push(&self, cap: &Capability, args: &Value) -> Result<Value, BackendError> {
        let (task_ref, project, branch) =
            (text(args, "task_ref")?, text(args, "project")?, text(args, "branch")?);
        if !plain_ref(branch) {
            return Err(refused(Refusal::BadBranch));
        }
        let clone = self.clone(project)?;
        let local = format!("refs/heads/{branch}");
        // The runner reads the branch itself: a link, a FIFO, a symbolic ref or anything but an
        // id is no branch.
        let commit = match clone.read_ref(&local) {
            Ok(Some(commit)) => commit,
            Ok(None) | Err(_) => return Err(refused(Refusal::NoSuchBranch)),
        };
        let repo = self.call_repo()?;
        repo.init(Format::of(&commit), clone.objects_path(), &[])
            .and_then(|()| repo.write_ref(&local, &commit))
            .map_err(|error| failed(format!("could not prepare git's repository: {error}")))?;
        self.git(
            &repo,
            &["rev-parse", "--verify", "--quiet", &format!("{local}^{{commit}}")],
            StdoutTo::Thread(GIT_OUTPUT_CAP),
        )
        .map_err(|_| refused(Refusal::NoSuchBranch))?;
        // git writes the bundle to its stdout, a file with no name the runner holds: nothing can
        // put another file in its place between git and the host.
        let bundle = repo.anonymous().map_err(failed)?;
        let out = bundle.try_clone().map_err(failed)?;
        self.git(&repo, &["bundle", "create", "--quiet", "-", &local], StdoutTo::File(out))?;
        let size = bundle.metadata().map_err(failed)?.len();
        if size > MAX_BUNDLE_BYTES {
            return Err(refused(Refusal::BundleTooLarge));
        }
        let request =
            json!({"task_ref": task_ref, "project": project, "branch": branch, "commit": commit});
        let reply =
            self.host.call_with(cap, GitOp::Push.as_str(), &request, Some(&bundle), None)?;
        Ok(reply.result)
    }

    fn fetch(&self, cap: &Capability, args: &Value) -> Result<Value, BackendError> {
        let request = text(args, "request")?;
        let repo = self.call_repo()?;
        let download = repo.create_file("review.bundle").map_err(failed)?;
        let reply = self.host.call_with(
            cap,
            GitOp::Fetch.as_str(),
            &json!({"request": request}),
            None,
            Some(&download),
        )?;
        drop(download);
        let (project, work_ref, commit) = (
            text(&reply.result, "project")
                .map_err(|_| failed("the host's fetch reply names no project"))?,
            text(&reply.result, "ref")
                .map_err(|_| failed("the host's fetch reply names no ref"))?,
            text(&reply.result, "commit")
                .map_err(|_| failed("the host's fetch reply names no commit"))?,
        );
        if !plain_ref(work_ref) || !object_id(commit) {
            return Err(failed("the host's fetch reply names a ref or commit git cannot take"));
        }
        let clone = self.clone(project)?;
        repo.init(Format::of(commit), clone.objects_path(), &clone.ref_ids())
            .map_err(|error| failed(format!("could not prepare git's repository: {error}")))?;
        let tracking = format!("refs/remotes/working/{work_ref}");
        let spec = format!("+refs/heads/{work_ref}:{tracking}");
        // UTF-8, as the state directory is (run.json): never a lossy stand-in for the path.
        let bundle = repo.path().join("review.bundle");
        let path = bundle.to_str().ok_or_else(|| failed("the bundle path is not UTF-8"))?;
        let quiet = StdoutTo::Thread(GIT_OUTPUT_CAP);
        self.git(
            &repo,
            &["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", path, &spec],
            quiet,
        )?;
        // The runner reads what git wrote itself: one git process fewer.
        let fetched = repo
            .read_ref(&tracking)
            .map_err(|error| failed(format!("could not read the fetched {tracking}: {error}")))?
            .unwrap_or_default();
        if fetched != commit {
            return Err(failed(format!(
                "the bundle's {work_ref} is {fetched}, not the reviewed {commit}"
            )));
        }
        // The objects and the ref reach the clone through the runner's own descriptors.
        clone.import(&repo).and_then(|()| clone.write_ref(&tracking, commit)).map_err(|error| {
            failed(format!("could not write the review into the clone: {error}"))
        })?;
        Ok(json!({"project": project, "ref": tracking, "commit": commit}))
    }

    fn land(&self, cap: &Capability, args: &Value) -> Result<Value, BackendError> {
        if self.landing.swap(true, Ordering::SeqCst) {
            return Err(refused(Refusal::LandBusy));
        }
        let request =
            json!({"task_ref": text(args, "task_ref")?, "decision": text(args, "decision")?});
        match self.host.call(cap, GitOp::Land.as_str(), &request, None, None) {
            Ok(reply) => Ok(reply.result),
            Err(error) => {
                self.landing.store(false, Ordering::SeqCst);
                Err(error)
            }
        }
    }
}

/// The git subcommand in `args` (the first word that is neither an option nor the value of a
/// `-c`), for messages.
fn subcommand<'a>(args: &[&'a str]) -> &'a str {
    let mut words = args.iter();
    while let Some(&word) = words.next() {
        if word == "-c" {
            words.next();
        } else if !word.starts_with('-') {
            return word;
        }
    }
    ""
}

fn text<'a>(args: &'a Value, field: &str) -> Result<&'a str, BackendError> {
    args.get(field).and_then(Value::as_str).ok_or_else(|| failed(format!("{field} is missing")))
}

impl Backend for GitTools {
    fn call(&self, cap: &Capability, tool: &ToolDef, args: &Value) -> Result<Value, BackendError> {
        match tool.route {
            Route::Git(GitOp::Push) => self.push(cap, args),
            Route::Git(GitOp::Fetch) => self.fetch(cap, args),
            Route::Git(GitOp::Land) => self.land(cap, args),
            _ => Err(failed(format!("{} is not a git tool", tool.name))),
        }
    }
}

/// `launch`: one call to the host's launch socket.
#[derive(Debug)]
pub(crate) struct LaunchTool {
    host: HostSocket,
}

impl LaunchTool {
    pub(crate) fn new(socket: PathBuf) -> Self {
        Self {
            host: HostSocket::new(HostSocketConfig { socket, timeout: HOST_TIMEOUT, max_bytes: 0 }),
        }
    }
}

impl Backend for LaunchTool {
    fn call(&self, cap: &Capability, _tool: &ToolDef, args: &Value) -> Result<Value, BackendError> {
        Ok(self.host.call(cap, "launch", args, None, None)?.result)
    }
}

#[cfg(test)]
mod tests {
    use super::{plain_ref, subcommand};

    #[test]
    fn the_subcommand_is_named_past_the_options() {
        assert_eq!(subcommand(&["-c", "fetch.fsckObjects=true", "fetch", "--quiet"]), "fetch");
        assert_eq!(subcommand(&["rev-parse", "--verify"]), "rev-parse");
    }

    #[test]
    fn refs() {
        for good in ["main", "feature/x-1", "work/vikunja-web-12", "a.b"] {
            assert!(plain_ref(good), "{good}");
        }
        for bad in [
            "",
            "-x",
            "--upload-pack=evil",
            "a..b",
            "/a",
            "a/",
            "a//b",
            "a.lock",
            "a b",
            "a/.x",
            ".x",
            "x.",
        ] {
            assert!(!plain_ref(bad), "{bad}");
        }
    }
}
