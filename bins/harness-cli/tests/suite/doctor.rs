//! `harness doctor`: an install, a run directory's CLI and a broker, checked one line each.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use harness_adapters::{InstallLayout, SCHEMA_FILES, SchemaFiles};
use harness_testkit::{
    BrokerAnswer, ScriptedBroker, require_node, tools_bin_dir, workspace_binary,
};
use serde_json::json;

use super::bundle::{build, harness, setup};

/// The capability the broker tests send; it must appear nowhere in doctor's output.
const CAP: &str = "cap-SECRET-5b1e9d";

/// An install prefix made of the workspace's built binaries and its assets, hard-linked (or
/// copied across file systems) into `dir/prefix`, as `cargo xtask dist` lays them out.
fn good_prefix(dir: &Path) -> PathBuf {
    let prefix = dir.join("prefix");
    let bin_dir = workspace_binary("harness").parent().unwrap().to_path_buf();
    let source = InstallLayout::from_checkout(
        &harness_testkit::workspace_root(),
        &harness_testkit::utf8(&bin_dir).unwrap(),
    );
    let utf8_prefix = harness_testkit::utf8(&prefix).unwrap();
    let schemas = SchemaFiles::from_checkout(
        &harness_testkit::utf8(harness_testkit::workspace_root()).unwrap(),
    );
    let from = source.files().into_iter().chain(schemas.files());
    let to = InstallLayout::under(&utf8_prefix)
        .files()
        .into_iter()
        .chain(SchemaFiles::under(&utf8_prefix).files());
    for ((from, _), (to, _)) in from.zip(to) {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).unwrap();
        }
    }
    prefix
}

/// A directory holding an executable script `name` that prints `printed` for `--version`.
fn fake_program(dir: &Path, name: &str, printed: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o755).open(&path).unwrap();
    writeln!(file, "#!/bin/sh\necho '{printed}'").unwrap();
    path
}

/// `harness doctor ARGS` with PATH = `path_first`, Node 24's directory, /usr/bin, /bin, and
/// `stdin` on its stdin.
fn doctor(args: &[&str], path_first: Option<&Path>, stdin: &str) -> Output {
    doctor_in(Path::new("/"), args, path_first, stdin)
}

/// [`doctor`], run in the directory `cwd`.
#[expect(clippy::disallowed_methods, reason = "the test runs the harness binary")]
fn doctor_in(cwd: &Path, args: &[&str], path_first: Option<&Path>, stdin: &str) -> Output {
    let mut path = String::new();
    if let Some(first) = path_first {
        path.push_str(&format!("{}:", first.display()));
    }
    path.push_str(&format!("{}:/usr/bin:/bin", tools_bin_dir().display()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("doctor")
        .args(args)
        .env_clear()
        .env("PATH", path)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}stderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn stdout_lines(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stdout).lines().map(str::to_owned).collect()
}

fn good_state() -> serde_json::Value {
    json!({
        "launch": {"state": "running", "at": "2026-11-30T09:00:00Z", "event": "ev-41"},
        "tasks": {"open": [{"ref": "web-1", "title": "Ship"}], "total": 1}
    })
}

#[test]
fn a_good_install_passes_every_check() {
    let Some(_node) = require_node() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let output = doctor(&["--prefix", prefix.to_str().unwrap()], None, "");
    let context = text(&output);
    assert_eq!(output.status.code(), Some(0), "{context}");
    let lines = stdout_lines(&output);
    // One line for the prefix, one per file of the layout, one per binary's --version, one per
    // schema, one for Node.
    let files = InstallLayout::under(&harness_testkit::utf8(&prefix).unwrap()).files();
    let binaries = files.iter().filter(|(_, mode)| mode & 0o111 != 0).count();
    assert_eq!(lines.len(), 1 + files.len() + binaries + SCHEMA_FILES.len() + 1, "{context}");
    assert!(lines.iter().all(|line| line.starts_with("ok ")), "{context}");
    for name in [
        "ok install prefix",
        "ok file bin/harness-gate",
        "ok version bin/harness-runner",
        "ok schema share/harness/schemas/run.json",
        "ok schema share/harness/schemas/doctor-check.json",
        "ok node 24",
    ] {
        assert!(lines.iter().any(|line| line == name), "{name}: {context}");
    }
}

#[test]
fn a_missing_binary_a_missing_asset_and_a_binary_not_executable_fail_naming_each() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    std::fs::remove_file(prefix.join("bin/harness-mcp")).unwrap();
    std::fs::remove_file(prefix.join("share/harness/pi/extension.mjs")).unwrap();
    // A copy, so the workspace's own binary keeps its mode.
    let gate = prefix.join("bin/harness-gate");
    let bytes = std::fs::read(&gate).unwrap();
    std::fs::remove_file(&gate).unwrap();
    std::fs::write(&gate, bytes).unwrap();
    std::fs::set_permissions(&gate, std::fs::Permissions::from_mode(0o644)).unwrap();
    let output = doctor(&["--prefix", prefix.to_str().unwrap()], None, "");
    let context = text(&output);
    assert_eq!(output.status.code(), Some(1), "{context}");
    let lines = stdout_lines(&output);
    for name in [
        "FAIL file bin/harness-mcp: ",
        "FAIL file share/harness/pi/extension.mjs: ",
        "FAIL file bin/harness-gate: ",
    ] {
        assert!(lines.iter().any(|line| line.starts_with(name)), "{name}: {context}");
    }
    assert!(lines.iter().any(|line| line == "ok file bin/harness-runner"), "{context}");
    assert!(!lines.iter().any(|line| line.contains("version bin/harness-mcp")), "{context}");
    let whole = format!(
        "FAIL install prefix: install-invalid: {prefix:?} is not a harness install prefix: 2 of the "
    );
    assert!(lines.iter().any(|line| line.starts_with(&whole)), "{context}");
}

/// Issue 14, item 10: a directory that is no install at all (a checkout, `target/release`, a
/// typo) is named as such on the first line, with what installs one.
#[test]
fn a_directory_that_is_no_install_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("not-an-install");
    std::fs::create_dir(&prefix).unwrap();
    let output = doctor(&["--prefix", prefix.to_str().unwrap()], None, "");
    let context = text(&output);
    assert_eq!(output.status.code(), Some(1), "{context}");
    let lines = stdout_lines(&output);
    let all = InstallLayout::under(&harness_testkit::utf8(&prefix).unwrap()).files().len();
    let expected = format!(
        "FAIL install prefix: install-invalid: {prefix:?} is not a harness install prefix: {all} of the {all} files an install holds are missing ({:?} first); `cargo xtask dist --prefix {}` installs one",
        prefix.join("bin/harness-gate"),
        prefix.display()
    );
    assert_eq!(lines.first(), Some(&expected), "{context}");
}

#[test]
fn a_binary_of_another_release_and_the_wrong_node_fail() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    std::fs::remove_file(prefix.join("bin/harness-unslop")).unwrap();
    fake_program(&prefix.join("bin"), "harness-unslop", "harness-unslop 0.0.9");
    let old_node = dir.path().join("old-node");
    fake_program(&old_node, "node", "v20.20.2");
    let output = doctor(&["--prefix", prefix.to_str().unwrap()], Some(&old_node), "");
    let context = text(&output);
    assert_eq!(output.status.code(), Some(1), "{context}");
    let lines = stdout_lines(&output);
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("FAIL version bin/harness-unslop: ")
                && line.contains("0.0.9")),
        "{context}"
    );
    assert!(
        lines.iter().any(|line| line.starts_with("FAIL node 24: ") && line.contains("v20.20.2")),
        "{context}"
    );
}

/// A binary whose `--version` answers but leaves a process holding its stdout neither holds
/// doctor (the answer is taken when the binary exits) nor outlives it (doctor reaps what the
/// programs it runs leave, as the runner does).
#[test]
fn a_version_that_leaves_a_process_holding_stdout_neither_holds_nor_outlives_doctor() {
    let Some(_node) = require_node() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let mark = format!("harness-doctor-version-{}", std::process::id());
    let unslop = prefix.join("bin/harness-unslop");
    std::fs::remove_file(&unslop).unwrap();
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o755).open(&unslop).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    writeln!(
        file,
        "#!/bin/sh\necho 'harness-unslop {version}'\nsetsid sh -c 'sleep 40; :' {mark} &"
    )
    .unwrap();
    drop(file);
    let started = std::time::Instant::now();
    let output = doctor(&["--prefix", prefix.to_str().unwrap()], None, "");
    let took = started.elapsed();
    let left = harness_testkit::kill_marked(&mark);
    let context = text(&output);
    assert_eq!(output.status.code(), Some(0), "{context}");
    assert!(
        stdout_lines(&output).iter().any(|l| l == "ok version bin/harness-unslop"),
        "{context}"
    );
    assert!(took < std::time::Duration::from_secs(10), "doctor took {took:?}: {context}");
    assert!(left.is_empty(), "left running: {left:?}");
}

/// A run directory for a bundle built for the pi route, whose CLI prints `printed`.
fn run_dir(dir: &Path, printed: &str) -> PathBuf {
    let request = setup(dir, "pm", "fallback");
    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    let bundle = run.join("bundle");
    let built = build(&request, &bundle);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let digest = String::from_utf8_lossy(&built.stdout).trim().to_owned();
    let cli = fake_program(&dir.join("cli"), "pi", printed);
    let run_json = json!({
        "broker": dir.join("broker.sock"),
        "workspace": dir.join("ws"),
        "bundleDigest": digest,
        "cli": cli,
    });
    std::fs::write(run.join("run.json"), run_json.to_string()).unwrap();
    run
}

#[test]
fn the_cli_a_run_names_must_print_the_bundles_cli_version() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let good = run_dir(&dir.path().join("good"), "0.85.1");
    let output =
        doctor(&["--prefix", prefix.to_str().unwrap(), "--run", good.to_str().unwrap()], None, "");
    let context = text(&output);
    let lines = stdout_lines(&output);
    for name in
        ["ok run.json", "ok bundle", "ok bundle workspace", "ok cli --version", "ok run loads"]
    {
        assert!(lines.iter().any(|line| line == name), "{name}: {context}");
    }
    // The turn's grants, as the runner builds its sandbox: the workspace writable, the network
    // loopback only with the runner's egress.
    let run_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(good.join("run.json")).unwrap()).unwrap();
    let workspace = run_json["workspace"].as_str().unwrap();
    let grant = format!("ok turn grant: read+write {workspace}");
    assert!(lines.iter().any(|line| line == &grant), "{grant}: {context}");
    assert!(
        lines.iter().any(|line| line.starts_with("ok turn grant: network: loopback only")),
        "{context}"
    );
    let other = run_dir(&dir.path().join("other"), "0.84.0");
    let output =
        doctor(&["--prefix", prefix.to_str().unwrap(), "--run", other.to_str().unwrap()], None, "");
    let context = text(&output);
    assert_eq!(output.status.code(), Some(1), "{context}");
    assert!(
        stdout_lines(&output).iter().any(|line| line.starts_with("FAIL cli --version: ")
            && line.contains("0.84.0")
            && line.contains("0.85.1")),
        "{context}"
    );
}

/// run.json is checked as the runner checks it (`harness_runner::read_run_file`): what the
/// runner would refuse with exit 2 fails doctor's `run.json` line, naming the field.
#[test]
fn a_run_json_the_runner_would_refuse_fails_naming_why() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let run = run_dir(&dir.path().join("run-relative"), "0.85.1");
    let path = run.join("run.json");
    let good: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for (what, field, value, reason) in [
        ("a relative cli", "cli", json!("pi"), "cli \"pi\" is not absolute"),
        (
            "stateDir in the run",
            "stateDir",
            json!(run.join("state")),
            "is inside the run directory",
        ),
        ("turnTimeout a string", "turnTimeout", json!("9"), "turnTimeout: invalid type: string"),
    ] {
        let mut edited = good.clone();
        edited[field] = value;
        std::fs::write(&path, edited.to_string()).unwrap();
        let output = doctor(
            &["--prefix", prefix.to_str().unwrap(), "--run", run.to_str().unwrap()],
            None,
            "",
        );
        let context = text(&output);
        assert_eq!(output.status.code(), Some(1), "{what}: {context}");
        let failed = stdout_lines(&output)
            .into_iter()
            .any(|line| line.starts_with("FAIL run.json: ") && line.contains(reason));
        assert!(failed, "{what}: {context}");
    }
}

/// A broker that claims and releases the role as the runner asks.
fn claiming_broker() -> ScriptedBroker {
    let broker = ScriptedBroker::start().unwrap();
    broker.answer("role.claim", BrokerAnswer::result(json!({"run": "run-9"})));
    broker.answer("role.release", BrokerAnswer::result(json!({})));
    broker
}

/// `harness doctor --claim` with the run directory `run` (whose bundle names the run to claim)
/// and the broker, the capability on stdin.
fn broker_doctor(prefix: &Path, run: &Path, broker: &ScriptedBroker) -> Output {
    broker_doctor_with(prefix, run, broker.socket(), &["--claim"])
}

/// `harness doctor --prefix --run --broker --cap-stdin` and `extra`, the capability on stdin.
fn broker_doctor_with(prefix: &Path, run: &Path, socket: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "--prefix",
        prefix.to_str().unwrap(),
        "--run",
        run.to_str().unwrap(),
        "--broker",
        socket.to_str().unwrap(),
        "--cap-stdin",
    ];
    args.extend_from_slice(extra);
    doctor(&args, None, &format!("{{\"cap\": \"{CAP}\"}}\n"))
}

#[test]
fn a_broker_in_the_runners_shapes_passes_and_no_message_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let run = run_dir(&dir.path().join("r"), "0.85.1");
    let broker = claiming_broker();
    broker.answer("state", BrokerAnswer::result(good_state()));
    broker.answer("message.read", BrokerAnswer::result(json!({"message": null})));
    let output = broker_doctor(&prefix, &run, &broker);
    let context = text(&output);
    let lines = stdout_lines(&output);
    for name in [
        "ok broker role.claim: claimed the role for run \"run-9\" (released below)",
        "ok broker state",
        "ok broker message.read",
        "ok broker role.release: released the role for run \"run-9\"",
    ] {
        assert!(lines.iter().any(|line| line == name), "{name}: {context}");
    }
    assert!(!context.contains(CAP), "{context}");
    // The runner's first calls, in its order: the claim of the bundle's run first, the release
    // last.
    let calls: Vec<(String, serde_json::Value)> =
        broker.calls().into_iter().map(|call| (call.verb, call.args)).collect();
    let verbs: Vec<&str> = calls.iter().map(|(verb, _)| verb.as_str()).collect();
    assert_eq!(verbs, ["role.claim", "state", "message.read", "role.release"], "{calls:?}");
    assert_eq!(calls[0].1, json!({"run": "run-9"}));
    assert_eq!(calls[2].1, json!({"limit": 0}));
    assert!(broker.calls().iter().all(|call| call.cap == CAP));
}

/// A claim the broker refuses ends the broker checks there, naming the code: nothing is read.
#[test]
fn a_refused_claim_is_named_and_nothing_else_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let run = run_dir(&dir.path().join("r"), "0.85.1");
    let broker = ScriptedBroker::start().unwrap();
    broker.answer("role.claim", BrokerAnswer::refuse("role-held"));
    let output = broker_doctor(&prefix, &run, &broker);
    let context = text(&output);
    assert_eq!(output.status.code(), Some(1), "{context}");
    let failed = stdout_lines(&output).into_iter().any(|line| {
        line.starts_with(
            "FAIL broker role.claim: refused: role-held (the runner would exit 21, claim-refused",
        )
    });
    assert!(failed, "{context}");
    let verbs: Vec<String> = broker.calls().into_iter().map(|call| call.verb).collect();
    assert_eq!(verbs, ["role.claim"], "{context}");
}

#[test]
fn a_broker_answering_state_in_a_wrong_shape_fails_and_the_capability_stays_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let run = run_dir(&dir.path().join("r"), "0.85.1");
    let broker = claiming_broker();
    // The wrong shape carries the capability back, where a parse error would quote it.
    broker.answer(
        "state",
        BrokerAnswer::result(json!({"launch": CAP, "tasks": {"open": [], "total": 0}})),
    );
    broker.answer(
        "message.read",
        BrokerAnswer::result(json!({"message": {"id": "m-1", "from": "jo", "kind": "message",
            "sentAt": "2026-11-30T09:00:00Z", "text": "hi"}})),
    );
    let output = broker_doctor(&prefix, &run, &broker);
    let context = text(&output);
    assert_eq!(output.status.code(), Some(1), "{context}");
    let lines = stdout_lines(&output);
    assert!(
        lines.iter().any(|line| line.starts_with("FAIL broker state: ")
            && line.contains("malformed-state")),
        "{context}"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("FAIL broker message.read: ") && line.contains("m-1")),
        "{context}"
    );
    assert!(!context.contains(CAP), "the capability leaked: {context}");
}

#[test]
fn a_refusing_or_absent_broker_fails_naming_the_code() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let run = run_dir(&dir.path().join("r"), "0.85.1");
    let broker = claiming_broker();
    broker.answer("state", BrokerAnswer::refuse("cap-revoked"));
    let output = broker_doctor(&prefix, &run, &broker);
    let context = text(&output);
    assert_eq!(output.status.code(), Some(1), "{context}");
    let lines = stdout_lines(&output);
    assert!(
        lines.iter().any(|line| line == "FAIL broker state: refused: cap-revoked"),
        "{context}"
    );
    // The scripted broker refuses an unscripted verb with `unscripted`.
    assert!(
        lines.iter().any(|line| line == "FAIL broker message.read: refused: unscripted"),
        "{context}"
    );
    assert!(!context.contains(CAP), "{context}");
    // Released all the same: the claim went through.
    assert!(
        lines.iter().any(|line| line.starts_with("ok broker role.release: released")),
        "{context}"
    );
}

/// Issue 21: an unreachable broker is named with the exit the runner ends with on it, 23
/// (broker-unreachable), after run.json's brokerRetries tries; not 21, a refused claim's.
#[test]
fn an_unreachable_broker_names_the_runners_exit_23() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let run = run_dir(&dir.path().join("r"), "0.85.1");
    let gone = dir.path().join("gone.sock");
    for extra in [&["--claim"][..], &[]] {
        let output = broker_doctor_with(&prefix, &run, &gone, extra);
        let context = text(&output);
        assert_eq!(output.status.code(), Some(1), "{extra:?}: {context}");
        let lines = stdout_lines(&output);
        let name =
            if extra.is_empty() { "FAIL broker state: " } else { "FAIL broker role.claim: " };
        let unreachable = |line: &&String| line.starts_with(name) && line.contains("unreachable");
        let line = lines.iter().find(unreachable).unwrap_or_else(|| panic!("{extra:?}: {context}"));
        assert!(
            line.ends_with(
                "(the runner would try 30 times in a row (brokerRetries), then exit 23, \
                 broker-unreachable)"
            ),
            "{extra:?}: {context}"
        );
        assert!(!context.contains("exit 21"), "{extra:?}: {context}");
        assert_eq!(lines.iter().filter(|line| line.contains(" broker ")).count(), 1, "{context}");
    }
}

#[test]
fn usage_errors_exit_2_and_a_bad_capability_line_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("prefix");
    let prefix = prefix.to_str().unwrap();
    for args in [
        vec![],
        vec!["--prefix", prefix, "--broker", "/nonexistent.sock"],
        // The broker checks claim the run of --run's bundle, as the runner does.
        vec!["--prefix", prefix, "--broker", "/nonexistent.sock", "--cap-stdin"],
        vec!["--prefix", prefix, "--cap-stdin"],
        vec!["--prefix", prefix, "--cap", CAP],
    ] {
        let output = doctor(&args, None, "");
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
    }
    // A stdin that is not the runner's capability line: one error naming the shape, never the
    // line, and no check runs.
    let output = doctor(
        &["--prefix", prefix, "--run", prefix, "--broker", "/nonexistent.sock", "--cap-stdin"],
        None,
        "cap-without-json\n",
    );
    let context = text(&output);
    assert_eq!(output.status.code(), Some(1), "{context}");
    assert!(output.stdout.is_empty(), "{context}");
    assert!(context.contains("{\"cap\": \"...\"}"), "{context}");
    assert!(!context.contains("cap-without-json"), "{context}");
}

#[test]
fn help_says_message_read_goes_with_limit_0() {
    let output = harness(&["doctor", "--help"]);
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{help}");
    assert!(help.contains("{\"limit\": 0}") && help.contains("mark-only"), "{help}");
}

/// Issue 21: `--prefix prefix`, relative, is the prefix under the current directory, as `cargo
/// xtask dist --prefix` takes it; every binary's `--version` (run in `/`) answers.
#[test]
fn a_relative_prefix_is_taken_from_the_current_directory() {
    let Some(_node) = require_node() else { return };
    let dir = tempfile::tempdir().unwrap();
    good_prefix(dir.path());
    let output = doctor_in(dir.path(), &["--prefix", "prefix"], None, "");
    let context = text(&output);
    assert_eq!(output.status.code(), Some(0), "{context}");
    let lines = stdout_lines(&output);
    assert!(lines.iter().all(|line| line.starts_with("ok ")), "{context}");
    assert!(lines.iter().any(|line| line == "ok version bin/harness-runner"), "{context}");
    assert!(!context.contains("No such file"), "{context}");
}

/// `harness-runner RUN` with the capability on stdin and PATH as doctor gets it; its output.
#[expect(clippy::disallowed_methods, reason = "the test runs the runner binary")]
fn runner(run: &Path) -> Output {
    let mut child = Command::new(workspace_binary("harness-runner"))
        .arg(run)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", tools_bin_dir().display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{{\"cap\": \"{CAP}\"}}\n").as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Issue 21: a run.json whose workspace is not the bundle's, which the runner refuses with exit
/// 2 before it claims, fails doctor with the runner's own words (the seal's check_workspace),
/// and no later check of the run claims it passes.
#[test]
fn a_workspace_that_is_not_the_bundles_fails_as_the_runner_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let run = run_dir(&dir.path().join("r"), "0.85.1");
    let other = dir.path().join("other-ws");
    std::fs::create_dir(&other).unwrap();
    let path = run.join("run.json");
    let mut edited: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edited["workspace"] = json!(other);
    std::fs::write(&path, edited.to_string()).unwrap();
    let ran = runner(&run);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(2), "the runner: {stderr}");
    assert!(stderr.contains("workspace"), "the runner: {stderr}");
    let output =
        doctor(&["--prefix", prefix.to_str().unwrap(), "--run", run.to_str().unwrap()], None, "");
    let context = text(&output);
    assert_eq!(output.status.code(), Some(1), "{context}");
    let lines = stdout_lines(&output);
    let failed = lines.iter().any(|line| {
        line.starts_with("FAIL bundle workspace: ")
            && line.contains(other.to_str().unwrap())
            && line.ends_with("(the runner would exit 2)")
    });
    assert!(failed, "{context}");
    assert!(lines.iter().any(|line| line == "ok run.json"), "{context}");
    assert!(!lines.iter().any(|line| line.contains("run loads")), "{context}");
}

/// Issue 21: without --claim doctor changes nothing on the broker: it sends `state` alone (no
/// claim, no read, no release); `not-claimed` (a broker that answers state only after a claim)
/// passes with a note, a result in the runner's shape passes, and any other refusal fails.
#[test]
fn without_claim_only_state_is_sent_and_nothing_is_claimed() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let run = run_dir(&dir.path().join("r"), "0.85.1");
    for (answer, expected) in [
        (BrokerAnswer::refuse("not-claimed"), "ok broker state: reachable: refused not-claimed"),
        (BrokerAnswer::result(good_state()), "ok broker state: answered in the runner's shape"),
        (
            BrokerAnswer::refuse("capability-invalid"),
            "FAIL broker state: refused: capability-invalid",
        ),
        (BrokerAnswer::result(json!({"launch": 1})), "FAIL broker state: the result is not"),
    ] {
        let broker = claiming_broker();
        broker.answer("state", answer);
        broker.answer("message.read", BrokerAnswer::result(json!({"message": null})));
        let output = broker_doctor_with(&prefix, &run, broker.socket(), &[]);
        let context = text(&output);
        let lines = stdout_lines(&output);
        assert!(lines.iter().any(|line| line.starts_with(expected)), "{expected}: {context}");
        let ok = expected.starts_with("ok ");
        assert_eq!(output.status.code(), Some(if ok { 0 } else { 1 }), "{context}");
        if ok {
            assert!(lines.iter().any(|line| line.contains("nothing was claimed")), "{context}");
        }
        assert!(!context.contains("claimed the role"), "{context}");
        let verbs: Vec<String> = broker.calls().into_iter().map(|call| call.verb).collect();
        assert_eq!(verbs, ["state"], "{context}");
        assert!(!context.contains(CAP), "{context}");
    }
}

/// Issue 21: `--json` prints one object a check, {"name", "ok", "reason"} and nothing else, the
/// same checks in the same order as the text form, the capability blanked out of them too.
#[test]
fn json_prints_one_object_per_check() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    std::fs::remove_file(prefix.join("share/harness/unslop/lists.json")).unwrap();
    let run = run_dir(&dir.path().join("r"), "0.85.1");
    let broker = claiming_broker();
    // A refusal whose message holds the capability: it must not reach a reason.
    broker.answer("state", BrokerAnswer::result(json!({"launch": CAP})));
    broker.answer("message.read", BrokerAnswer::result(json!({"message": null})));
    let texted = broker_doctor(&prefix, &run, &broker);
    let broker = claiming_broker();
    broker.answer("state", BrokerAnswer::result(json!({"launch": CAP})));
    broker.answer("message.read", BrokerAnswer::result(json!({"message": null})));
    let output = broker_doctor_with(&prefix, &run, broker.socket(), &["--claim", "--json"]);
    let context = text(&output);
    assert_eq!(output.status.code(), Some(1), "{context}");
    assert!(!context.contains(CAP), "{context}");
    let text_lines = stdout_lines(&texted);
    let json_lines = stdout_lines(&output);
    assert_eq!(json_lines.len(), text_lines.len(), "{context}\n{}", text(&texted));
    for (line, texted) in json_lines.iter().zip(&text_lines) {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        let object = value.as_object().unwrap();
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["name", "ok", "reason"], "{line}");
        let (name, ok, reason) = (&value["name"], &value["ok"], &value["reason"]);
        let rebuilt = match (ok.as_bool().unwrap(), reason.as_str()) {
            (true, None) => format!("ok {}", name.as_str().unwrap()),
            (true, Some(note)) => format!("ok {}: {note}", name.as_str().unwrap()),
            (false, reason) => format!("FAIL {}: {}", name.as_str().unwrap(), reason.unwrap()),
        };
        assert_eq!(&rebuilt, texted, "{context}");
    }
    let failed: Vec<&str> = json_lines
        .iter()
        .filter(|line| line.contains("\"ok\":false"))
        .map(String::as_str)
        .collect();
    assert!(
        failed
            .iter()
            .any(|line| line.contains("\"name\":\"file share/harness/unslop/lists.json\"")),
        "{failed:?}"
    );
    assert!(failed.iter().any(|line| line.contains("\"name\":\"broker state\"")), "{failed:?}");
}

/// Issue 21: the schemas an install carries are checked: one missing and one that is not JSON
/// fail, each named.
#[test]
fn a_missing_or_broken_schema_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = good_prefix(dir.path());
    let schemas = prefix.join("share/harness/schemas");
    std::fs::remove_file(schemas.join("run.json")).unwrap();
    std::fs::remove_file(schemas.join("state-result.json")).unwrap();
    std::fs::write(schemas.join("state-result.json"), "{\"type\": ").unwrap();
    let output = doctor(&["--prefix", prefix.to_str().unwrap()], None, "");
    let context = text(&output);
    assert_eq!(output.status.code(), Some(1), "{context}");
    let lines = stdout_lines(&output);
    for (name, why) in [
        ("FAIL schema share/harness/schemas/run.json: ", "No such file"),
        ("FAIL schema share/harness/schemas/state-result.json: ", "is not JSON"),
    ] {
        assert!(
            lines.iter().any(|line| line.starts_with(name) && line.contains(why)),
            "{name}: {context}"
        );
    }
    assert!(
        lines.iter().any(|line| line == "ok schema share/harness/schemas/tools.json"),
        "{context}"
    );
    // A bundle built on that prefix is not refused: no session reads a schema.
    assert!(lines.iter().any(|line| line == "ok install prefix"), "{context}");
}
