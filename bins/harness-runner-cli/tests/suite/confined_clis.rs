//! Confinement with the real CLIs (issue 16, item 4): the gate is replaced by one that allows
//! everything (exit 0, and for Claude Code an explicit `allow` decision, so neither the gate nor
//! Claude Code's own permission check stops anything), and each file tool of the CLI, through
//! the runner, tries the secret beside the workspace and the run directory. With confinement on
//! (the default) nothing from outside the workspace reaches the model and nothing is written
//! outside it, while the workspace, the typed tools over the tool socket, the unslop hooks and
//! the turn marker still work. The same session with `confine: "off"` reads the secret, so the
//! refusal is the kernel's.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harness_testkit::{
    Cli, CliPaths, RecordedRequest, Reply, SESSION_CAP, SESSION_SECRET, SESSION_SLOP,
    SessionOptions, SessionScenario, ToolResult, require_cli, workspace_binary,
};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(180);
const README: &str = "# The sample project";

/// A gate that allows every call: exit 0, with Claude Code's explicit allow decision on stdout
/// (Pi's extension ignores the gate's stdout).
fn allow_all_gate(dir: &Path) -> PathBuf {
    let path = dir.join("allow-all-gate");
    let decision = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"stand-in gate"}}"#;
    std::fs::write(
        &path,
        format!("#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' '{decision}'\nexit 0\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

pub(crate) fn bin_dir() -> PathBuf {
    let _ = (workspace_binary("harness-mcp"), workspace_binary("harness-unslop"));
    workspace_binary("harness-gate").parent().unwrap().to_path_buf()
}

pub(crate) struct Session {
    pub(crate) result: String,
    pub(crate) calls: Vec<RecordedRequest>,
    pub(crate) stderr: String,
    pub(crate) scenario: SessionScenario,
    _dir: tempfile::TempDir,
}

impl Session {
    pub(crate) fn tool_result(&self, id: &str) -> ToolResult {
        self.calls
            .iter()
            .flat_map(|call| call.tool_results())
            .find(|result| result.tool_use_id == id)
            .unwrap_or_else(|| panic!("no result for {id}; runner stderr: {}", self.stderr))
    }
}

/// One message ("Go") through the runner with the allow-all gate; `replies` scripts the model.
pub(crate) fn allow_all_session(
    cli: &CliPaths,
    prepare: impl FnOnce(&mut SessionOptions),
    replies: impl FnOnce(&SessionScenario) -> Vec<Reply>,
    before_message: impl FnOnce(&SessionScenario),
) -> Session {
    let dir = tempfile::tempdir().unwrap();
    let mut options = SessionOptions::from_checkout(&bin_dir()).unwrap();
    options.layout.gate = harness_testkit::utf8(allow_all_gate(dir.path())).unwrap();
    prepare(&mut options);
    let scenario = SessionScenario::with_options(cli, options).unwrap();
    scenario.model().push_replies(replies(&scenario));
    let runner = PathBuf::from(env!("CARGO_BIN_EXE_harness-runner"));
    let mut child = scenario.spawn_runner(&runner).unwrap();
    let start = Instant::now();
    while scenario.broker().calls_of("message.read").is_empty() {
        assert!(start.elapsed() < LIMIT && child.try_wait().unwrap().is_none(), "no poll");
        std::thread::sleep(Duration::from_millis(20));
    }
    before_message(&scenario);
    scenario.send_message("m1", "acme-cos", "Go");
    while scenario.broker().calls_of("message.send").is_empty() {
        if start.elapsed() > LIMIT || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!("no RESULT: {}", String::from_utf8_lossy(&output.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let result =
        scenario.broker().calls_of("message.send")[0].args["text"].as_str().unwrap().to_owned();
    let calls = scenario.model().messages_calls();
    Session { result, calls, stderr, scenario, _dir: dir }
}

fn confine_off(options: &mut SessionOptions) {
    options.run_json.insert("confine".to_owned(), json!("off"));
}

/// Pi's attempts: every file tool and bash at the secret and the run directory, then the
/// workspace, a typed tool, and a reply full of slop.
fn pi_replies(s: &SessionScenario) -> Vec<Reply> {
    let outside = s.root().canonicalize().unwrap();
    let secret = s.secret();
    let run = s.run_dir();
    let bash = format!(
        "cat '{}'; ls '{}'; echo planted > '{}/bash.txt'; cat '{}/run.json'; ls /tmp",
        secret.display(),
        outside.display(),
        outside.display(),
        run.display()
    );
    vec![
        Reply::tool_use("t_read", "read", json!({"path": secret})),
        Reply::tool_use("t_ls", "ls", json!({"path": outside})),
        Reply::tool_use("t_find", "find", json!({"pattern": "*.txt", "path": outside})),
        Reply::tool_use("t_grep", "grep", json!({"pattern": "founder", "path": outside})),
        Reply::tool_use(
            "t_write",
            "write",
            json!({"path": outside.join("planted.txt"), "content": "planted"}),
        ),
        Reply::tool_use("t_bash", "bash", json!({"command": bash})),
        Reply::tool_use("t_readme", "read", json!({"path": s.workspace().join("README.md")})),
        Reply::tool_use(
            "t_made",
            "write",
            json!({"path": s.workspace().join("made.txt"), "content": "made"}),
        ),
        Reply::tool_use("t_tasks", "list_tasks", json!({})),
        Reply::text(SESSION_SLOP),
    ]
}

fn pi_options(options: &mut SessionOptions) {
    options.limits =
        Some(["read", "grep", "find", "ls", "write", "bash"].map(str::to_owned).to_vec());
}

fn tasks(s: &SessionScenario) {
    s.broker().answer(
        "tasks",
        harness_testkit::BrokerAnswer::result(json!({"tasks": [
            {"ref": "web-1", "title": "Ship the login page"}], "total": 1})),
    );
}

/// Nothing of the secret, the outside directory's listing or run.json reached the model.
#[track_caller]
fn assert_nothing_leaked(session: &Session, ids: &[&str]) {
    for id in ids {
        let result = session.tool_result(id);
        for leak in [SESSION_SECRET, "\"turnTimeout\"", "runner.lock"] {
            assert!(!result.text.contains(leak), "{id} leaked {leak:?}: {result:?}");
        }
        // A listing names the secret's file; a refusal names the path the model asked for.
        let listed = result.text.lines().any(|line| {
            let refusal = ["denied", "EACCES", "ermission"].iter().any(|word| line.contains(word));
            line.trim() == "workspace" || (line.contains("secret.txt") && !refusal)
        });
        assert!(!listed, "{id} listed the directory outside: {result:?}");
    }
    for call in &session.calls {
        assert!(!call.raw_body.contains(SESSION_SECRET), "the secret reached the model");
        assert!(!call.raw_body.contains(SESSION_CAP), "the capability reached the model");
    }
}

/// The workspace, the typed tool, the unslop hooks and the turn marker all worked.
#[track_caller]
fn assert_session_works(session: &Session, readme: &str, tasks_id: &str) {
    let readme = session.tool_result(readme);
    assert!(!readme.is_error && readme.text.contains(README), "{readme:?}");
    let listed = session.tool_result(tasks_id);
    assert!(!listed.is_error && listed.text.contains("web-1"), "{listed:?}");
    assert_eq!(session.scenario.broker().calls_of("tasks").len(), 1);
    // The RESULT is the answer (Pi's turn counted only with its marker) and carries the unslop
    // note the hook's log produced.
    assert!(
        session.result.starts_with(&format!("{SESSION_SLOP}\n\nunslop: 1 reply flagged")),
        "{:?}\n{}",
        session.result,
        session.stderr
    );
    assert!(session.stderr.contains("turn 1 confinement: Landlock ABI"), "{}", session.stderr);
}

#[test]
fn pi_with_an_allow_all_gate_gets_nothing_from_outside_its_workspace() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let session = allow_all_session(&pi, pi_options, pi_replies, tasks);
    let outside = session.scenario.root().canonicalize().unwrap();
    assert_nothing_leaked(&session, &["t_read", "t_ls", "t_find", "t_grep", "t_bash"]);
    assert!(!outside.join("planted.txt").exists(), "Pi's write wrote outside the workspace");
    assert!(!outside.join("bash.txt").exists(), "bash wrote outside the workspace");
    assert!(session.tool_result("t_write").is_error);
    assert_eq!(
        std::fs::read_to_string(session.scenario.workspace().join("made.txt")).unwrap(),
        "made"
    );
    assert_session_works(&session, "t_readme", "t_tasks");
}

#[test]
fn pi_with_an_allow_all_gate_and_confine_off_reads_the_secret() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let session = allow_all_session(
        &pi,
        |options| {
            pi_options(options);
            confine_off(options);
        },
        pi_replies,
        tasks,
    );
    let read = session.tool_result("t_read");
    assert!(read.text.contains(SESSION_SECRET), "the control must read the secret: {read:?}");
    assert!(session.tool_result("t_ls").text.contains("secret.txt"));
    // Pi's find runs fd (setup's fd 10.5 knows the --no-require-git Pi passes): unconfined it
    // lists the secret, so its refusal inside the domain is the kernel's.
    let find = session.tool_result("t_find");
    assert!(find.text.contains("secret.txt"), "the control must find the secret: {find:?}");
    assert!(session.scenario.root().join("planted.txt").exists());
}

/// Claude Code's own `--restricted` refuses a path outside the working directory (links
/// resolved) before the kernel sees it. To show the second line holds when that first line
/// fails too, these sessions run a copy of the adapter without `--restricted`.
fn claude_unrestricted(options: &mut SessionOptions, dir: &Path) {
    let adapters = dir.join("adapters");
    std::fs::create_dir_all(&adapters).unwrap();
    for name in ["pi.sh", "claude-code.sh"] {
        let text = std::fs::read_to_string(options.layout.adapters.join(name)).unwrap();
        assert!(name == "pi.sh" || text.contains("--restricted "), "the adapter changed");
        std::fs::write(adapters.join(name), text.replace("--restricted ", "")).unwrap();
    }
    options.layout.adapters = harness_testkit::utf8(adapters).unwrap();
}

fn claude_replies(s: &SessionScenario) -> Vec<Reply> {
    let outside = s.root().canonicalize().unwrap();
    vec![
        Reply::tool_use("t_read", "Read", json!({"file_path": s.secret()})),
        Reply::tool_use("t_glob", "Glob", json!({"pattern": "**/*.txt", "path": outside})),
        Reply::tool_use(
            "t_grep",
            "Grep",
            json!({"pattern": "founder", "path": outside, "output_mode": "content"}),
        ),
        Reply::tool_use("t_run", "Read", json!({"file_path": s.run_dir().join("run.json")})),
        Reply::tool_use(
            "t_write",
            "Write",
            json!({"file_path": outside.join("planted.txt"), "content": "planted"}),
        ),
        Reply::tool_use("t_readme", "Read", json!({"file_path": s.workspace().join("README.md")})),
        Reply::tool_use("t_tasks", "mcp__mosaic__list_tasks", json!({})),
        Reply::text(SESSION_SLOP),
    ]
}

#[test]
fn claude_code_with_an_allow_all_gate_gets_nothing_from_outside_its_workspace() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let dir = tempfile::tempdir().unwrap();
    let session = allow_all_session(
        &claude,
        |options| claude_unrestricted(options, dir.path()),
        claude_replies,
        tasks,
    );
    assert_nothing_leaked(&session, &["t_read", "t_glob", "t_grep", "t_run", "t_write"]);
    let outside = session.scenario.root().canonicalize().unwrap();
    assert!(!outside.join("planted.txt").exists(), "Claude Code wrote outside the workspace");
    assert_session_works(&session, "t_readme", "t_tasks");
}

#[test]
fn claude_code_with_an_allow_all_gate_and_confine_off_reads_the_secret() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let dir = tempfile::tempdir().unwrap();
    let session = allow_all_session(
        &claude,
        |options| {
            claude_unrestricted(options, dir.path());
            confine_off(options);
        },
        claude_replies,
        tasks,
    );
    let read = session.tool_result("t_read");
    assert!(read.text.contains(SESSION_SECRET), "the control must read the secret: {read:?}");
    let grep = session.tool_result("t_grep");
    assert!(grep.text.contains("founder"), "{grep:?}");
    assert!(session.scenario.root().join("planted.txt").exists(), "the control writes outside");
}

#[test]
fn pi_with_connect_ports_reaches_its_model_and_no_other_port() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    assert!(harness_confine::kernel_abi() >= 4, "this machine's kernel limits TCP connect");
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    let session = allow_all_session(
        &pi,
        pi_options,
        |s| {
            // run.json names the scripted model's port, known once the model is up.
            let port: u16 = s.model().base_url().rsplit(':').next().unwrap().parse().unwrap();
            let path = s.run_dir().join("run.json");
            let mut run: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            run["connectPorts"] = json!([port]);
            std::fs::write(&path, run.to_string()).unwrap();
            let probe = format!(
                "if exec 3<>/dev/tcp/127.0.0.1/{other_port}; then echo other=connected; else echo other=refused; fi"
            );
            vec![Reply::tool_use("t_bash", "bash", json!({"command": probe})), Reply::text("done")]
        },
        |_| {},
    );
    // The model answered every call (its port is named), and the other port was refused.
    assert_eq!(session.result, "done", "{}", session.stderr);
    let bash = session.tool_result("t_bash");
    assert!(bash.text.contains("other=refused"), "{bash:?}");
    assert!(session.stderr.contains("tcp-connect only to ports ["), "{}", session.stderr);
}
