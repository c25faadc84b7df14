//! The tools the runner answers itself through the host's sockets: the git tools
//! (`push_working`, `fetch_review`, `land_work`) and `launch` (spec, "Typed tools").
//!
//! Commits move as git bundles. git runs with no system or global configuration and no hooks
//! (`core.hooksPath=/dev/null`), the fetch with fsck on, under a 300 s clock; a bundle file
//! lives in `RUN/tmp` only for the call and is deleted on every path; bundles are capped at
//! 32 MiB both ways.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use harness_bus::{Backend, BackendError, Capability, HostSocket, HostSocketConfig};
use harness_tools::{GitOp, Route, ToolDef};
use serde_json::{Value, json};

use crate::error::Refusal;
use crate::supervise::{self, Spawn, StderrTo};

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

/// A file deleted when dropped, on every path.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
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
}

/// The git tools.
#[derive(Debug)]
pub(crate) struct GitTools {
    host: HostSocket,
    workspace: PathBuf,
    tmp: PathBuf,
    clones: Vec<String>,
    /// `PATH` for git, from the runner's one environment source.
    path: OsString,
    /// True from a landing's start until its outcome arrives (a second one refuses land-busy).
    landing: AtomicBool,
    serial: AtomicU64,
    /// What git's Landlock domain is built from (crate::confinement).
    confine: crate::confinement::GitPaths,
}

impl GitTools {
    pub(crate) fn new(
        socket: PathBuf,
        workspace: PathBuf,
        tmp: PathBuf,
        clones: Vec<String>,
        path: OsString,
        confine: crate::confinement::GitPaths,
    ) -> Self {
        let host = HostSocket::new(HostSocketConfig {
            socket,
            timeout: HOST_TIMEOUT,
            max_bytes: MAX_BUNDLE_BYTES,
        });
        Self {
            host,
            workspace,
            tmp,
            clones,
            path,
            landing: AtomicBool::new(false),
            serial: AtomicU64::new(0),
            confine,
        }
    }

    /// The landing's outcome arrived: land_work may start another.
    pub(crate) fn landing_done(&self) {
        self.landing.store(false, Ordering::SeqCst);
    }

    fn bundle_path(&self, op: &str) -> TempFile {
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        TempFile(self.tmp.join(format!("{op}-{}-{serial}.bundle", std::process::id())))
    }

    fn clone_dir(&self, project: &str) -> Result<PathBuf, BackendError> {
        if !self.clones.iter().any(|clone| clone == project) {
            return Err(refused(Refusal::NotAClone));
        }
        let dir = self.workspace.join(project);
        crate::git_safety::check_git_dir(&dir).map_err(refused)?;
        Ok(dir)
    }

    /// Runs git in `dir` with no system or global configuration and no hooks, under the
    /// supervisor: its own process group, killed as a group at the deadline.
    fn git(&self, dir: &Path, args: &[&str]) -> Result<String, BackendError> {
        // Hardening (crate::git_safety): its environment, overrides and repository; and the
        // session's own domain, with RUN/tmp for the bundles.
        let env = crate::git_safety::environment(&self.tmp, self.path.clone());
        let mut argv = crate::git_safety::global_args(dir);
        argv.extend(["-C".into(), dir.as_os_str().to_owned()]);
        argv.extend(args.iter().map(OsString::from));
        let domain = crate::confinement::git_domain(&self.confine).map_err(failed)?;
        let outcome = supervise::run(Spawn {
            program: Path::new("git"),
            args: argv,
            env,
            cwd: &self.tmp,
            stdout: crate::supervise::StdoutTo::Thread(GIT_OUTPUT_CAP),
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
        let clone = self.clone_dir(project)?;
        let local = format!("refs/heads/{branch}");
        let commit = self
            .git(&clone, &["rev-parse", "--verify", "--quiet", &format!("{local}^{{commit}}")])
            .map_err(|_| refused(Refusal::NoSuchBranch))?;
        let bundle = self.bundle_path("push");
        // UTF-8, as the run directory is (load_run): never a lossy stand-in for the path.
        let path = bundle.0.to_str().ok_or_else(|| failed("the bundle path is not UTF-8"))?;
        self.git(&clone, &["bundle", "create", "--quiet", path, &local])?;
        // `RUN/tmp` is writable by the session: the bundle must still be the regular file git
        // wrote, not a link or a FIFO put in its place.
        let meta = std::fs::symlink_metadata(&bundle.0).map_err(failed)?;
        if !meta.file_type().is_file() {
            return Err(failed("the bundle git wrote was replaced by something else"));
        }
        let size = meta.len();
        if size > MAX_BUNDLE_BYTES {
            return Err(refused(Refusal::BundleTooLarge));
        }
        let request =
            json!({"task_ref": task_ref, "project": project, "branch": branch, "commit": commit});
        let reply = self.host.call(cap, GitOp::Push.as_str(), &request, Some(&bundle.0), None)?;
        Ok(reply.result)
    }

    fn fetch(&self, cap: &Capability, args: &Value) -> Result<Value, BackendError> {
        let request = text(args, "request")?;
        let bundle = self.bundle_path("fetch");
        let reply = self.host.call(
            cap,
            GitOp::Fetch.as_str(),
            &json!({"request": request}),
            None,
            Some(&bundle.0),
        )?;
        let (project, work_ref, commit) = (
            text(&reply.result, "project")
                .map_err(|_| failed("the host's fetch reply names no project"))?,
            text(&reply.result, "ref")
                .map_err(|_| failed("the host's fetch reply names no ref"))?,
            text(&reply.result, "commit")
                .map_err(|_| failed("the host's fetch reply names no commit"))?,
        );
        if !plain_ref(work_ref) || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(failed("the host's fetch reply names a ref or commit git cannot take"));
        }
        let clone = self.clone_dir(project)?;
        let tracking = format!("refs/remotes/working/{work_ref}");
        let spec = format!("+refs/heads/{work_ref}:{tracking}");
        // UTF-8, as the run directory is (load_run): never a lossy stand-in for the path.
        let path = bundle.0.to_str().ok_or_else(|| failed("the bundle path is not UTF-8"))?;
        self.git(
            &clone,
            &[
                "-c",
                "fetch.fsckObjects=true",
                "-c",
                "transfer.fsckObjects=true",
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                path,
                &spec,
            ],
        )?;
        let fetched = self.git(&clone, &["rev-parse", "--verify", "--quiet", &tracking])?;
        if fetched != commit {
            return Err(failed(format!(
                "the bundle's {work_ref} is {fetched}, not the reviewed {commit}"
            )));
        }
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
