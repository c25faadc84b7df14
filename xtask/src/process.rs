//! Starting the build's tools: the one place in xtask that spawns, with errors that name the command.
//!
//! Children stay in xtask's process group on purpose, so that Ctrl-C in a terminal stops them with
//! xtask; a child that outlives its deadline is killed and its pipes are abandoned rather than waited
//! for, so a grandchild that keeps them open cannot hang xtask.

use std::ffi::OsStr;
use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

/// How many lines of a failed command's stderr an error message carries.
const TAIL_LINES: usize = 25;

/// Returns a command for `program` with stdin closed: CI has no stdin, and no tool here may prompt.
#[expect(clippy::disallowed_methods, reason = "xtask runs the build's tools")]
pub(crate) fn command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    cmd.stdin(Stdio::null());
    cmd
}

/// Returns the command line of `cmd` as a shell would read it, plus its directory if it has one.
pub(crate) fn display(cmd: &Command) -> String {
    let quote = |word: &OsStr| {
        let word = word.to_string_lossy();
        let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:@+,%".contains(c);
        match !word.is_empty() && word.chars().all(plain) {
            true => word.into_owned(),
            false => format!("'{}'", word.replace('\'', r"'\''")),
        }
    };
    let words: Vec<String> =
        std::iter::once(cmd.get_program()).chain(cmd.get_args()).map(quote).collect();
    let dir = cmd.get_current_dir().map(|dir| format!(" (in {})", dir.display()));
    words.join(" ") + &dir.unwrap_or_default()
}

/// Runs `cmd` with its stdout and stderr going to ours; fails naming it unless it exits 0.
pub(crate) fn run_visible(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("cannot start `{}`", display(cmd)))?;
    if !status.success() {
        bail!("`{}` failed with {status}; its output is above", display(cmd));
    }
    Ok(())
}

/// Runs `cmd` with stderr going to ours (progress stays visible) and returns its stdout; fails
/// naming it unless it exits 0.
pub(crate) fn stdout_of(cmd: &mut Command) -> Result<String> {
    let out = cmd.stderr(Stdio::inherit()).output();
    let out = out.with_context(|| format!("cannot start `{}`", display(cmd)))?;
    if !out.status.success() {
        bail!("`{}` failed with {}; its stderr is above", display(cmd), out.status);
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{}` printed non-UTF-8", display(cmd)))
}

/// What a successful captured command printed.
#[derive(Debug)]
pub(crate) struct Captured {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Captured {
    /// Returns the first non-blank line of stdout, or of stderr when stdout has none.
    pub(crate) fn first_line(&self) -> &str {
        fn first(text: &str) -> Option<&str> {
            text.lines().map(str::trim).find(|line| !line.is_empty())
        }
        first(&self.stdout).or_else(|| first(&self.stderr)).unwrap_or("")
    }
}

/// Runs `cmd` with stdout and stderr captured and kills it after `timeout`.
///
/// Fails naming the command, its exit status and the tail of its stderr unless it exits 0.
pub(crate) fn run_captured(cmd: &mut Command, timeout: Duration) -> Result<Captured> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("cannot start `{}`", display(cmd)))?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());

    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(2);
    let status: ExitStatus = loop {
        if let Some(status) =
            child.try_wait().with_context(|| format!("cannot wait for `{}`", display(cmd)))?
        {
            break status;
        }
        if Instant::now() >= deadline {
            // An error here means it exited meanwhile; the wait below reports either way.
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "`{}` did not finish within {} s and was killed",
                display(cmd),
                timeout.as_secs()
            );
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    };

    // The child has exited; its pipes close unless a grandchild holds them, so wait a little only.
    let grace = Duration::from_secs(5);
    let stdout = stdout.recv_timeout(grace).unwrap_or_default();
    let stderr = stderr.recv_timeout(grace).unwrap_or_default();
    if !status.success() {
        bail!("`{}` failed with {status}{}", display(cmd), tail(&stderr, &stdout));
    }
    Ok(Captured { stdout, stderr })
}

/// Reads a pipe to its end on a thread of its own, so that neither pipe can fill up and block.
fn drain(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            // A read error leaves what was read so far, which is all a message can use.
            let _ = pipe.read_to_end(&mut bytes);
        }
        let _ = sender.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    receiver
}

/// Returns the last lines of `stderr` (of `stdout` when stderr is blank) for an error message.
fn tail(stderr: &str, stdout: &str) -> String {
    let (name, text) =
        if stderr.trim().is_empty() { ("stdout", stdout) } else { ("stderr", stderr) };
    if text.trim().is_empty() {
        return "; it printed nothing".to_owned();
    }
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    format!("; last lines of its {name}:\n    {}", lines[start..].join("\n    "))
}
