//! Starting the build's tools: the one place in xtask that spawns, with errors that name the command.
//!
//! Children stay in xtask's process group on purpose, so that Ctrl-C in a terminal stops them with
//! xtask; a captured child that outlives its deadline is killed.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::process::{Command, Stdio};
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

/// Runs `cmd` with stdout and stderr captured and kills it after `timeout`.
///
/// Fails naming the command, its exit status and the tail of its stderr unless it exits 0.
/// The output goes to temporary files, not pipes, so that neither can fill up and block it, and a
/// grandchild that keeps them open cannot hang xtask.
pub(crate) fn run_captured(cmd: &mut Command, timeout: Duration) -> Result<Captured> {
    let files = (tempfile::tempfile()?, tempfile::tempfile()?);
    cmd.stdout(files.0.try_clone()?).stderr(files.1.try_clone()?);
    let mut child = cmd.spawn().with_context(|| format!("cannot start `{}`", display(cmd)))?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            // An error here means it exited meanwhile; either way it is gone.
            let _ = child.kill();
            let _ = child.wait();
            bail!("`{}` did not finish within {timeout:?} and was killed", display(cmd));
        }
        thread::sleep(Duration::from_millis(20));
    };
    let read = |mut file: &File| -> Result<String> {
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0))?;
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    let (stdout, stderr) = (read(&files.0)?, read(&files.1)?);
    if !status.success() {
        bail!("`{}` failed with {status}{}", display(cmd), tail(&stderr, &stdout));
    }
    Ok(Captured { stdout, stderr })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_deadlines_name_the_command() {
        let mut failing = command("/bin/sh");
        failing.args(["-c", "echo out; echo err >&2; exit 3"]);
        let error = run_captured(&mut failing, Duration::from_secs(30)).unwrap_err().to_string();
        assert!(error.contains("exit status: 3") && error.ends_with("stderr:\n    err"), "{error}");
        let mut slow = command("/bin/sleep");
        slow.arg("5");
        let error = run_captured(&mut slow, Duration::from_millis(100)).unwrap_err().to_string();
        assert!(error.starts_with("`/bin/sleep 5` did not finish") && error.contains("killed"));
    }
}
