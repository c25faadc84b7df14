//! The one supervisor: every process the runner starts (the adapter of a turn, git for the git
//! tools) is started and ended here.
//!
//! [`run`] spawns a [`Spawn`] with an explicit environment (`env_clear` and the given variables,
//! nothing inherited), in a process group of its own (`process_group(0)`), stdin null, stdout
//! and stderr read through pipes on threads of their own (into capped buffers, or stderr into a
//! capped file: [`crate::capped`]), or stdout inline on the waiting thread for a short output
//! ([`StdoutTo::Inline`]), and waits under a deadline and a stop flag. It returns an [`Outcome`]: how the process ended
//! ([`Ended`]) and what was read from it, also when a detached descendant (`setsid sleep 40 &`)
//! still holds the pipe: once the process has ended the rest of the tree is killed (see
//! [`sweep_descendants`]) and whatever arrived within a short grace is taken. The whole group is
//! killed on every path, a panic included (a guard kills it on unwind).
//!
//! # The confinement hook
//!
//! [`Spawn::pre_exec`] takes an optional [`PreExec`] hook, called with the [`Command`] after the
//! supervisor has set it up and before it is spawned. A confinement (Landlock, the session's
//! own domain) plugs in there by registering a `CommandExt::pre_exec` closure on the command;
//! that closure runs in the child between `fork` and `exec` and must only make system calls (no
//! allocation, no locks). The supervisor does not look at what the hook does and needs no change
//! for it; a hook that fails in the child makes the spawn fail, which the caller reports as the
//! process not starting.
//!
//! # Descendants
//!
//! The runner is a child subreaper ([`become_subreaper`]): what a turn starts in a new session
//! (Pi runs bash commands with `setsid`) is reparented to the runner when its parent dies, not to
//! init. [`sweep_descendants`] kills and reaps every descendant of the runner but the ones it
//! is told to spare; the turn loop calls it after every turn, however the turn ended. Between
//! sweeps a reaper thread reaps every zombie child that [`run`] is not waiting for, so orphans
//! never pile up under the runner. In a turn's sandbox (its own PID namespace) the turn's
//! orphans go to the namespace's PID 1 instead, and its end ends them all; the sweep then finds
//! nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

use crate::capped::CappedFile;

/// A hook applied to the command before it is spawned (see the module docs).
pub(crate) trait PreExec: Send + Sync + std::fmt::Debug {
    /// Registers what must happen in the child before `exec` (a `pre_exec` closure).
    fn prepare(&self, command: &mut Command);
}

/// How long [`run`] waits between two looks at the child.
const WAIT_STEP: Duration = Duration::from_millis(5);
/// How long the output may still arrive once the process has ended and its tree is killed.
const GRACE: Duration = Duration::from_millis(500);

/// Where the child's stderr goes.
#[derive(Debug)]
pub(crate) enum StderrTo {
    /// Read into a buffer of at most this many bytes.
    Capture(usize),
    /// Read through a pipe and written to this file, at most its first and last 512 KiB with a
    /// line between them saying how much was dropped ([`CappedFile`]); a write that fails (a
    /// full disk) fails nothing.
    File(std::fs::File),
    /// Handed to the child as its stderr, no pipe and no thread: for a file only the runner reads
    /// back, capped, and whose growth the deadline bounds (the launch preflight's, `/dev/null`).
    Direct(std::fs::File),
}

/// How the child's stdout is read.
#[derive(Debug)]
pub(crate) enum StdoutTo {
    /// By a thread of its own, into at most this many bytes: a turn's answer, git's output.
    Thread(usize),
    /// On the calling thread between two looks at the child, into at most this many bytes: no
    /// thread, so nothing of one (its cached stack, its malloc arena) stays in the runner's
    /// memory after a short output such as the CLI's `--version` at start.
    Inline(usize),
    /// Written to this file, the caller's own descriptor (git's push bundle): nothing is kept.
    File(std::fs::File),
}

/// What to start and how.
#[derive(Debug)]
pub(crate) struct Spawn<'a> {
    /// The program, an absolute path or a name looked up in the given `PATH`.
    pub(crate) program: &'a Path,
    /// Its arguments.
    pub(crate) args: Vec<OsString>,
    /// Its whole environment.
    pub(crate) env: Vec<(OsString, OsString)>,
    /// Its working directory.
    pub(crate) cwd: &'a Path,
    /// How stdout is read, and the most of it kept; the rest is read and dropped, so the child
    /// never blocks on it.
    pub(crate) stdout: StdoutTo,
    /// Where stderr goes.
    pub(crate) stderr: StderrTo,
    /// How long it may run.
    pub(crate) deadline: Duration,
    /// Ends it early when set.
    pub(crate) stop: Option<&'a AtomicBool>,
    /// The confinement hook.
    pub(crate) pre_exec: Option<&'a dyn PreExec>,
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It exited (or a signal killed it) by itself.
    Exited(ExitStatus),
    /// It ran past its deadline and was killed.
    TimedOut,
    /// The stop flag was set and it was killed.
    Stopped,
}

impl Ended {
    /// Why a process that did not succeed did not, in words.
    pub(crate) fn describe(self, what: &str, deadline: Duration) -> String {
        match self {
            Self::Exited(status) => match (status.code(), status.signal()) {
                (Some(code), _) => format!("{what} exited with status {code}"),
                (None, Some(signal)) => format!("{what} was killed by signal {signal}"),
                _ => format!("{what} ended abnormally"),
            },
            Self::TimedOut => format!(
                "{what} ran past its wall clock of {} s and was stopped",
                deadline.as_secs()
            ),
            Self::Stopped => format!("{what} was stopped"),
        }
    }
}

/// What [`run`] returns.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// How it ended.
    pub(crate) ended: Ended,
    /// What it printed on stdout, up to the cap.
    pub(crate) stdout: Vec<u8>,
    /// What it printed on stderr, up to the cap (empty when stderr went to a file).
    pub(crate) stderr: Vec<u8>,
}

impl Outcome {
    /// True if and only if it exited 0.
    pub(crate) fn success(&self) -> bool {
        matches!(self.ended, Ended::Exited(status) if status.success())
    }
}

/// Kills the process group `group`; `ESRCH` means it is gone already.
pub(crate) fn kill_group(group: Pid) {
    let _ = rustix::process::kill_process_group(group, Signal::KILL);
}

/// Kills the process group it holds when dropped, so nothing the supervisor started outlives
/// its call, a panic included.
struct GroupGuard(Pid);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Bytes read from a pipe by a thread of their own, shared so that what arrived can be taken
/// while the pipe is still held open by someone else.
#[derive(Debug, Default)]
struct Captured {
    bytes: Vec<u8>,
    ended: bool,
}

#[derive(Debug, Clone, Default)]
struct Capture(Arc<(Mutex<Captured>, Condvar)>);

impl Capture {
    fn start(mut pipe: impl Read + Send + 'static, cap: usize) -> std::io::Result<Self> {
        let capture = Self::default();
        let shared = capture.clone();
        std::thread::Builder::new().name("supervise-pipe".into()).spawn(move || {
            let mut chunk = [0u8; 8192];
            loop {
                let read = match pipe.read(&mut chunk) {
                    Ok(0) | Err(_) => 0,
                    Ok(read) => read,
                };
                let (lock, ended) = &*shared.0;
                let mut captured = lock.lock().unwrap_or_else(PoisonError::into_inner);
                if read == 0 {
                    captured.ended = true;
                    ended.notify_all();
                    return;
                }
                // Past the cap the bytes are read and dropped: the child never blocks on a full
                // pipe and the runner's memory stays bounded.
                let room = cap.saturating_sub(captured.bytes.len());
                captured.bytes.extend_from_slice(&chunk[..read.min(room)]);
            }
        })?;
        Ok(capture)
    }

    /// Waits up to `grace` for the end of the pipe, then takes what arrived either way.
    fn take(&self, grace: Duration) -> Vec<u8> {
        let (lock, ended) = &*self.0;
        let captured = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut captured, _) = ended
            .wait_timeout_while(captured, grace, |captured| !captured.ended)
            .unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut captured.bytes)
    }
}

/// Runs `spawn` to its end (see the module docs). An error means it could not be started.
pub(crate) fn run(spawn: Spawn<'_>) -> std::io::Result<Outcome> {
    #[expect(
        clippy::disallowed_methods,
        reason = "the supervisor is where the runner starts its processes: the adapter and git"
    )]
    let mut command = Command::new(spawn.program);
    // stderr is a pipe but for a `Direct` file: a turn's file is written by the runner, capped,
    // never handed to the child (which could make it any size).
    match &spawn.stderr {
        StderrTo::Direct(file) => command.stderr(Stdio::from(file.try_clone()?)),
        _ => command.stderr(Stdio::piped()),
    };
    command
        .args(&spawn.args)
        .env_clear()
        .envs(spawn.env.iter().map(|(key, value)| (key, value)))
        .current_dir(spawn.cwd)
        .stdin(Stdio::null())
        .process_group(0);
    let stdout_to = match spawn.stdout {
        StdoutTo::File(file) => {
            command.stdout(Stdio::from(file));
            None
        }
        StdoutTo::Thread(cap) => {
            command.stdout(Stdio::piped());
            Some((cap, false))
        }
        StdoutTo::Inline(cap) => {
            command.stdout(Stdio::piped());
            Some((cap, true))
        }
    };
    if let Some(hook) = spawn.pre_exec {
        hook.prepare(&mut command);
    }
    // Registered under the reaper's lock, so the reaper never takes this child's status.
    let mut child = {
        let mut supervised = SUPERVISED.lock().unwrap_or_else(PoisonError::into_inner);
        let child = command.spawn()?;
        supervised.insert(i32::try_from(child.id()).unwrap_or(0), None);
        child
    };
    let pid = i32::try_from(child.id()).unwrap_or(0);
    let _registered = Registered(pid);
    let group = i32::try_from(child.id()).ok().and_then(Pid::from_raw);
    // Every path below kills the group; the guard covers a panic on this thread, which unwinds
    // past them (docs/reliability.md).
    let _guard = group.map(GroupGuard);
    let kill = || {
        if let Some(group) = group {
            kill_group(group);
        }
    };
    let (stdout, inline) = match (child.stdout.take(), stdout_to) {
        (Some(pipe), Some((cap, false))) => (Some(Capture::start(pipe, cap)), None),
        (Some(pipe), Some((cap, true))) => (None, Some(Inline::new(pipe, cap))),
        _ => (None, None),
    };
    let (stderr, stderr_file) = match (child.stderr.take(), spawn.stderr) {
        (Some(pipe), StderrTo::Capture(cap)) => (Some(Capture::start(pipe, cap)), None),
        (Some(pipe), StderrTo::File(file)) => (None, Some(CappedFile::start(pipe, file))),
        (None, _) | (Some(_), StderrTo::Direct(_)) => (None, None),
    };
    let (stdout, stderr, mut inline, stderr_file) =
        match (stdout.transpose(), stderr.transpose(), inline.transpose(), stderr_file.transpose())
        {
            (Ok(stdout), Ok(stderr), Ok(inline), Ok(stderr_file)) => {
                (stdout, stderr, inline, stderr_file)
            }
            (Err(error), ..) | (_, Err(error), ..) | (_, _, Err(error), _) | (.., Err(error)) => {
                kill();
                let _ = child.wait();
                return Err(error);
            }
        };
    let started = Instant::now();
    let ended = loop {
        match status_of(&mut child, pid) {
            Ok(Some(status)) => break Ended::Exited(status),
            Ok(None) => {}
            Err(error) => {
                kill();
                wait_for(&mut child, pid);
                return Err(error);
            }
        }
        if spawn.stop.is_some_and(|stop| stop.load(Ordering::SeqCst)) {
            break Ended::Stopped;
        }
        if started.elapsed() >= spawn.deadline {
            break Ended::TimedOut;
        }
        if let Some(inline) = &mut inline {
            inline.drain();
        }
        std::thread::sleep(WAIT_STEP);
    };
    // Whatever it left running in its group goes with it; a child still running is reaped.
    kill();
    if !matches!(ended, Ended::Exited(_)) {
        wait_for(&mut child, pid);
    }
    // One grace for all the pipes together: a process left holding every one of them costs the
    // call the grace once.
    let killed = Instant::now();
    let grace = || GRACE.saturating_sub(killed.elapsed());
    let take = |capture: Option<Capture>| capture.map(|c| c.take(grace())).unwrap_or_default();
    let stdout = match inline {
        Some(inline) => inline.finish(grace()),
        None => take(stdout),
    };
    if let Some(stderr_file) = stderr_file {
        stderr_file.finish(grace());
    }
    Ok(Outcome { ended, stdout, stderr: take(stderr) })
}

/// A pipe read without blocking, on the thread that waits for the child.
struct Inline {
    pipe: std::process::ChildStdout,
    bytes: Vec<u8>,
    cap: usize,
    ended: bool,
}

impl Inline {
    fn new(pipe: std::process::ChildStdout, cap: usize) -> std::io::Result<Self> {
        rustix::io::ioctl_fionbio(&pipe, true)?;
        Ok(Self { pipe, bytes: Vec::new(), cap, ended: false })
    }

    /// Reads what the pipe holds now, up to the cap (the rest is read and dropped).
    fn drain(&mut self) {
        let mut chunk = [0u8; 4096];
        while !self.ended {
            match self.pipe.read(&mut chunk) {
                Ok(0) => self.ended = true,
                Ok(read) => {
                    let room = self.cap.saturating_sub(self.bytes.len());
                    self.bytes.extend_from_slice(&chunk[..read.min(room)]);
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => self.ended = true,
            }
        }
    }

    /// What was read, once the pipe ended or `grace` passed (a process the child left may hold
    /// the pipe open: what came within the grace counts).
    fn finish(mut self, grace: Duration) -> Vec<u8> {
        let until = Instant::now() + grace;
        loop {
            self.drain();
            if self.ended || Instant::now() >= until {
                return self.bytes;
            }
            std::thread::sleep(WAIT_STEP);
        }
    }
}

/// The children [`run`] is waiting for, and the wait status of each once reaped. Every child of
/// the runner is reaped by [`reap`] (`waitpid(-1)`), a supervised one's status kept here for its
/// [`run`], so no zombie piles up under the runner between two sweeps (a turn outside a PID
/// namespace of its own can orphan thousands a second).
static SUPERVISED: Mutex<BTreeMap<i32, Option<i32>>> = Mutex::new(BTreeMap::new());

/// Takes a child out of [`SUPERVISED`] once [`run`] is done with it (a panic included).
struct Registered(i32);

impl Drop for Registered {
    fn drop(&mut self) {
        SUPERVISED.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.0);
    }
}

/// Reaps every child that has ended; keeps the status of a supervised one. Returns how many it
/// reaped.
fn reap() -> usize {
    let mut supervised = SUPERVISED.lock().unwrap_or_else(PoisonError::into_inner);
    let mut reaped = 0;
    while let Ok(Some((pid, status))) = rustix::process::wait(WaitOptions::NOHANG) {
        reaped += 1;
        if let Some(slot) = supervised.get_mut(&pid.as_raw_nonzero().get()) {
            *slot = Some(status.as_raw());
        }
    }
    reaped
}

/// True if and only if [`become_subreaper`] started the reaper: then every child's status is
/// taken by [`reap`], and [`run`] reads its child's from [`SUPERVISED`].
static REAPING: AtomicBool = AtomicBool::new(false);

/// The status of supervised child `pid` (`child`), once it has ended.
fn status_of(child: &mut std::process::Child, pid: i32) -> std::io::Result<Option<ExitStatus>> {
    if !REAPING.load(Ordering::SeqCst) {
        return child.try_wait();
    }
    let _ = reap();
    let supervised = SUPERVISED.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(supervised.get(&pid).copied().flatten().map(ExitStatus::from_raw))
}

/// Waits until supervised child `pid` (`child`, already killed) is reaped.
fn wait_for(child: &mut std::process::Child, pid: i32) {
    if !REAPING.load(Ordering::SeqCst) {
        let _ = child.wait();
        return;
    }
    while status_of(child, pid).is_ok_and(|status| status.is_none()) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// How often the reaper looks for ended children.
const REAP_EVERY: Duration = Duration::from_millis(20);

/// Makes this process a child subreaper: orphans of its descendants become its children, so
/// [`sweep_descendants`] finds what they left in a new session. A thread then reaps every ended
/// child every 20 ms (see [`SUPERVISED`]); the namespaces this kernel allows are probed first,
/// since the probe waits for its own child.
pub fn become_subreaper() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    let _ = harness_confine::namespace_support();
    REAPING.store(true, Ordering::SeqCst);
    std::thread::Builder::new().name("reaper".into()).spawn(|| {
        loop {
            // A round that reaped something goes again at once: orphans may come faster than
            // one every 20 ms.
            if reap() == 0 {
                std::thread::sleep(REAP_EVERY);
            }
        }
    })?;
    Ok(())
}

/// How long one sweep may go on killing (a tree that forks faster than it dies).
const SWEEP_LIMIT: Duration = Duration::from_secs(2);

/// Kills and reaps every descendant of this process. Returns how many processes it killed.
pub fn sweep_descendants() -> usize {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let started = Instant::now();
    let mut killed = BTreeSet::new();
    loop {
        let found = descendants(me);
        for &(pid, parent) in &found {
            if let Some(pid) = Pid::from_raw(pid) {
                if killed.insert(pid.as_raw_nonzero().get()) {
                    let _ = rustix::process::kill_process(pid, Signal::KILL);
                }
                if parent == me {
                    // Ours to reap (an orphan reparented here); never `waitpid(-1)`, which
                    // would take the status of a child another thread waits for.
                    let _ = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG);
                }
            }
        }
        if found.is_empty() || started.elapsed() > SWEEP_LIMIT {
            return killed.len();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The descendants of `root` as (pid, parent), from /proc.
fn descendants(root: i32) -> Vec<(i32, i32)> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok()) else {
            continue;
        };
        let Some(parent) = parent_of(&entry.path()) else { continue };
        children.entry(parent).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(parent) = stack.pop() {
        for &pid in children.get(&parent).into_iter().flatten() {
            if pid == root {
                continue;
            }
            out.push((pid, parent));
            stack.push(pid);
        }
    }
    out
}

/// The parent pid of the process at `/proc/PID`.
fn parent_of(dir: &Path) -> Option<i32> {
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    // The command name, in parentheses, may hold anything: the fields after its last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, deadline: Duration) -> Outcome {
        run(Spawn {
            program: Path::new("/bin/sh"),
            args: vec!["-c".into(), script.into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: Path::new("/"),
            stdout: StdoutTo::Thread(16),
            stderr: StderrTo::Capture(16),
            deadline,
            stop: None,
            pre_exec: None,
        })
        .unwrap()
    }

    #[test]
    fn output_is_capped_and_the_status_kept() {
        let outcome = sh(
            "head -c 100000 /dev/zero | tr '\\0' a; echo err >&2; exit 3",
            Duration::from_secs(20),
        );
        assert_eq!(outcome.stdout, b"aaaaaaaaaaaaaaaa");
        assert_eq!(outcome.stderr, b"err\n");
        assert_eq!(outcome.ended.describe("it", Duration::ZERO), "it exited with status 3");
    }

    /// Read inline (no thread): the output is capped without the child blocking on a full pipe,
    /// and a process the child left holding stdout does not hold the call past the grace.
    #[test]
    fn inline_output_is_capped_and_a_holder_does_not_hold_the_call() {
        let inline = |script: &str| {
            run(Spawn {
                program: Path::new("/bin/sh"),
                args: vec!["-c".into(), script.into()],
                env: vec![("PATH".into(), "/usr/bin:/bin".into())],
                cwd: Path::new("/"),
                stdout: StdoutTo::Inline(16),
                stderr: StderrTo::Capture(16),
                deadline: Duration::from_secs(20),
                stop: None,
                pre_exec: None,
            })
            .unwrap()
        };
        let outcome = inline("head -c 1000000 /dev/zero | tr '\\0' a; exit 3");
        assert_eq!(outcome.stdout, b"aaaaaaaaaaaaaaaa");
        assert_eq!(outcome.ended.describe("it", Duration::ZERO), "it exited with status 3");
        let started = Instant::now();
        let outcome = inline("setsid sleep 30 & echo $!");
        // The holder is this test's to end, by its pid (it left the group the call killed).
        let holder: i32 = String::from_utf8_lossy(&outcome.stdout).trim().parse().unwrap();
        let _ = rustix::process::kill_process(Pid::from_raw(holder).unwrap(), Signal::KILL);
        assert!(outcome.success());
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }

    #[test]
    fn the_environment_is_only_what_is_given() {
        let outcome = sh("echo \"${HOME:-none}\"", Duration::from_secs(20));
        assert_eq!(outcome.stdout, b"none\n");
    }

    #[test]
    fn a_deadline_kills_the_whole_group() {
        let outcome = run(Spawn {
            program: Path::new("/bin/sh"),
            args: vec!["-c".into(), "sleep 30 & echo $!; sleep 30".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: Path::new("/"),
            stdout: StdoutTo::Thread(64),
            stderr: StderrTo::Capture(16),
            deadline: Duration::from_millis(300),
            stop: None,
            pre_exec: None,
        })
        .unwrap();
        assert_eq!(outcome.ended, Ended::TimedOut);
        // The background child held stdout too: what was printed is kept all the same.
        let background: i32 = String::from_utf8(outcome.stdout).unwrap().trim().parse().unwrap();
        let gone = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |stat| stat.rsplit(')').next().unwrap().trim().starts_with('Z'))
        };
        let started = Instant::now();
        while !gone(background) && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(gone(background), "the group's other process outlived the deadline");
    }

    #[test]
    fn the_stop_flag_ends_it() {
        let stop = AtomicBool::new(true);
        let outcome = run(Spawn {
            program: Path::new("/bin/sh"),
            args: vec!["-c".into(), "sleep 30".into()],
            env: Vec::new(),
            cwd: Path::new("/"),
            stdout: StdoutTo::Thread(16),
            stderr: StderrTo::Capture(16),
            deadline: Duration::from_secs(30),
            stop: Some(&stop),
            pre_exec: None,
        })
        .unwrap();
        assert_eq!(outcome.ended, Ended::Stopped);
    }

    #[derive(Debug)]
    struct MarkEnv;

    impl PreExec for MarkEnv {
        fn prepare(&self, command: &mut Command) {
            command.env("HOOKED", "yes");
        }
    }

    #[test]
    fn the_hook_sees_the_command_before_the_spawn() {
        let outcome = run(Spawn {
            program: Path::new("/bin/sh"),
            args: vec!["-c".into(), "echo $HOOKED".into()],
            env: Vec::new(),
            cwd: Path::new("/"),
            stdout: StdoutTo::Thread(16),
            stderr: StderrTo::Capture(16),
            deadline: Duration::from_secs(20),
            stop: None,
            pre_exec: Some(&MarkEnv),
        })
        .unwrap();
        assert_eq!(outcome.stdout, b"yes\n");
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stat"), "12 (a) b) c) S 7 9 9 0").unwrap();
        assert_eq!(parent_of(dir.path()), Some(7));
    }
}
