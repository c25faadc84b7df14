//! A run directory with a real bundle (built by harness-bundle from the assistant fixture, its
//! install layout fake but for the adapter script, which each test chooses), a scripted broker,
//! and the runner binary started on it.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use harness_adapters::InstallLayout;
use harness_bundle::{BundleRequest, build_bundle};
use harness_testkit::{BrokerAnswer, RoleFixture, ScriptedBroker};
use serde_json::{Value, json};

/// The capability the tests hand the runner; it must never show up anywhere.
pub(crate) const CAP: &str = "cap-secret-7f3a9c41d2b8e605";

/// The test adapter: what it does is chosen by TEST_MODE (passed through run.json's passEnv).
pub(crate) const ADAPTER: &str = r#"
# The launch preflight's check mode, as the shipped adapters have it.
if [ "${MOSAIC_PREFLIGHT:-}" = 1 ]; then exec "$MOSAIC_CLI" --version; fi
case "${TEST_MODE:-ok}" in
  ok) printf done > "$MOSAIC_TURN_MARKER"; echo "answered: $(tail -n 1 "$MOSAIC_REQUEST")" ;;
  fail) echo "boom" >&2; exit 3 ;;
  nomarker) echo "no marker written" ;;
  hang) sh -c 'sleep 300; :' "${TEST_MARK:-hang}" & echo $! > "$MOSAIC_SESSION_DIR/bg.pid"; sleep 300 ;;
  pids) sleep 300 & echo "$! $$" > "$MOSAIC_SESSION_DIR/pids.tmp"; mv "$MOSAIC_SESSION_DIR/pids.tmp" "$MOSAIC_SESSION_DIR/pids"; sleep 300 ;;
  env) env > "$MOSAIC_SESSION_DIR/adapter.env"; printf done > "$MOSAIC_TURN_MARKER"; echo env ;;
  detach) setsid sh -c 'sleep 40; :' "$TEST_MARK" &
    printf done > "$MOSAIC_TURN_MARKER"; echo "answered: $(tail -n 1 "$MOSAIC_REQUEST")" ;;
  silent) printf done > "$MOSAIC_TURN_MARKER" ;;
  stderrflood) setsid sh -c 'sleep 40; :' "$TEST_MARK" > /dev/null < /dev/null &
    { echo HEAD-OF-STDERR; yes 0123456789abcdef | head -c 52428800; echo TAIL-OF-STDERR; } >&2
    printf done > "$MOSAIC_TURN_MARKER"; echo "answered: $(tail -n 1 "$MOSAIC_REQUEST")" ;;
  leave) setsid sh -c 'sleep 40; :' "$TEST_MARK" > /dev/null 2>&1 < /dev/null &
    printf done > "$MOSAIC_TURN_MARKER"; echo "answered: $(tail -n 1 "$MOSAIC_REQUEST")" ;;
  leavehang) setsid sh -c 'sleep 40; :' "$TEST_MARK" > /dev/null 2>&1 < /dev/null &
    echo started > "$MOSAIC_SESSION_DIR/started"; sleep 300 ;;
  fifo) rm -f "$MOSAIC_UNSLOP_LOG"; mkfifo "$MOSAIC_UNSLOP_LOG"
    printf done > "$MOSAIC_TURN_MARKER"; echo "answered: $(tail -n 1 "$MOSAIC_REQUEST")" ;;
  zero) rm -f "$MOSAIC_UNSLOP_LOG"; ln -s /dev/zero "$MOSAIC_UNSLOP_LOG"
    printf done > "$MOSAIC_TURN_MARKER"; echo "answered: $(tail -n 1 "$MOSAIC_REQUEST")" ;;
  ahead) next=$(printf %04d $((MOSAIC_TURN + 1)))
    ln -s "$MOSAIC_WORKSPACE/victim" "$MOSAIC_RUN/turns/$next.request"
    printf done > "$MOSAIC_TURN_MARKER"; echo "answered: $(tail -n 1 "$MOSAIC_REQUEST")" ;;
  memread)
    # Counts the lines of process $1's writable memory that hold TEST_MARK.
    scan() { grep ' rw.p ' "/proc/$1/maps" 2> /dev/null | while read -r range rest; do
      start=$((0x${range%-*} / 4096)); end=$((0x${range#*-} / 4096))
      dd if="/proc/$1/mem" bs=4096 skip=$start count=$((end - start)) 2> /dev/null
    done | grep -a -c "$TEST_MARK"; }
    if dd if=/proc/$PPID/mem bs=1 count=0 2> /dev/null; then echo open-ok; else echo open-denied; fi > "$MOSAIC_SESSION_DIR/memread"
    scan $PPID >> "$MOSAIC_SESSION_DIR/memread"
    # The control: the same scan finds TEST_MARK in this shell's own environment.
    scan $$ >> "$MOSAIC_SESSION_DIR/memread"
    printf done > "$MOSAIC_TURN_MARKER"; echo "answered: read" ;;
  slop) printf done > "$MOSAIC_TURN_MARKER"
    printf '%s\n' '{"ts":"2026-11-30T03:00:00.000Z","harness":"pi","event":"flagged","reply_chars":26,"reply_start":"Let us delve into the plan","findings":[{"id":"delve","source":"Kobak et al. 2024","match":"delve"}]}' >> "$MOSAIC_UNSLOP_LOG"
    echo "Let us delve into the plan." ;;
  probe) printf done > "$MOSAIC_TURN_MARKER"; . "$MOSAIC_WORKSPACE/probe.sh" ;;
esac
"#;

/// What the fixture's CLI prints for `--version`; the bundle records it as `cliVersion`.
pub(crate) const FAKE_CLI_VERSION: &str = "fake-cli 1.0";

/// Writes an executable CLI at `path` that prints [`FAKE_CLI_VERSION`] for `--version`.
pub(crate) fn fake_cli(path: &Path) -> PathBuf {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o755).open(path).unwrap();
    file.write_all(format!("#!/bin/sh\necho '{FAKE_CLI_VERSION}'\n").as_bytes()).unwrap();
    path.to_path_buf()
}

pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    pub(crate) run: PathBuf,
    pub(crate) broker: ScriptedBroker,
    pub(crate) workspace: PathBuf,
}

pub(crate) fn message(id: &str, kind: &str, text: &str) -> Value {
    json!({"message": {"id": id, "from": "acme-cos", "kind": kind, "sentAt": "2026-11-30T03:00:00Z", "text": text}})
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        Self::with_run_json(|_| {})
    }

    pub(crate) fn with_run_json(edit: impl FnOnce(&mut Value)) -> Fixture {
        Self::with_setup(|_| {}, edit)
    }

    /// A fixture whose resolved instance and run.json the test edits first.
    pub(crate) fn with_setup(
        edit_resolved: impl FnOnce(&mut harness_tools::ResolvedInstance),
        edit: impl FnOnce(&mut Value),
    ) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let layout = InstallLayout::under(&harness_testkit::utf8(root.join("prefix")).unwrap());
        // Every file of an install: the adapters are the fake adapter, the rest name themselves.
        for (path, _mode) in layout.files() {
            let text = match path.parent() == Some(&layout.adapters) {
                true => ADAPTER.to_owned(),
                false => format!("stand-in for {path}\n"),
            };
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
        }
        let workspace = root.join("ws");
        std::fs::create_dir_all(&workspace).unwrap();
        let run = root.join("run");
        std::fs::create_dir_all(&run).unwrap();
        let mut fixture = RoleFixture::as_is("assistant").unwrap();
        edit_resolved(&mut fixture.resolved);
        std::fs::create_dir_all(root.join("skills")).unwrap();
        let cli = fake_cli(&root.join("prefix/bin/fake-cli"));
        let built = build_bundle(&BundleRequest {
            contract: "# Role contract: assistant\n".to_owned(),
            tracker: None,
            cli_version: FAKE_CLI_VERSION.into(),
            skills_dir: harness_testkit::utf8(root.join("skills")).unwrap(),
            ..fixture.request(run.join("bundle"), workspace.clone(), layout).unwrap()
        })
        .unwrap();
        let broker = ScriptedBroker::start().unwrap();
        broker
            .answer("role.claim", BrokerAnswer::result(json!({"run": "run-1"})))
            .answer("role.release", BrokerAnswer::result(json!({})))
            .answer("message.read", BrokerAnswer::result(json!({"message": null})))
            .answer("message.send", BrokerAnswer::result(json!({"id": "reply-1"})))
            .answer(
                "state",
                BrokerAnswer::result(json!({
                    "launch": {"state": "running", "at": "2026-11-30T02:59:00Z", "event": "ev-7"},
                    "tasks": {"open": [{"ref": "web-1", "title": "Ship it"}], "total": 1}
                })),
            );
        let mut run_json = json!({
            "broker": broker.socket(),
            "workspace": workspace,
            "bundleDigest": built.digest,
            "cli": cli,
            "turnTimeout": 20,
            "brokerRetries": 3,
            "pollInterval": 0.02,
            "passEnv": ["TEST_MODE", "TEST_MARK"],
        });
        edit(&mut run_json);
        std::fs::write(run.join("run.json"), run_json.to_string()).unwrap();
        Fixture { _dir: dir, run, broker, workspace }
    }

    /// Starts the runner with `env` (and PATH) and writes `stdin`.
    pub(crate) fn spawn_with(&self, env: &[(&str, &str)], stdin: &str) -> Child {
        self.spawn_from(None, self.run.as_os_str(), env, stdin)
    }

    /// Starts the runner on `run_arg` (the run directory as the host spells it) in `cwd` (by
    /// default the test's own), with `env` (and PATH), and writes `stdin`.
    #[expect(clippy::disallowed_methods, reason = "the test runs the runner binary")]
    pub(crate) fn spawn_from(
        &self,
        cwd: Option<&Path>,
        run_arg: &std::ffi::OsStr,
        env: &[(&str, &str)],
        stdin: &str,
    ) -> Child {
        let mut command = Command::new(env!("CARGO_BIN_EXE_harness-runner"));
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        let mut child = command
            .arg(run_arg)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut pipe = child.stdin.take().unwrap();
        let _ = pipe.write_all(stdin.as_bytes());
        drop(pipe);
        child
    }

    pub(crate) fn spawn(&self, env: &[(&str, &str)]) -> Child {
        self.spawn_with(env, &format!("{{\"cap\": \"{CAP}\"}}\n"))
    }
}

/// Waits until `done` or `limit` passes; panics with `what` on timeout.
pub(crate) fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for the child to exit within `limit`, killing it (and failing) otherwise.
pub(crate) fn finish(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "the runner did not exit in {limit:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends SIGTERM to the runner.
pub(crate) fn terminate(child: &Child) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
}

/// Returns true if and only if a process with this pid is alive (not a zombie).
pub(crate) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| stat.split_whitespace().nth(2).is_none_or(|state| state != "Z"))
        .unwrap_or(false)
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every file under `dir`, recursively.
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// One call on the runner's tool socket: the reply's `ok` and `text`.
pub(crate) fn tool(run: &Path, name: &str, args: Value) -> (bool, String) {
    let mut stream = UnixStream::connect(run.join("tools.sock")).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.write_all(format!("{}\n", json!({"tool": name, "args": args})).as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    (reply["ok"] == true, reply["text"].as_str().unwrap().to_owned())
}

/// Starts the runner and waits for its first poll.
pub(crate) fn start(fx: &Fixture, env: &[(&str, &str)]) -> std::process::Child {
    let polls = fx.broker.calls_of("message.read").len();
    let child = fx.spawn(env);
    wait_until(Duration::from_secs(30), "the runner polling", || {
        fx.broker.calls_of("message.read").len() > polls
    });
    child
}

/// What a runner that has exited left in its run directory that it must not: the tool socket,
/// a private bind directory, a git bundle in `tmp/`, a process naming the run directory.
pub(crate) fn leftovers(run: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(run).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "tools.sock" || name.starts_with(".tools-sock-") {
            found.push(name);
        }
    }
    if let Ok(tmp) = std::fs::read_dir(run.join("tmp")) {
        found.extend(tmp.flatten().map(|entry| format!("tmp/{}", entry.file_name().display())));
    }
    let needle = run.display().to_string();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let pid = entry.file_name().to_string_lossy().into_owned();
        let live = pid.parse::<u32>().is_ok_and(alive);
        if live && String::from_utf8_lossy(&cmdline).contains(&needle) {
            found.push(format!("process {pid}: {}", String::from_utf8_lossy(&cmdline)));
        }
    }
    found
}

#[track_caller]
pub(crate) fn assert_clean(run: &Path) {
    let found = leftovers(run);
    assert!(found.is_empty(), "left behind: {found:?}");
}

/// The pid, as this test sees it, of the descendant of `runner` whose pid inside the turn's PID
/// namespace is `inner` (a turn writes the pids it sees; the test kills or watches them here).
/// Without a PID namespace the two are the same.
pub(crate) fn host_pid(runner: u32, inner: u32) -> u32 {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()
    };
    let descends = |mut pid: u32| {
        while let Some(parent) = parent_of(pid) {
            if parent == runner {
                return true;
            }
            if parent <= 1 {
                return false;
            }
            pid = parent;
        }
        false
    };
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let Some(line) = status.lines().find(|line| line.starts_with("NSpid:")) else { continue };
        let ids: Vec<u32> = line[6..].split_whitespace().filter_map(|id| id.parse().ok()).collect();
        if ids.last() == Some(&inner) && descends(pid) {
            return pid;
        }
    }
    panic!("no descendant of the runner {runner} has pid {inner} in its namespace")
}
