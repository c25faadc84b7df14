//! The runner's git never runs what the session wrote (issue 12, item 11), end to end: the real
//! Pi, with `write`, `fetch_review` and `push_working` and no bash, and a gate that allows
//! everything (so no `.git` rule of the gate hides the attack), writes the clone's `.git` through
//! its write tool, then calls both git tools. The command the configuration names would create a
//! marker inside the workspace, which the session's own domain lets it write: only the runner's
//! hardening keeps it from appearing.

use std::path::{Path, PathBuf};

use harness_testkit::{Cli, CliPaths, FakeHost, Reply, SessionScenario, git, require_cli};
use serde_json::json;

use super::confined_clis::{Session, allow_all_session};

const WORK_REF: &str = "work/vikunja-web-7";

/// The clone `web` in the workspace, on branch `feature`, its commit also the host's work ref
/// under review `rr-1`.
fn clone_and_review(s: &SessionScenario, host: &FakeHost) -> PathBuf {
    let web = s.workspace().join("web");
    std::fs::create_dir_all(&web).unwrap();
    git(&web, &["init", "--quiet", "-b", "feature"]).unwrap();
    std::fs::write(web.join("file.txt"), "one\n").unwrap();
    git(&web, &["add", "file.txt"]).unwrap();
    git(&web, &["commit", "--quiet", "-m", "one"]).unwrap();
    let working = host.working();
    git(
        &web,
        &["push", "--quiet", working.to_str().unwrap(), &format!("feature:refs/heads/{WORK_REF}")],
    )
    .unwrap();
    host.review("rr-1", "web", WORK_REF);
    web
}

/// What the session writes, by path relative to the clone, given the clone and the marker.
type Attack = fn(&Path, &Path) -> (&'static str, String);

fn session(pi: &CliPaths, host: &FakeHost, attack: Attack) -> (Session, PathBuf, PathBuf) {
    let marker = std::cell::RefCell::new(PathBuf::new());
    let web = std::cell::RefCell::new(PathBuf::new());
    let session = allow_all_session(
        pi,
        |options| {
            options.limits = Some(vec!["read".to_owned(), "write".to_owned()]);
            options.projects = vec![harness_tools::Project { name: "web".into(), clone: true }];
            options.actions = vec!["review.verdict".to_owned(), "git.push.working".to_owned()];
            options.run_json.insert("gitSocket".to_owned(), json!(host.git_socket()));
        },
        |s| {
            let clone = clone_and_review(s, host);
            let mark = s.workspace().join("MARKER");
            let (relative, content) = attack(&clone, &mark);
            marker.replace(mark);
            web.replace(clone.clone());
            vec![
                Reply::tool_use(
                    "t_write",
                    "write",
                    json!({"path": clone.join(relative), "content": content}),
                ),
                Reply::tool_use("t_fetch", "fetch_review", json!({"request": "rr-1"})),
                Reply::tool_use(
                    "t_push",
                    "push_working",
                    json!({"task_ref": "web-12", "project": "web", "branch": "feature"}),
                ),
                Reply::text("done"),
            ]
        },
        |_| {},
    );
    let write = session.tool_result("t_write");
    assert!(!write.is_error, "the session's write of .git must succeed: {write:?}");
    (session, marker.into_inner(), web.into_inner())
}

fn config_with(clone: &Path, extra: &str) -> String {
    let config = std::fs::read_to_string(clone.join(".git/config")).unwrap();
    format!("{config}{extra}")
}

#[test]
fn an_ext_url_rewrite_in_the_clones_config_runs_nothing() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let host = FakeHost::start().unwrap();
    let (session, marker, _) = session(&pi, &host, |clone, marker| {
        let extra = format!(
            "[url \"ext::sh -c touch% {}% \"]\n\tinsteadOf = /\n[protocol \"ext\"]\n\tallow = always\n",
            marker.display()
        );
        (".git/config", config_with(clone, &extra))
    });
    assert!(!marker.exists(), "the runner's git ran the session's ext:: command");
    let fetch = session.tool_result("t_fetch");
    assert!(fetch.is_error && fetch.text.contains("not allowed"), "{fetch:?}");
    let push = session.tool_result("t_push");
    assert!(!push.is_error, "{push:?}");
    assert_eq!(host.calls().iter().filter(|call| call.op == "working.push").count(), 1);
}

#[test]
fn core_ssh_command_with_an_ssh_rewrite_runs_nothing() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let host = FakeHost::start().unwrap();
    let (session, marker, _) = session(&pi, &host, |clone, marker| {
        let extra = format!(
            "[url \"ssh://evil.invalid/x\"]\n\tinsteadOf = /\n[core]\n\tsshCommand = touch '{}'; false\n\tfsmonitor = touch '{}'; false\n",
            marker.display(),
            marker.display()
        );
        (".git/config", config_with(clone, &extra))
    });
    assert!(!marker.exists(), "the runner's git ran the session's ssh command");
    let fetch = session.tool_result("t_fetch");
    assert!(fetch.is_error && fetch.text.contains("not allowed"), "{fetch:?}");
    assert!(!session.tool_result("t_push").is_error);
}

#[test]
fn a_commondir_written_by_the_session_is_refused() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let host = FakeHost::start().unwrap();
    let (session, _, web) =
        session(&pi, &host, |_, _| (".git/commondir", "../../elsewhere\n".to_owned()));
    for id in ["t_fetch", "t_push"] {
        let result = session.tool_result(id);
        assert!(result.is_error && result.text.contains("unsafe-git-dir"), "{id}: {result:?}");
    }
    assert!(host.calls().iter().all(|call| call.op != "working.push"), "nothing was pushed");
    assert!(web.join(".git/commondir").is_file());
}

#[test]
fn alternates_written_by_the_session_are_refused() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    let host = FakeHost::start().unwrap();
    let (session, _, _) = session(&pi, &host, |_, _| {
        (".git/objects/info/alternates", "/elsewhere/objects\n".to_owned())
    });
    for id in ["t_fetch", "t_push"] {
        let result = session.tool_result(id);
        assert!(result.is_error && result.text.contains("unsafe-git-dir"), "{id}: {result:?}");
    }
}
