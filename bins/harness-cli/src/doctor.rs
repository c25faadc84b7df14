//! `harness doctor --prefix P [--run RUN_DIR [--broker SOCKET --cap-stdin]]`, parsed in
//! `main.rs`: checks an install, a run directory's CLI and a broker before a launch relies on
//! them, one line per check (`ok NAME` or `FAIL NAME: reason`) on stdout.

use std::io::{BufRead as _, Read as _};
use std::path::Path;
use std::time::Duration;

use camino::Utf8Path;
use harness_adapters::InstallLayout;
use harness_bus::{Broker as _, BrokerConfig, BrokerError, Capability, UnixBroker};
use harness_bus::{MessageReadResult, StateResult};
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
/// What stands in for the capability wherever a broker's text would show it.
const REDACTED: &str = "[capability]";

/// What `harness doctor` was asked to check.
pub(crate) struct Request<'a> {
    /// The install prefix.
    pub(crate) prefix: &'a Path,
    /// A run directory whose run.json names the CLI and the bundle.
    pub(crate) run: Option<&'a Path>,
    /// A broker socket; the capability comes on stdin.
    pub(crate) broker: Option<&'a Path>,
}

/// The lines printed so far and whether one failed; every line is printed as it is found, with
/// the capability, if any, blanked out of it.
struct Report {
    failed: usize,
    secret: Option<String>,
}

impl Report {
    fn line(&self, text: &str) {
        let text = match &self.secret {
            Some(secret) => text.replace(secret.as_str(), REDACTED),
            None => text.to_owned(),
        };
        // One check, one line: a reason that holds a newline (a broker's text) stays on it.
        println!("{}", text.replace(['\n', '\r'], " "));
    }

    fn check(&mut self, name: &str, outcome: Result<(), String>) -> bool {
        match outcome {
            Ok(()) => {
                self.line(&format!("ok {name}"));
                true
            }
            Err(reason) => {
                self.failed += 1;
                self.line(&format!("FAIL {name}: {reason}"));
                false
            }
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
    let mut report =
        Report { failed: 0, secret: capability.as_ref().map(|(_, text)| text.clone()) };
    install(&mut report, request.prefix);
    node(&mut report);
    let run_id = request.run.and_then(|run| run_dir(&mut report, run));
    if let (Some(socket), Some((cap, _))) = (request.broker, &capability) {
        match run_id {
            Some(run_id) => broker(&mut report, socket, cap, &run_id),
            None => {
                report.check(
                    "broker role.claim",
                    Err("no run to claim: --run names no bundle whose manifest gives the run"
                        .to_owned()),
                );
            }
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
/// and every binary answering `--version` with its name and this release's version.
fn install(report: &mut Report, prefix: &Path) {
    let Some(prefix) = Utf8Path::from_path(prefix) else {
        report.check("install prefix", Err(format!("{prefix:?} is not UTF-8")));
        return;
    };
    let layout = InstallLayout::under(prefix);
    // The build's own check, and its words: a bundle built on this prefix would be refused so.
    let whole = harness_bundle::check_install(&layout).map_err(|error| error.to_string());
    report.check("install prefix", whole);
    for (path, mode) in layout.files() {
        let shown = path.strip_prefix(prefix).unwrap_or(&path).to_string();
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

/// run.json read as the runner reads it, and the CLI it names answering `--version` with the
/// bundle manifest's `cliVersion`. Returns the run the bundle was built for, which the runner
/// claims, when the bundle is there.
fn run_dir(report: &mut Report, dir: &Path) -> Option<String> {
    // Read and checked as the runner reads and checks it (the same function), so what the
    // runner would refuse with exit 2 fails here.
    let parsed = harness_runner::read_run_file(dir).map_err(|error| error.to_string());
    let (dir, file) = match parsed {
        Ok(file) => {
            report.check("run.json", Ok(()));
            file
        }
        Err(reason) => {
            report.check("run.json", Err(reason));
            return None;
        }
    };
    let printed = version(file.cli.as_std_path());
    let bundle = dir.join(&file.bundle);
    let manifest = bundle.join("manifest.json");
    if !manifest.exists() {
        // No bundle yet: the CLI answering is all there is to check.
        report.check("cli --version", printed.map(|_| ()));
        return None;
    }
    let verified = harness_bundle::verify_bundle(&bundle, Some(&file.bundle_digest))
        .map_err(|error| error.to_string())
        .and_then(|verification| verification.describe().map_or(Ok(()), Err));
    report.check("bundle", verified);
    let parsed = std::fs::read(&manifest).map_err(|error| format!("{manifest}: {error}")).and_then(
        |bytes| {
            serde_json::from_slice::<serde_json::Value>(&bytes)
                .map_err(|error| format!("{manifest}: {error}"))
        },
    );
    let run_id = parsed.as_ref().ok().and_then(|value| value["run"].as_str()).map(str::to_owned);
    let recorded = parsed.and_then(|value| {
        value["cliVersion"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{manifest} records no cliVersion"))
    });
    let outcome = recorded.and_then(|expected| {
        let actual = printed?;
        let actual = actual.trim();
        if actual == expected {
            Ok(())
        } else {
            Err(format!(
                "{} --version printed {actual:?}; the bundle records cliVersion {expected:?}",
                file.cli
            ))
        }
    });
    report.check("cli --version", outcome);
    run_id
}

/// The runner's first calls, as it makes them: `role.claim` with the bundle's run, then `state`
/// and `message.read` answered in the shapes the runner parses, then `role.release`.
/// `message.read` goes with `limit: 0` and no `after`: a broker that knows the mark-only form
/// takes no message.
fn broker(report: &mut Report, socket: &Path, cap: &Capability, run_id: &str) {
    let broker =
        UnixBroker::new(BrokerConfig { socket: socket.to_path_buf(), timeout: BROKER_TIMEOUT });
    let claimed = broker.call(cap, Verb::RoleClaim, &json!({"run": run_id})).map(|_| ());
    let claimed = claimed.map_err(|error| {
        format!(
            "{} (the runner would exit 21; a session of this run may hold it)",
            broker_error(error)
        )
    });
    if !report.check("broker role.claim", claimed) {
        return;
    }
    let state = broker.call(cap, Verb::State, &json!({"cap": 1})).map_err(broker_error).and_then(
        |result| {
            serde_json::from_value::<StateResult>(result).map(|_| ()).map_err(|error| {
                format!(
                    "the result is not {{\"launch\": {{state, at, event}}, \"tasks\": {{open, \
                     total}}}} ({error}); the runner would fail every turn with malformed-state"
                )
            })
        },
    );
    report.check("broker state", state);
    let read = broker
        .call(cap, Verb::MessageRead, &json!({"limit": 0}))
        .map_err(broker_error)
        .and_then(|result| {
            let parsed = serde_json::from_value::<MessageReadResult>(result).map_err(|error| {
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
    let released = broker.call(cap, Verb::RoleRelease, &json!({})).map(|_| ());
    report.check("broker role.release", released.map_err(broker_error));
}

/// A broker error as a reason; a refusal by its code only, the broker's own message left out.
fn broker_error(error: BrokerError) -> String {
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
