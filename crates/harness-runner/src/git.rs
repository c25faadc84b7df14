//! The tools the runner answers itself through the host's sockets: the git tools
//! (`push_working`, `fetch_review`, `land_work`) and `launch` (spec, "Typed tools").
//!
//! Commits move as git bundles. git runs with no system or global configuration and no hooks
//! (`core.hooksPath=/dev/null`), the fetch with fsck on, under a 300 s clock; a bundle file
//! lives in `RUN/tmp` only for the call and is deleted on every path; bundles are capped at
//! 32 MiB both ways.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use harness_tools::{
    Backend, BackendError, Capability, GitOp, HostSocket, HostSocketConfig, RefusalCode, Route,
    ToolDef,
};
use serde_json::{Value, json};

/// The largest bundle moved either way.
pub const MAX_BUNDLE_BYTES: u64 = 32 * 1024 * 1024;
/// How long git may run (spec, Limits: the tool call itself gives up after 60 s).
const GIT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the host's socket may take for one call.
const HOST_TIMEOUT: Duration = Duration::from_secs(150);

fn refused(code: &str) -> BackendError {
    match RefusalCode::new(code) {
        Some(code) => BackendError::Refused(code),
        None => BackendError::Failed(code.to_owned()),
    }
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
            return Err(refused("not-a-clone"));
        }
        let dir = self.workspace.join(project);
        crate::git_safety::check_git_dir(&dir).map_err(refused)?;
        Ok(dir)
    }

    /// Runs git in `dir` with no system or global configuration and no hooks.
    fn git(&self, dir: &Path, args: &[&str]) -> Result<String, BackendError> {
        #[expect(clippy::disallowed_methods, reason = "the runner runs git for the git tools")]
        let mut command = Command::new("git");
        // Hardening (crate::git_safety): its environment, overrides and repository, its domain.
        command
            .env_clear()
            .envs(crate::git_safety::environment(&self.tmp))
            .args(crate::git_safety::global_args(dir))
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::confinement::git_domain(&self.confine).map_err(failed)?.attach(&mut command);
        let mut child =
            command.spawn().map_err(|error| failed(format!("git could not start: {error}")))?;
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let out = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(pipe) = stdout.as_mut() {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        });
        let err = std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(pipe) = stderr.as_mut() {
                let _ = pipe.take(64 * 1024).read_to_string(&mut text);
            }
            text
        });
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().map_err(failed)? {
                break status;
            }
            if start.elapsed() > GIT_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(failed(format!(
                    "git {} took longer than {} s",
                    args.join(" "),
                    GIT_TIMEOUT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        if !status.success() {
            return Err(failed(format!(
                "git {} failed: {}",
                args.first().copied().unwrap_or(""),
                stderr.trim()
            )));
        }
        Ok(stdout.trim().to_owned())
    }

    fn push(&self, cap: &Capability, args: &Value) -> Result<Value, BackendError> {
        let (task_ref, project, branch) =
            (text(args, "task_ref")?, text(args, "project")?, text(args, "branch")?);
        if !plain_ref(branch) {
            return Err(refused("bad-branch"));
        }
        let clone = self.clone_dir(project)?;
        let local = format!("refs/heads/{branch}");
        let commit = self
            .git(&clone, &["rev-parse", "--verify", "--quiet", &format!("{local}^{{commit}}")])
            .map_err(|_| refused("no-such-branch"))?;
        let bundle = self.bundle_path("push");
        let path = bundle.0.to_string_lossy().into_owned();
        self.git(&clone, &["bundle", "create", "--quiet", &path, &local])?;
        let size = std::fs::metadata(&bundle.0).map_err(failed)?.len();
        if size > MAX_BUNDLE_BYTES {
            return Err(refused("bundle-too-large"));
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
        let path = bundle.0.to_string_lossy().into_owned();
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
                &path,
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
            return Err(refused("land-busy"));
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
    use super::plain_ref;

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
