//! One harness turn: `/bin/sh ADAPTER` in its own process group, under the wall clock.
//!
//! This is the one place the runner starts a process. The adapter gets a cleared environment
//! plus the MOSAIC_* variables (docs/adapters.md) and run.json's `passEnv`; its stdout is the
//! answer, its stderr goes to `RUN/turns/NNNN.stderr` (0600). When the turn ends, however it
//! ends, the whole group is killed, so nothing it started is left behind.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::config::Run;
use crate::error::RunError;

/// The most of a turn's stdout kept; the RESULT is clipped far below it anyway.
const MAX_ANSWER_BYTES: u64 = 4 * 1024 * 1024;
const WAIT_STEP: Duration = Duration::from_millis(10);

/// How one turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TurnOutcome {
    /// The turn counted; its stdout.
    Answer(String),
    /// The turn did not count; why, for `The turn failed: <reason>`.
    Failed(String),
    /// A stop signal ended it.
    Stopped,
}

/// Paths of one turn's files.
#[derive(Debug)]
pub(crate) struct TurnFiles {
    pub(crate) number: u32,
    pub(crate) request: PathBuf,
    pub(crate) stderr: PathBuf,
    pub(crate) marker: PathBuf,
}

impl TurnFiles {
    pub(crate) fn new(run: &Run, number: u32) -> Self {
        let turns = run.dir.join("turns");
        Self {
            number,
            request: turns.join(format!("{number:04}.request")),
            stderr: turns.join(format!("{number:04}.stderr")),
            marker: run.dir.join("session").join(format!("turn-{number:04}.marker")),
        }
    }
}

/// Creates `path` exclusively with mode 0600 and writes `bytes`.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), RunError> {
    let mut file =
        OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(
            |error| RunError::BadRun(format!("cannot create {}: {error}", path.display())),
        )?;
    file.write_all(bytes)
        .map_err(|error| RunError::BadRun(format!("cannot write {}: {error}", path.display())))
}

/// The adapter's environment, built from nothing.
pub(crate) fn adapter_env(run: &Run, files: &TurnFiles, session_id: &str) -> Vec<(String, String)> {
    let path = |p: &Path| p.display().to_string();
    let manifest = &run.manifest;
    let mut env = vec![
        (
            "PATH".to_owned(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ),
        ("MOSAIC_BUNDLE".to_owned(), path(&run.bundle)),
        ("MOSAIC_RUN".to_owned(), path(&run.dir)),
        ("MOSAIC_WORKSPACE".to_owned(), path(&run.file.workspace)),
        ("MOSAIC_SESSION_DIR".to_owned(), path(&run.dir.join("session"))),
        ("MOSAIC_SESSION_ID".to_owned(), session_id.to_owned()),
        ("MOSAIC_TURN".to_owned(), files.number.to_string()),
        ("MOSAIC_PROVIDER".to_owned(), manifest.provider.clone()),
        ("MOSAIC_MODEL".to_owned(), manifest.model.clone()),
        ("MOSAIC_THINKING".to_owned(), manifest.thinking.clone()),
        ("MOSAIC_TOOLS".to_owned(), manifest.cli_tools.join(",")),
        ("MOSAIC_REQUEST".to_owned(), path(&files.request)),
        ("MOSAIC_TOOLS_SOCK".to_owned(), path(&run.dir.join("tools.sock"))),
        ("MOSAIC_TURN_MARKER".to_owned(), path(&files.marker)),
        ("MOSAIC_CLI".to_owned(), path(&run.file.cli)),
        // The CLI's temporary files stay inside its own domain (docs/runner.md, "Confinement").
        ("TMPDIR".to_owned(), path(&crate::confinement::session_tmp(run))),
    ];
    for (role, asset) in &manifest.assets {
        env.push((format!("MOSAIC_{}", screaming_snake(role)), path(&asset.path)));
    }
    for name in &run.file.pass_env {
        if let Ok(value) = std::env::var(name) {
            env.push((name.clone(), value));
        }
    }
    // After the harness's own variables, so nothing can move the log (spec, runner step 4).
    env.push(("MOSAIC_UNSLOP_LOG".to_owned(), path(&run.dir.join("unslop.jsonl"))));
    env
}

/// `unslopLists` → `UNSLOP_LISTS`.
fn screaming_snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() && !out.is_empty() {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Kills the process group `group`; `ESRCH` means it is gone already.
pub(crate) fn kill_group(group: u32) {
    if let Some(pid) = i32::try_from(group).ok().and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Kills the process group it holds when dropped, so the adapter never outlives its turn.
struct GroupGuard(u32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Runs one turn with the request text already written to `files.request`.
pub(crate) fn run_turn(
    run: &Run,
    files: &TurnFiles,
    session_id: &str,
    stop: &AtomicBool,
) -> Result<TurnOutcome, RunError> {
    let stderr =
        OpenOptions::new().write(true).create_new(true).mode(0o600).open(&files.stderr).map_err(
            |error| RunError::BadRun(format!("cannot create {}: {error}", files.stderr.display())),
        )?;
    let _ = std::fs::remove_file(&files.marker);
    #[expect(
        clippy::disallowed_methods,
        reason = "the runner is the one component that spawns processes: the adapter"
    )]
    let mut command = Command::new("/bin/sh");
    command
        .arg(&run.manifest.adapter)
        .env_clear()
        .envs(adapter_env(run, files, session_id))
        .current_dir(&run.file.workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .process_group(0);
    // Confinement: the domain is built here, entered in the child before exec.
    crate::confinement::turn_domain(run, files.number, &files.request)?.attach(&mut command);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            return Ok(TurnOutcome::Failed(format!("the adapter could not start: {error}")));
        }
    };
    let group = child.id();
    // Every return below kills the group already; the guard covers a panic on this thread
    // mid-turn, which unwinds past them (docs/reliability.md).
    let _group = GroupGuard(group);
    let reader = child.stdout.take().map(|mut stdout| {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = (&mut stdout).take(MAX_ANSWER_BYTES).read_to_end(&mut bytes);
            // Drain the rest so the adapter never blocks on a full pipe.
            let _ = std::io::copy(&mut stdout, &mut std::io::sink());
            let _ = sender.send(bytes);
        });
        receiver
    });
    let started = Instant::now();
    let timeout = run.turn_timeout();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(error) => {
                kill_group(group);
                let _ = child.wait();
                return Ok(TurnOutcome::Failed(format!(
                    "the adapter could not be waited for: {error}"
                )));
            }
        }
        if stop.load(Ordering::SeqCst) {
            break None;
        }
        if started.elapsed() >= timeout {
            kill_group(group);
            let _ = child.wait();
            reap(reader);
            return Ok(TurnOutcome::Failed(format!(
                "the turn ran past its wall clock of {} s and was stopped",
                timeout.as_secs()
            )));
        }
        std::thread::sleep(WAIT_STEP);
    };
    // Whatever the adapter left running in its group goes with it.
    kill_group(group);
    let Some(status) = status else {
        let _ = child.wait();
        reap(reader);
        return Ok(TurnOutcome::Stopped);
    };
    let answer = reap(reader);
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        return Ok(TurnOutcome::Failed(match (status.code(), status.signal()) {
            (Some(code), _) => format!("the adapter exited with status {code}"),
            (None, Some(signal)) => format!("the adapter was killed by signal {signal}"),
            _ => "the adapter ended abnormally".to_owned(),
        }));
    }
    if run.manifest.turn_marker && !files.marker.is_file() {
        return Ok(TurnOutcome::Failed(
            "the harness ended without writing the turn marker at agent_end".to_owned(),
        ));
    }
    Ok(TurnOutcome::Answer(answer))
}

/// Collects the answer. A process that left the group (setsid) could hold the pipe open for
/// ever; after the group is killed the runner waits a moment for the end of the pipe, no more.
fn reap(reader: Option<std::sync::mpsc::Receiver<Vec<u8>>>) -> String {
    let bytes = reader
        .and_then(|reader| reader.recv_timeout(Duration::from_secs(2)).ok())
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::screaming_snake;

    #[test]
    fn asset_roles_become_variable_names() {
        assert_eq!(screaming_snake("gate"), "GATE");
        assert_eq!(screaming_snake("unslopLists"), "UNSLOP_LISTS");
        assert_eq!(screaming_snake("mcpServer"), "MCP_SERVER");
    }
}
