//! Issue 25 through the real CLIs, with the gate alone (no runner, no Landlock) and the CLI as an
//! unprivileged user (`nobody` when the tests run as root): the files a tool opens that no
//! argument names.
//!
//! - Ignore files: the workspace holds `.ignore -> ../outside/ign` and a directory the CLI's user
//!   cannot read. ripgrep (Pi's grep, Claude Code's Grep) and fd (Pi's find) open `.ignore` on
//!   their own; ripgrep prints the lines it cannot parse as globs, exits 2 because of the
//!   unreadable directory, and Pi hands that stderr to the model. The outside file also decides
//!   what a search lists. Every such search must be blocked by the gate, the outside content must
//!   never reach the model, and a read inside still goes through. The same holds for fd's global
//!   ignore file under the session's home.
//! - Claude Code's Read fallback: for a missing `NAME AM.png` it opens the path with the first
//!   ` AM.png` (or `U+202F AM.png`) swapped, a directory component included; both trees of the
//!   issue must be blocked by the gate itself, not by Claude Code's own later check.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::Duration;

use harness_testkit::{
    Cli, CliPaths, CliSandbox, FINAL_TEXT, RecordedRequest, Reply, Script, ScriptedModel,
    require_cli, run_unprivileged, run_with_deadline, workspace_root,
};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(90);
/// What the outside ignore file holds: a line ripgrep cannot parse as a glob (so it prints it),
/// and a line that hides the inside file from a search.
const SECRET: &str = "SECRET-09c655acb33c";
const INSIDE: &str = "findme inside the workspace";

fn gate_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_harness-gate"))
}

/// A sandbox for one CLI run: the workspace `work/`, `outside/` beside it, the scripted model.
struct Run {
    model: ScriptedModel,
    sandbox: CliSandbox,
    work: PathBuf,
    outside: PathBuf,
}

impl Run {
    fn new() -> Self {
        let model = ScriptedModel::start(Script::default()).unwrap();
        let sandbox = CliSandbox::new(&model).unwrap();
        let work = sandbox.work_dir().canonicalize().unwrap();
        let outside = sandbox.root().canonicalize().unwrap().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(work.join("notes.txt"), format!("{INSIDE}\n")).unwrap();
        Self { model, sandbox, work, outside }
    }

    /// The issue's tree: `.ignore -> ../outside/ign`, the ignore file holding the secret in a
    /// line that is no glob, and a directory with mode 000.
    fn ignore_tree(&self) {
        std::fs::write(self.outside.join("ign"), format!("{SECRET}-x[{SECRET}\nnotes.txt\n"))
            .unwrap();
        symlink("../outside/ign", self.work.join(".ignore")).unwrap();
        let locked = self.work.join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::write(locked.join("f.txt"), "findme locked\n").unwrap();
    }

    /// Locks `work/locked` (after the tree was given to the CLI's user).
    fn lock(&self) {
        let locked = self.work.join("locked");
        if locked.exists() {
            std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        }
    }

    fn script(&self, tool_calls: &[(&str, &str, Value)]) {
        let mut replies: Vec<Reply> = tool_calls
            .iter()
            .map(|(id, tool, input)| Reply::tool_use(*id, *tool, input.clone()))
            .collect();
        replies.push(Reply::text(FINAL_TEXT));
        self.model.push_replies(replies);
    }

    /// Runs the real Pi with the gate's extension, as the unprivileged user.
    fn pi(&self, pi: &CliPaths, tools: &[&str], tool_calls: &[(&str, &str, Value)]) {
        let root = self.sandbox.root();
        let bundle = root.join("bundle");
        std::fs::create_dir_all(&bundle).unwrap();
        std::fs::write(bundle.join("tools.json"), r#"{"tools": []}"#).unwrap();
        let policy = json!({"harness": "pi", "workspace": self.work, "tools": tools, "typed": []});
        std::fs::write(bundle.join("policy.json"), policy.to_string()).unwrap();
        self.script(tool_calls);
        let extension = workspace_root().join("crates/harness-adapters/assets/pi/extension.mjs");
        let mut command = self.sandbox.command(pi);
        command
            .env("MOSAIC_GATE", gate_binary())
            .env("MOSAIC_BUNDLE", &bundle)
            .env("MOSAIC_TOOLS_SOCK", root.join("tools.sock"))
            .env("MOSAIC_TURN_MARKER", root.join("turn.marker"))
            .args(["-p", "--model", harness_testkit::PI_MODEL_ARG, "--thinking", "off"])
            .args(["--no-skills", "--no-extensions", "--no-context-files"])
            .args(["--no-prompt-templates", "--no-themes", "-e"])
            .arg(extension)
            .args(["--tools", &tools.join(","), "--no-session", "--system-prompt", "Gate test."])
            .arg("Do the calls");
        run_unprivileged(&mut command, root).unwrap();
        self.lock();
        run_with_deadline(command, DEADLINE).unwrap().assert_success();
        self.model.assert_finished();
    }

    /// Runs the real Claude Code with the gate as its PreToolUse hook (no `--restricted`, so the
    /// gate is the only path check), as the unprivileged user.
    fn claude(&self, claude: &CliPaths, tools: &[&str], tool_calls: &[(&str, &str, Value)]) {
        let root = self.sandbox.root().canonicalize().unwrap();
        let policy = root.join("policy.json");
        let text =
            json!({"harness": "claude-code", "workspace": self.work, "tools": tools, "typed": []});
        std::fs::write(&policy, text.to_string()).unwrap();
        let quote =
            |path: &Path| format!("'{}'", path.display().to_string().replace('\'', r"'\''"));
        let hook = format!(
            "timeout -k 2 10 {} claude-hook --policy {} || exit 2",
            quote(gate_binary()),
            quote(&policy)
        );
        let settings = json!({"hooks": {"PreToolUse": [
            {"matcher": "*", "hooks": [{"type": "command", "command": hook, "timeout": 20}]}
        ]}});
        let settings_path = root.join("settings.json");
        std::fs::write(&settings_path, settings.to_string()).unwrap();
        self.script(tool_calls);
        let mut command = self.sandbox.command(claude);
        command
            .args(["-p", "Do the calls", "--output-format", "json", "--disable-slash-commands"])
            .args(["--tools", &tools.join(","), "--permission-mode", "dontAsk"])
            .arg("--settings")
            .arg(&settings_path)
            .args(["--no-session-persistence", "--system-prompt", "Gate test."]);
        run_unprivileged(&mut command, &root).unwrap();
        self.lock();
        run_with_deadline(command, DEADLINE).unwrap().assert_success();
        self.model.assert_finished();
    }

    fn requests(&self) -> Vec<RecordedRequest> {
        self.model.messages_calls()
    }

    /// Asserts that `id` came back as the gate's block with `rule`.
    fn assert_blocked(&self, id: &str, rule: &str) {
        let requests = self.requests();
        let results: Vec<_> = requests.iter().flat_map(|call| call.tool_results()).collect();
        let result = results.iter().find(|result| result.tool_use_id == id);
        let result = result.unwrap_or_else(|| panic!("no result for {id}: {results:#?}"));
        assert!(
            result.is_error
                && result.text.contains("harness-gate: blocked")
                && result.text.contains(rule),
            "{id} must be blocked by the gate with {rule}: {result:#?}"
        );
    }

    /// Asserts that `id` came back without error and holding `text`.
    fn assert_holds(&self, id: &str, text: &str) {
        let requests = self.requests();
        let results: Vec<_> = requests.iter().flat_map(|call| call.tool_results()).collect();
        let result = results.iter().find(|result| result.tool_use_id == id).unwrap();
        assert!(!result.is_error && result.text.contains(text), "{id}: {result:#?}");
    }

    /// Asserts that `needle` reached the model in no request.
    fn assert_never_sent(&self, needle: &str) {
        for request in self.requests() {
            assert!(!request.raw_body.contains(needle), "{needle:?} reached the model");
        }
    }
}

#[test]
fn pi_grep_and_find_refuse_an_ignore_file_that_leads_outside() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let run = Run::new();
    run.ignore_tree();
    std::fs::create_dir(run.work.join("sub")).unwrap();
    let tools = ["grep", "find", "read"];
    run.pi(
        &pi,
        &tools,
        &[
            ("toolu_grep", "grep", json!({"pattern": "findme"})),
            ("toolu_grep_sub", "grep", json!({"pattern": "findme", "path": "sub"})),
            ("toolu_find", "find", json!({"pattern": "*.txt"})),
            ("toolu_read", "read", json!({"path": "notes.txt"})),
        ],
    );
    for id in ["toolu_grep", "toolu_grep_sub", "toolu_find"] {
        run.assert_blocked(id, "outside-workspace");
    }
    run.assert_holds("toolu_read", INSIDE);
    run.assert_never_sent(SECRET);
}

#[test]
fn pi_find_refuses_a_global_fd_ignore_file_that_leads_outside() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let run = Run::new();
    std::fs::write(run.outside.join("ign"), format!("{SECRET}[\nnotes.txt\n")).unwrap();
    let config = run.sandbox.home().join(".config/fd");
    std::fs::create_dir_all(&config).unwrap();
    symlink(run.outside.join("ign"), config.join("ignore")).unwrap();
    let tools = ["grep", "find", "read"];
    run.pi(
        &pi,
        &tools,
        &[
            ("toolu_find", "find", json!({"pattern": "*.txt"})),
            ("toolu_read", "read", json!({"path": "notes.txt"})),
        ],
    );
    run.assert_blocked("toolu_find", "outside-workspace");
    run.assert_holds("toolu_read", INSIDE);
    run.assert_never_sent(SECRET);
}

#[test]
fn claude_code_grep_refuses_an_ignore_file_that_leads_outside() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let run = Run::new();
    run.ignore_tree();
    let work = run.work.display().to_string();
    run.claude(
        &claude,
        &["Grep", "Glob", "Read"],
        &[
            ("toolu_grep", "Grep", json!({"pattern": "findme"})),
            (
                "toolu_grep_content",
                "Grep",
                json!({"pattern": "findme", "path": work, "output_mode": "content"}),
            ),
            // Claude Code's Glob passes --no-ignore: the outside file decides nothing there.
            ("toolu_glob", "Glob", json!({"pattern": "*.txt"})),
            ("toolu_read", "Read", json!({"file_path": format!("{work}/notes.txt")})),
        ],
    );
    for id in ["toolu_grep", "toolu_grep_content"] {
        run.assert_blocked(id, "outside-workspace");
    }
    run.assert_holds("toolu_glob", "notes.txt");
    run.assert_holds("toolu_read", INSIDE);
    run.assert_never_sent(SECRET);
}

#[test]
fn claude_code_read_fallback_spellings_are_refused_by_the_gate() {
    let Some(claude) = require_cli(Cli::Claude) else { return };
    let run = Run::new();
    let nnbsp = '\u{202F}';
    // A space in the call, U+202F on disk: `d<U+202F>AM.png` is a link out.
    symlink("../outside", run.work.join(format!("d{nnbsp}AM.png"))).unwrap();
    std::fs::write(run.outside.join("shot AM.png"), SECRET).unwrap();
    // U+202F in the call, a space on disk: `e AM.png` is a link out.
    std::fs::create_dir(run.outside.join("o2")).unwrap();
    symlink("../outside/o2", run.work.join("e AM.png")).unwrap();
    std::fs::write(run.outside.join(format!("o2/shot{nnbsp}AM.png")), SECRET).unwrap();
    let work = run.work.display().to_string();
    run.claude(
        &claude,
        &["Read"],
        &[
            ("toolu_space", "Read", json!({"file_path": format!("{work}/d AM.png/shot AM.png")})),
            (
                "toolu_nnbsp",
                "Read",
                json!({"file_path": format!("{work}/e{nnbsp}AM.png/shot{nnbsp}AM.png")}),
            ),
            ("toolu_read", "Read", json!({"file_path": format!("{work}/notes.txt")})),
        ],
    );
    run.assert_blocked("toolu_space", "outside-workspace");
    run.assert_blocked("toolu_nnbsp", "outside-workspace");
    run.assert_holds("toolu_read", INSIDE);
    run.assert_never_sent(SECRET);
}

/// The same searches in an ordinary workspace (its own `.gitignore`, a git `info/exclude`, an
/// ignore file that is a link inside) go through, and the workspace's own rules still apply.
#[test]
fn ordinary_searches_go_through_with_the_workspace_rules() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let Some(claude) = require_cli(Cli::Claude) else { return };
    for cli in [Cli::Pi, Cli::Claude] {
        let run = Run::new();
        std::fs::create_dir_all(run.work.join(".git/info")).unwrap();
        std::fs::write(run.work.join(".git/info/exclude"), "# nothing\n").unwrap();
        std::fs::write(run.work.join(".gitignore"), "skipped.txt\n").unwrap();
        std::fs::write(run.work.join("skipped.txt"), format!("{INSIDE} but ignored\n")).unwrap();
        std::fs::create_dir(run.work.join("sub")).unwrap();
        std::fs::write(run.work.join("sub/rules"), "*.tmp\n").unwrap();
        symlink("rules", run.work.join("sub/.ignore")).unwrap();
        match cli {
            Cli::Pi => run.pi(
                &pi,
                &["grep", "find"],
                &[
                    ("toolu_grep", "grep", json!({"pattern": "findme"})),
                    ("toolu_find", "find", json!({"pattern": "*.txt"})),
                ],
            ),
            Cli::Claude => run.claude(
                &claude,
                &["Grep"],
                &[("toolu_grep", "Grep", json!({"pattern": "findme", "output_mode": "content"}))],
            ),
        }
        run.assert_holds("toolu_grep", "notes.txt");
        let requests = run.requests();
        let results: Vec<_> = requests.iter().flat_map(|call| call.tool_results()).collect();
        for result in &results {
            assert!(
                !result.text.contains("skipped.txt"),
                "the workspace's .gitignore: {result:#?}"
            );
        }
        if cli == Cli::Pi {
            run.assert_holds("toolu_find", "notes.txt");
        }
    }
}
