//! Running a child under a hard deadline, so a hung CLI fails its test instead of hanging it.
//!
//! The child gets its own process group, and expiry kills the whole group: the real CLIs start
//! helpers (Node workers, MCP servers, hooks) that would otherwise outlive it and keep its pipes
//! open. Both pipes are drained on their own threads so a chatty child can never block on a full
//! pipe while we wait for it.

use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// What a finished child printed, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliOutput {
    /// The exit status.
    pub status: ExitStatus,
    /// Everything written to stdout (lossy UTF-8).
    pub stdout: String,
    /// Everything written to stderr (lossy UTF-8).
    pub stderr: String,
}

impl CliOutput {
    /// Panics unless the child exited 0; the message carries its exit status, stdout and stderr.
    pub fn assert_success(&self) -> &Self {
        if !self.status.success() {
            panic!("the command failed: {self}");
        }
        self
    }
}

impl std::fmt::Display for CliOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Creates a command for `program`; the one place in this crate that does.
#[expect(
    clippy::disallowed_methods,
    reason = "testkit starts the real CLIs for tests; every command gets an explicit environment from its caller"
)]
pub(crate) fn new_command(program: &Path) -> Command {
    Command::new(program)
}

/// Runs `command` with stdout and stderr captured, in its own process group, and waits until it
/// exits and both pipes are closed. If `deadline` passes first, kills the whole process group and
/// returns a `TimedOut` error whose message holds what the child printed so far.
///
/// Stdin is left as the caller set it; [`crate::CliSandbox`] commands already use `Stdio::null()`.
pub fn run_with_deadline(mut command: Command, deadline: Duration) -> io::Result<CliOutput> {
    let started = Instant::now();
    command.stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = command.spawn().map_err(|error| {
        io::Error::new(error.kind(), format!("cannot start {command:?}: {error}"))
    })?;
    let (done_tx, done_rx) = mpsc::channel();
    let stdout = drain(child.stdout.take(), done_tx.clone());
    let stderr = drain(child.stderr.take(), done_tx);
    let collected = |buffer: &Arc<Mutex<Vec<u8>>>| {
        String::from_utf8_lossy(&buffer.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    };

    match wait(&mut child, &done_rx, started + deadline) {
        Ok(status) => {
            Ok(CliOutput { status, stdout: collected(&stdout), stderr: collected(&stderr) })
        }
        Err(error) => {
            kill_group(&mut child);
            // The reader threads are left behind rather than joined: a helper that escaped the
            // group may still hold a pipe open, and this function must return.
            Err(io::Error::new(
                error.kind(),
                format!(
                    "{command:?}: {error}\n--- stdout so far ---\n{}\n--- stderr so far ---\n{}",
                    collected(&stdout),
                    collected(&stderr)
                ),
            ))
        }
    }
}

/// Copies `pipe` into a shared buffer chunk by chunk, so a timeout can still report the output
/// so far, and signals `done` at end of file.
fn drain(pipe: Option<impl Read + Send + 'static>, done: mpsc::Sender<()>) -> Arc<Mutex<Vec<u8>>> {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let Some(mut pipe) = pipe else {
        let _ = done.send(());
        return buffer;
    };
    let shared = buffer.clone();
    thread::spawn(move || {
        let mut chunk = [0_u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => shared
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend_from_slice(&chunk[..n]),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        // The receiver is gone only if the caller already gave up; nothing is left to tell.
        let _ = done.send(());
    });
    buffer
}

/// Waits for the child to exit and for both pipes to reach end of file, until `deadline`.
fn wait(child: &mut Child, pipes_done: &Receiver<()>, deadline: Instant) -> io::Result<ExitStatus> {
    let mut status = None;
    let mut pipes_open = 2;
    // Poll the exit status, sleeping on the pipe channel in between, so the loop wakes at once
    // when output ends and at least every 10 ms for the exit.
    loop {
        if status.is_none() {
            status = child.try_wait()?;
        }
        if let (Some(status), 0) = (status, pipes_open) {
            return Ok(status);
        }
        let now = Instant::now();
        if now >= deadline {
            let what = match status {
                None => "the command did not exit before its deadline; killed its process group"
                    .to_owned(),
                Some(status) => format!(
                    "the command exited ({status}) but something it started kept its output open \
                     past the deadline; killed its process group"
                ),
            };
            return Err(io::Error::new(io::ErrorKind::TimedOut, what));
        }
        let nap = (deadline - now).min(Duration::from_millis(10));
        if pipes_done.recv_timeout(nap).is_ok() {
            pipes_open -= 1;
        }
    }
}

/// Kills the child's whole process group with SIGKILL and reaps the child.
///
/// The workspace forbids `unsafe` and this crate adds no dependency for `kill(2)`, so the shell's
/// built-in `kill` sends the signal. If the group is already gone the shell fails quietly, which
/// is the outcome we wanted anyway.
fn kill_group(child: &mut Child) {
    // The child leads its own group (`process_group(0)`), so its pid is the group's id.
    let group = i32::try_from(child.id()).ok().and_then(rustix::process::Pid::from_raw);
    if let Some(group) = group {
        // ESRCH means the whole group is gone already.
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The live processes whose command line holds `marker` (a test starts what it wants to find
/// with a marker of its own in its argv, such as `sh -c 'sleep 40; :' MARKER`).
pub fn marked_processes(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let zombie = status.lines().any(|line| line.starts_with("State:") && line.contains('Z'));
        if String::from_utf8_lossy(&cmdline).contains(marker) && !zombie {
            found.push(pid);
        }
    }
    found
}

/// Kills the processes [`marked_processes`] finds with `marker` and returns their pids, so that
/// a test whose check fails leaves nothing of its own running either.
pub fn kill_marked(marker: &str) -> Vec<u32> {
    let found = marked_processes(marker);
    for &pid in &found {
        if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    found
}
