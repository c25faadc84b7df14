//! One harness turn: `/bin/sh ADAPTER` under the supervisor (its own process group, the wall
//! clock, the stop flag).
//!
//! The adapter gets a cleared environment plus the MOSAIC_* variables (`harness_contract::AdapterEnv`) and
//! run.json's `passEnv`, both from the runner's one environment source; its stdout is the
//! answer, its stderr goes to `RUN/turns/NNNN.stderr` (0600). When the turn ends, however it
//! ends, the whole group is killed (and the turn loop then kills every descendant it left).

use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use harness_contract::{AdapterEnv, AssetRole, RunDir};

use crate::config::Run;
use crate::dirs::RunDirs;
use crate::env::Environment;
use crate::error::RunError;
use crate::supervise::{self, Ended, Spawn, StderrTo};

/// The most of a turn's stdout kept; the RESULT is clipped far below it anyway.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// How many numbers past the last turn the runner tries before it gives up on a turns/ the
/// session keeps filling ahead of it.
const MAX_SKIPPED_TURNS: u32 = 10_000;

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

/// One turn's files: their names in `turns/` and `session/` (harness-contract's layout), and
/// their paths for the adapter's environment.
#[derive(Debug)]
pub(crate) struct TurnFiles {
    pub(crate) number: u32,
    pub(crate) layout: harness_contract::TurnFiles,
}

impl TurnFiles {
    fn new(run: &Run, number: u32) -> Self {
        Self { number, layout: RunDir::new(&run.dir).turn(number) }
    }

    /// Takes the first number from `first` on whose request file can be created: a
    /// `turns/NNNN.request` the session made ahead of the runner (or a link there) is skipped,
    /// never written through. The request is written with `text`.
    pub(crate) fn claim(
        run: &Run,
        dirs: &RunDirs,
        first: u32,
        text: &[u8],
    ) -> Result<Self, RunError> {
        Self::first_free(run, dirs, first, |files| {
            dirs.turns.write_new(&files.layout.request_name(), text)?;
            Ok(!dirs.turns.exists(&files.layout.stderr_name()))
        })
    }

    /// A turn that fails before its request: takes the first number from `first` on whose
    /// stderr file can be created, and writes `reason` there.
    pub(crate) fn claim_failed(
        run: &Run,
        dirs: &RunDirs,
        first: u32,
        reason: &[u8],
    ) -> Result<Self, RunError> {
        Self::first_free(run, dirs, first, |files| {
            if dirs.turns.exists(&files.layout.request_name()) {
                return Ok(false);
            }
            dirs.turns.write_new(&files.layout.stderr_name(), reason)?;
            Ok(true)
        })
    }

    /// Tries `take` on each number from `first` on until it takes one; a file already there
    /// (`AlreadyExists`) or `Ok(false)` moves on to the next number.
    fn first_free(
        run: &Run,
        dirs: &RunDirs,
        first: u32,
        mut take: impl FnMut(&Self) -> Result<bool, RunError>,
    ) -> Result<Self, RunError> {
        let last = first.saturating_add(MAX_SKIPPED_TURNS);
        for number in first..=last {
            let files = Self::new(run, number);
            match take(&files) {
                Ok(true) => return Ok(files),
                Ok(false) => {}
                Err(RunError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(error),
            }
            tracing::warn!(
                turn = number,
                "turn {number:04} is taken in turns/ by something the runner did not write; it \
                 takes the next number"
            );
        }
        Err(RunError::invalid(
            dirs.turns.path(),
            format!("turns {first} to {last} are all taken by files the runner did not write"),
        ))
    }
}

/// The adapter's environment, built from nothing.
pub(crate) fn adapter_env(
    run: &Run,
    files: &TurnFiles,
    session_id: &str,
    env: &Environment,
) -> Vec<(OsString, OsString)> {
    let path = |p: &Path| p.as_os_str().to_owned();
    let manifest = &run.manifest;
    let layout = RunDir::new(&run.dir);
    let var = |name: AdapterEnv| OsString::from(name.name());
    let mut out: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), env.path()),
        (var(AdapterEnv::Bundle), path(&run.bundle)),
        (var(AdapterEnv::Run), path(&run.dir)),
        (var(AdapterEnv::Workspace), path(run.file.workspace.as_std_path())),
        (var(AdapterEnv::SessionDir), path(&layout.session())),
        (var(AdapterEnv::SessionId), session_id.into()),
        (var(AdapterEnv::Turn), files.number.to_string().into()),
        (var(AdapterEnv::Provider), manifest.provider.clone().into()),
        (var(AdapterEnv::Model), manifest.model.clone().into()),
        (var(AdapterEnv::Thinking), manifest.thinking.clone().into()),
        (var(AdapterEnv::Tools), manifest.cli_tools.join(",").into()),
        (var(AdapterEnv::Request), path(&files.layout.request())),
        (var(AdapterEnv::ToolsSock), path(&layout.tools_sock())),
        (var(AdapterEnv::TurnMarker), path(&files.layout.marker())),
        (var(AdapterEnv::Cli), path(run.file.cli.as_std_path())),
        // The CLI's temporary files stay inside its own domain (docs/runner.md, "Confinement").
        ("TMPDIR".into(), path(&layout.session_tmp())),
    ];
    // Every asset role the contract knows reaches the adapter by its variable; a key it does not
    // know names nothing any adapter reads.
    for (key, asset) in &manifest.assets {
        if let Some(role) = AssetRole::from_key(key) {
            out.push((role.env_name().into(), path(asset.path.as_std_path())));
        }
    }
    for name in &run.file.pass_env {
        if let Some(value) = env.get(name) {
            out.push((name.into(), value.to_owned()));
        }
    }
    // After the harness's own variables, so nothing can move the log (spec, runner step 4).
    out.push((var(AdapterEnv::UnslopLog), path(&layout.unslop_log())));
    out
}

/// What a turn needs besides its files.
#[derive(Debug)]
pub(crate) struct TurnContext<'a> {
    pub(crate) run: &'a Run,
    pub(crate) dirs: &'a RunDirs,
    pub(crate) session_id: &'a str,
    pub(crate) env: &'a Environment,
    pub(crate) stop: &'a AtomicBool,
}

/// Runs one turn with the request text already written to `files.request`.
pub(crate) fn run_turn(turn: &TurnContext<'_>, files: &TurnFiles) -> Result<TurnOutcome, RunError> {
    let (run, dirs) = (turn.run, turn.dirs);
    let stderr = match dirs.turns.create(&files.layout.stderr_name()) {
        Ok(stderr) => stderr,
        Err(error) => return Ok(TurnOutcome::Failed(format!("the turn could not start: {error}"))),
    };
    let marker = files.layout.marker_name();
    if let Err(error) = dirs.session.remove(&marker) {
        return Ok(TurnOutcome::Failed(format!("the turn could not start: {error}")));
    }
    // What the domain's rules must find in place; a link the session put there fails this turn,
    // with the reason, and is never followed.
    if let Err(error) = crate::confinement::prepare_paths(dirs) {
        return Ok(TurnOutcome::Failed(format!("the turn could not start: {error}")));
    }
    // Confinement: the domain is built here, in the runner, and entered in the child between
    // fork and exec (docs/runner.md, "Confinement").
    let request = files.layout.request();
    let domain =
        crate::confinement::turn_domain(run, dirs, files.number, Some(&request), turn.env)?;
    // The egress variables replace any of the same name the host passed.
    let egress = domain.egress_env();
    let mut env = adapter_env(run, files, turn.session_id, turn.env);
    env.retain(|(name, _)| !egress.iter().any(|(egress, _)| egress == name));
    env.extend(egress);
    let outcome = supervise::run(Spawn {
        program: Path::new("/bin/sh"),
        args: vec![run.manifest.adapter.as_os_str().to_owned()],
        env,
        cwd: run.file.workspace.as_std_path(),
        stdout: crate::supervise::StdoutTo::Thread(MAX_ANSWER_BYTES),
        stderr: StderrTo::File(stderr),
        deadline: run.turn_timeout(),
        stop: Some(turn.stop),
        pre_exec: Some(&domain),
    });
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => {
            return Ok(TurnOutcome::Failed(format!("the adapter could not start: {error}")));
        }
    };
    if outcome.ended == Ended::Stopped {
        return Ok(TurnOutcome::Stopped);
    }
    if outcome.ended == Ended::TimedOut {
        return Ok(TurnOutcome::Failed(outcome.ended.describe("the turn", run.turn_timeout())));
    }
    if !outcome.success() {
        return Ok(TurnOutcome::Failed(outcome.ended.describe("the adapter", run.turn_timeout())));
    }
    if run.manifest.turn_marker
        && dirs.session.file_type(&marker) != Some(rustix::fs::FileType::RegularFile)
    {
        return Ok(TurnOutcome::Failed(
            "the harness ended without writing the turn marker at agent_end".to_owned(),
        ));
    }
    let answer = String::from_utf8_lossy(&outcome.stdout).trim_end().to_owned();
    if answer.trim().is_empty() {
        // A turn that counted and printed nothing: the sender is told, never sent an empty text.
        return Ok(TurnOutcome::Failed("the adapter printed no answer".to_owned()));
    }
    Ok(TurnOutcome::Answer(answer))
}
