//! `harness doctor --prefix P [--run RUN_DIR [--broker SOCKET --cap-stdin [--claim]]] [--json]`,
//! parsed in `main.rs`: checks an install, a run directory and a broker before a launch relies on
//! them, one line per check on stdout as it is found: `ok NAME`, `ok NAME: what doctor did`, or
//! `FAIL NAME: reason`; with `--json`, one `harness_runner::DoctorCheck` object a line instead.
//! A run directory is checked with the functions the runner loads it with, so what the runner
//! would refuse with exit 2 fails here; the broker is left as it was unless `--claim` asks for
//! the runner's first calls, claim included.

use std::io::{BufRead as _, Read as _};
use std::path::Path;
use std::time::Duration;

use camino::Utf8PathBuf;
use harness_adapters::{InstallLayout, SchemaFiles};
use harness_bus::{Broker as _, BrokerConfig, BrokerError, Capability, UnixBroker};
use harness_bus::{MessageReadResult, StateResult};
use harness_runner::RunError;
use harness_tools::Verb;
use rustix::fs::Access;
use serde_json::json;

use crate::Failure;

/// How long one broker call may take, as the runner allows its own.
const BROKER_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of stdin read for the capability line, as the runner reads it.
const MAX_STDIN: u64 = 64 * 1024;
/// The Node major version Pi's launcher and the extensions need.
const NODE_MAJOR: &str = "24";
/// The most of a schema file read.
const MAX_SCHEMA: u64 = 1 << 20;
/// run.json's default `brokerRetries`, for a run.json that does not read.
const DEFAULT_RETRIES: u32 = 30;
/// The refusal of a broker that answers `state` only after a claim.
const NOT_CLAIMED: &str = "not-claimed";
/// What stands in for the capability wherever a broker's text would show it.
const REDACTED: &str = "[capability]";

/// What `harness doctor` was asked to check.
pub(crate) struct Request<'a> {
    /// The install prefix, absolute or relative to the current directory.
    pub(crate) prefix: &'a Path,
    /// A run directory whose run.json names the CLI and the bundle.
    pub(crate) run: Option<&'a Path>,
    /// A broker socket; the capability comes on stdin.
    pub(crate) broker: Option<&'a Path>,
    /// True if and only if doctor may claim the role (and release it) to check the runner's
    /// first calls; without it the broker gets `state` alone, which changes nothing.
    pub(crate) claim: bool,
    /// True if and only if each check is printed as a JSON object rather than a text line.
    pub(crate) json: bool,
}

/// The checks printed so far and how many failed; every check is printed as it is found, with
/// the capability, if any, blanked out of it.
struct Report {
    failed: usize,
    secret: Option<String>,
    json: bool,
}

impl Report {
    /// `text` without the capability, and on one line: a reason that holds a newline (a
    /// broker's text) stays on its check's line.
    fn clean(&self, text: &str) -> String {
        let text = match &self.secret {
            Some(secret) => text.replace(secret.as_str(), REDACTED),
            None => text.to_owned(),
        };
        text.replace(['\n', '\r'], " ")
    }

    /// Prints one check: `ok NAME`, `ok NAME: note`, `FAIL NAME: reason`, or its JSON object.
    fn print(&mut self, name: &str, ok: bool, reason: Option<&str>) {
        let name = self.clean(name);
        let reason = reason.map(|reason| self.clean(reason));
        if !ok {
            self.failed += 1;
        }
        if self.json {
            let check = harness_runner::DoctorCheck { name, ok, reason };
            // Strings and a bool always serialize; were they not to, a failed check is printed.
            let line = serde_json::to_string(&check).unwrap_or_else(|error| {
                self.failed += 1;
                json!({"name": "doctor --json", "ok": false, "reason": error.to_string()})
                    .to_string()
            });
            println!("{line}");
            return;
        }
        match (ok, reason) {
            (true, None) => println!("ok {name}"),
            (true, Some(note)) => println!("ok {name}: {note}"),
            (false, reason) => println!("FAIL {name}: {}", reason.unwrap_or_default()),
        }
    }

    /// Prints one check; returns true if and only if it passed.
    fn check(&mut self, name: &str, outcome: Result<(), String>) -> bool {
        match outcome {
            Ok(()) => {
                self.print(name, true, None);
                true
            }
            Err(reason) => {
                self.print(name, false, Some(&reason));
                false
            }
        }
    }

    /// Prints one check that passed with something to say; `outcome` is the note or the reason.
    fn noted(&mut self, name: &str, outcome: Result<String, String>) -> bool {
        match outcome {
            Ok(note) => {
                self.print(name, true, Some(&note));
                true
            }
            Err(reason) => self.check(name, Err(reason)),
        }
    }
}

pub(crate) fn run(request: &Request<'_>) -> Result<(), Failure> {
    // The capability is read before anything is printed, so a bad stdin is one clear error.
    let capability = match request.broker {
        Some(_) => Some(read_capability()?),
        None => None,
    };
    // Whatever a program's `--version` leaves running in a session of its own is reparented
    // here and killed before doctor exits, as the runner does (a failure only means it is not).
    let reaping = harness_runner::become_subreaper().is_ok();
    let result = checks(request, capability);
    if reaping {
        harness_runner::sweep_descendants();
    }
    result
}

fn checks(request: &Request<'_>, capability: Option<(Capability, String)>) -> Result<(), Failure> {
    let mut report = Report {
        failed: 0,
        secret: capability.as_ref().map(|(_, text)| text.clone()),
        json: request.json,
    };
    install(&mut report, request.prefix);
    node(&mut report);
    let run = request.run.and_then(|run| run_dir(&mut report, run));
    if let (Some(socket), Some((cap, _))) = (request.broker, &capability) {
        let broker = Probe {
            broker: UnixBroker::new(BrokerConfig {
                socket: socket.to_path_buf(),
                timeout: BROKER_TIMEOUT,
            }),
            cap,
            tries: run.as_ref().map_or(DEFAULT_RETRIES, |run| run.retries),
        };
        if request.claim {
            match run.as_ref().and_then(|run| run.id.as_deref()) {
                Some(run_id) => broker.claimed(&mut report, run_id),
                None => {
                    report.check(
                        "broker role.claim",
                        Err("not claimed: the run to claim comes from the bundle's manifest, \
                             and --run has no bundle that verified"
                            .to_owned()),
                    );
                }
            }
        } else {
            broker.unclaimed(&mut report);
        }
    }
    if report.failed == 0 {
        return Ok(());
    }
    Err(Failure::Failed(format!("{} check(s) failed", report.failed)))
}

/// Reads `{"cap": "..."}` and a newline from stdin with the runner's own reader, and keeps the
/// text too, only to blank it out of every line printed.
fn read_capability() -> Result<(Capability, String), Failure> {
    let mut line = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_STDIN)
        .read_until(b'\n', &mut line)
        .map_err(|_| Failure::Failed("the capability cannot be read from stdin".to_owned()))?;
    let cap = harness_runner::read_capability(&mut line.as_slice())
        .map_err(|error| Failure::Failed(error.to_string()))?;
    let text = serde_json::from_slice::<serde_json::Value>(&line)
        .ok()
        .and_then(|value| value.get("cap").and_then(serde_json::Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    Ok((cap, text))
}

/// Every file of the layout present, a regular file, readable (and executable for a binary),
/// every binary answering `--version` with its name and this release's version, and every
/// schema present and JSON. A relative prefix is taken from the current directory, as `cargo
/// xtask dist --prefix` takes it: the binaries' `--version` runs in `/`, where it would name
/// nothing.
fn install(report: &mut Report, prefix: &Path) {
    let absolute = std::path::absolute(prefix)
        .map_err(|error| format!("{prefix:?} cannot be made absolute: {error}"));
    let prefix = match absolute.and_then(|path| {
        Utf8PathBuf::from_path_buf(path).map_err(|path| format!("{path:?} is not UTF-8"))
    }) {
        Ok(prefix) => prefix,
        Err(reason) => {
            report.check("install prefix", Err(reason));
            return;
        }
    };
    let layout = InstallLayout::under(&prefix);
    // The build's own check, and its words: a bundle built on this prefix would be refused so.
    let whole = harness_bundle::check_install(&layout).map_err(|error| error.to_string());
    report.check("install prefix", whole);
    for (path, mode) in layout.files() {
        let shown = path.strip_prefix(&prefix).unwrap_or(&path).to_string();
        let binary = mode & 0o111 != 0;
        let present = report.check(&format!("file {shown}"), file(path.as_std_path(), binary));
        if binary && present {
            let name = path.file_name().unwrap_or_default();
            let expected = format!("{name} {}", env!("CARGO_PKG_VERSION"));
            let answered = version(path.as_std_path()).and_then(|printed| {
                let first = printed.lines().next().unwrap_or_default().trim();
                if first == expected {
                    Ok(())
                } else {
                    Err(format!("--version printed {first:?}, not {expected:?}"))
                }
            });
            report.check(&format!("version {shown}"), answered);
        }
    }
    for (path, _) in SchemaFiles::under(&prefix).files() {
        let shown = path.strip_prefix(&prefix).unwrap_or(&path).to_string();
        let parsed = file(path.as_std_path(), false).and_then(|()| schema(path.as_std_path()));
        report.check(&format!("schema {shown}"), parsed);
    }
}

fn file(path: &Path, binary: bool) -> Result<(), String> {
    let metadata =
        std::fs::metadata(path).map_err(|error| format!("{}: {error}", path.display()))?;
    if !metadata.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let (access, what) = if binary {
        (Access::READ_OK | Access::EXEC_OK, "readable and executable")
    } else {
        (Access::READ_OK, "readable")
    };
    rustix::fs::access(path, access)
        .map_err(|error| format!("{} is not {what} by this user: {error}", path.display()))
}

/// A schema file: at most [`MAX_SCHEMA`] bytes of one JSON object.
fn schema(path: &Path) -> Result<(), String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_SCHEMA + 1).read_to_end(&mut bytes))
        .map_err(|error| format!("{}: {error}", path.display()))?;
    if bytes.len() as u64 > MAX_SCHEMA {
        return Err(format!("{} is over {MAX_SCHEMA} bytes", path.display()));
    }
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err(format!("{} is JSON but not an object, as a schema is", path.display())),
        Err(error) => Err(format!("{} is not JSON: {error}", path.display())),
    }
}

/// `node --version` from the first Node on PATH (the one Pi's launcher and the adapters find):
/// `v24.…`.
fn node(report: &mut Report) {
    let outcome = version(Path::new("node")).and_then(|printed| {
        let printed = printed.trim();
        let major = printed.strip_prefix('v').and_then(|rest| rest.split('.').next());
        if major == Some(NODE_MAJOR) {
            Ok(())
        } else {
            Err(format!("node --version printed {printed:?}; Node {NODE_MAJOR} is needed"))
        }
    });
    report.check(&format!("node {NODE_MAJOR}"), outcome);
}

/// What the broker checks take from the run directory.
struct RunInfo {
    /// The run the bundle was built for, which the runner claims, when the bundle is there.
    id: Option<String>,
    /// run.json's `brokerRetries`.
    retries: u32,
}

/// The run directory checked as the runner loads it, with the runner's own functions, so what
/// it would refuse with exit 2 fails here: run.json (`read_run_file`), the bundle against
/// run.json's digest and the run's workspace against the bundle's (`SealedBundle::open`,
/// `check_workspace`), the CLI's `--version` against the manifest's `cliVersion`
/// (`check_cli_version`), and, when all of that passed, the whole load (`load_run`), so a check
/// the runner adds is not missed.
fn run_dir(report: &mut Report, dir: &Path) -> Option<RunInfo> {
    let (dir, file) = match harness_runner::read_run_file(dir) {
        Ok(parsed) => {
            report.check("run.json", Ok(()));
            parsed
        }
        Err(error) => {
            report.check("run.json", Err(format!("{error} (the runner would exit 2)")));
            return None;
        }
    };
    let printed = version(file.cli.as_std_path());
    let bundle = dir.join(&file.bundle);
    if !bundle.join("manifest.json").exists() {
        // No bundle yet: the CLI answering is all there is to check.
        report.check("cli --version", printed.map(|_| ()));
        return Some(RunInfo { id: None, retries: file.broker_retries });
    }
    let exit_2 = |error: harness_bundle::BundleError| format!("{error} (the runner would exit 2)");
    let seal = match harness_bundle::SealedBundle::open(bundle.as_std_path(), &file.bundle_digest) {
        Ok(seal) => {
            report.check("bundle", Ok(()));
            seal
        }
        Err(error) => {
            report.check("bundle", Err(exit_2(error)));
            report.check("cli --version", printed.map(|_| ()));
            return Some(RunInfo { id: None, retries: file.broker_retries });
        }
    };
    let id = serde_json::from_slice::<harness_runner::Manifest>(seal.manifest_bytes())
        .ok()
        .map(|manifest| manifest.run);
    let workspace =
        report.check("bundle workspace", seal.check_workspace(&file.workspace).map_err(exit_2));
    let cli = report.check(
        "cli --version",
        printed.and_then(|printed| {
            seal.check_cli_version(file.cli.as_std_path(), &printed).map_err(exit_2)
        }),
    );
    if workspace && cli {
        let loaded = harness_runner::load_run(dir.as_std_path())
            .map_err(|error| format!("{error} (the runner would exit {})", error.exit_code()));
        match loaded {
            Ok(run) => {
                report.check("run loads", Ok(()));
                // What a turn of this run may reach, as the runner builds its sandbox.
                let env = harness_runner::Environment::of_process();
                for grant in harness_runner::turn_grants(&run, &env) {
                    report.check(&format!("turn grant: {grant}"), Ok(()));
                }
            }
            Err(reason) => {
                report.check("run loads", Err(reason));
            }
        }
    }
    Some(RunInfo { id, retries: file.broker_retries })
}

/// The broker, with the capability the runner would hold.
struct Probe<'a> {
    broker: UnixBroker,
    cap: &'a Capability,
    /// run.json's `brokerRetries`, or its default when run.json does not read.
    tries: u32,
}

impl Probe<'_> {
    /// Without `--claim`: `state` alone, a query that changes nothing on the broker (docs/
    /// protocol.md). A result in the runner's shape passes; `not-claimed` passes too, noted, as
    /// it proves the broker reachable, speaking the protocol and taking the capability; any
    /// other refusal, no answer or a broken reply fails.
    fn unclaimed(&self, report: &mut Report) {
        let outcome = match self.broker.call(self.cap, Verb::State, &json!({"cap": 1})) {
            Ok(result) => state_shape(result).map(|()| {
                "answered in the runner's shape; nothing was claimed (--claim checks the claim \
                 and message.read)"
                    .to_owned()
            }),
            Err(BrokerError::Refused { code, .. }) if code.as_str() == NOT_CLAIMED => Ok(format!(
                "reachable: refused {NOT_CLAIMED} as state is before a claim; nothing was \
                 claimed (--claim checks the claim and message.read)"
            )),
            Err(error) => Err(unreachable_or_refused(error, self.tries)),
        };
        report.noted("broker state", outcome);
    }

    /// With `--claim`: the runner's first calls, as it makes them: `role.claim` with the
    /// bundle's run, then `state` and `message.read` answered in the shapes the runner parses,
    /// then `role.release`. `message.read` goes with `limit: 0` and no `after`: a broker that
    /// knows the mark-only form takes no message.
    fn claimed(&self, report: &mut Report, run_id: &str) {
        let claimed = match self.broker.call(self.cap, Verb::RoleClaim, &json!({"run": run_id})) {
            Ok(_) => Ok(format!("claimed the role for run {run_id:?} (released below)")),
            Err(error @ BrokerError::Refused { .. }) => Err(claim_refused(error)),
            Err(error) => Err(unreachable_or_refused(error, self.tries)),
        };
        if !report.noted("broker role.claim", claimed) {
            return;
        }
        let state = self
            .broker
            .call(self.cap, Verb::State, &json!({"cap": 1}))
            .map_err(|error| broker_error(&error))
            .and_then(state_shape);
        report.check("broker state", state);
        let read = self
            .broker
            .call(self.cap, Verb::MessageRead, &json!({"limit": 0}))
            .map_err(|error| broker_error(&error))
            .and_then(|result| {
                let parsed =
                    serde_json::from_value::<MessageReadResult>(result).map_err(|error| {
                        format!("the result is not {{\"message\": null or a message}} ({error})")
                    })?;
                match parsed.message {
                    None => Ok(()),
                    Some(message) => Err(format!(
                        "with limit 0 the broker returned message {:?}: it does not know the \
                         mark-only form, and may have taken that message",
                        message.id
                    )),
                }
            });
        report.check("broker message.read", read);
        let released = match self.broker.call(self.cap, Verb::RoleRelease, &json!({})) {
            Ok(_) => Ok(format!("released the role for run {run_id:?}")),
            Err(error) => Err(format!(
                "{}: the role may stay claimed until the broker frees it",
                broker_error(&error)
            )),
        };
        report.noted("broker role.release", released);
    }
}

/// `state`'s result read as the runner reads it.
fn state_shape(result: serde_json::Value) -> Result<(), String> {
    serde_json::from_value::<StateResult>(result).map(|_| ()).map_err(|error| {
        format!(
            "the result is not {{\"launch\": {{state, at, event}}, \"tasks\": {{open, total}}}} \
             ({error}); the runner would fail every turn with malformed-state"
        )
    })
}

/// A first call's failure, with what the runner does on it: a refusal by its code; anything else
/// (no connection, no answer in time, a broken reply) is what the runner retries `brokerRetries`
/// times in a row before it ends, with the exit and reason of its own error for that
/// (`RunError::BrokerUnreachable`), so the number named is the runner's.
fn unreachable_or_refused(error: BrokerError, tries: u32) -> String {
    if error.is_refusal() {
        return broker_error(&error);
    }
    let reason = broker_error(&error);
    let ending = RunError::BrokerUnreachable { operation: "role.claim", tries, source: error };
    format!(
        "{reason} (the runner would try {tries} times in a row (brokerRetries), then exit {}, {})",
        ending.exit_code(),
        ending.end_reason()
    )
}

/// A refused claim, with the runner's exit and reason on it (`RunError::ClaimRefused`).
fn claim_refused(error: BrokerError) -> String {
    let reason = broker_error(&error);
    let BrokerError::Refused { code, .. } = error else { return reason };
    let ending = RunError::ClaimRefused { code };
    format!(
        "{reason} (the runner would exit {}, {}; a session of this run may hold it)",
        ending.exit_code(),
        ending.end_reason()
    )
}

/// A broker error as a reason; a refusal by its code only, the broker's own message left out.
fn broker_error(error: &BrokerError) -> String {
    match error {
        BrokerError::Refused { code, .. } => format!("refused: {code}"),
        other => other.to_string(),
    }
}

/// `program --version` as the runner runs its CLI's (`harness_runner::program_version`: only
/// PATH in its environment, stdin closed, its process group killed when it ends, 10 s); what it
/// printed on stdout.
fn version(program: &Path) -> Result<String, String> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    harness_runner::program_version(program, path).map_err(|error| error.to_string())
}
