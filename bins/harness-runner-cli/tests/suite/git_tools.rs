//! The git tools and launch, answered by the runner through the host's sockets (issue 6,
//! item 8), against a fake host backed by real git repositories.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use harness_testkit::{BrokerAnswer, FakeHost, git};
use serde_json::{Value, json};

use super::fixture::{CAP, Fixture, finish, stderr, terminate, wait_until};

const LIMIT: Duration = Duration::from_secs(30);

/// The task's work branch, as the host names it: `work/vikunja-<project>-<task>`.
fn work_ref(task: u32) -> String {
    format!("work/vikunja-web-{task}")
}

fn fixture(host: &FakeHost) -> Fixture {
    let (git_socket, launch_socket) = (host.git_socket(), host.launch_socket());
    Fixture::with_setup(
        |resolved| {
            resolved
                .actions
                .within_role
                .extend(["git.push.working", "review.verdict", "role.launch"].map(str::to_owned));
            resolved.projects = vec![harness_tools::Project { name: "web".into(), clone: true }];
            resolved.land_held = true;
        },
        |run| {
            run["gitSocket"] = json!(git_socket);
            run["launchSocket"] = json!(launch_socket);
        },
    )
}

/// A clone `web` in the workspace, on branch `feature`, with one commit.
fn clone(fx: &Fixture) -> std::path::PathBuf {
    let dir = fx.workspace.join("web");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "--quiet", "-b", "feature"]).unwrap();
    commit(&dir, "one");
    dir
}

fn commit(dir: &Path, text: &str) -> String {
    std::fs::write(dir.join("file.txt"), text).unwrap();
    git(dir, &["add", "file.txt"]).unwrap();
    git(dir, &["commit", "--quiet", "-m", text]).unwrap();
    git(dir, &["rev-parse", "HEAD"]).unwrap()
}

/// One call on the runner's tool socket: the reply's `ok` and `text`.
fn tool(fx: &Fixture, name: &str, args: Value) -> (bool, String) {
    let mut stream = UnixStream::connect(fx.run.join("tools.sock")).unwrap();
    stream.write_all(format!("{}\n", json!({"tool": name, "args": args})).as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    (reply["ok"] == true, reply["text"].as_str().unwrap().to_owned())
}

/// Returns true if and only if no git call left anything behind: `RUN/tmp` is empty, and so is
/// `STATE/git`, where each call's repository lives while it runs.
fn tmp_is_empty(fx: &Fixture) -> bool {
    let empty = |dir: std::path::PathBuf| {
        std::fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_none())
    };
    empty(fx.run.join("tmp")) && empty(fx.run.join("state/git"))
}

fn start(fx: &Fixture) -> std::process::Child {
    let child = fx.spawn(&[]);
    wait_until(LIMIT, "the runner polling", || !fx.broker.calls_of("message.read").is_empty());
    child
}

#[test]
fn push_working_moves_the_branch_as_a_bundle_fast_forward_only() {
    let host = FakeHost::start().unwrap();
    let fx = fixture(&host);
    let web = clone(&fx);
    let first = git(&web, &["rev-parse", "HEAD"]).unwrap();
    let child = start(&fx);
    let push = json!({"task_ref": "web-12", "project": "web", "branch": "feature"});

    let (ok, text) = tool(&fx, "push_working", push.clone());
    assert!(ok, "{text}");
    let reply: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(reply, json!({"ref": work_ref(12), "commit": first, "previous": null}));
    assert_eq!(
        git(&host.working(), &["rev-parse", &format!("refs/heads/{}", work_ref(12))]).unwrap(),
        first
    );
    assert!(tmp_is_empty(&fx), "the bundle file is deleted");

    let second = commit(&web, "two");
    let (ok, text) = tool(&fx, "push_working", push.clone());
    assert!(ok, "{text}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({"ref": work_ref(12), "commit": second, "previous": first})
    );

    // Rewritten history is not a fast-forward: the host refuses, and nothing is left behind.
    git(&web, &["commit", "--quiet", "--amend", "-m", "rewritten"]).unwrap();
    let (ok, text) = tool(&fx, "push_working", push);
    assert!(!ok && text == "refused: not-fast-forward", "{text}");
    assert!(tmp_is_empty(&fx), "the bundle file is deleted on a refusal too");
    assert_eq!(
        git(&host.working(), &["rev-parse", &format!("refs/heads/{}", work_ref(12))]).unwrap(),
        second
    );

    // A branch name that would be an option, and a project without a clone, are refused.
    let (ok, text) = tool(
        &fx,
        "push_working",
        json!({"task_ref": "web-12", "project": "web", "branch": "--upload-pack=x"}),
    );
    assert!(!ok && text == "refused: bad-branch", "{text}");
    let (ok, text) = tool(
        &fx,
        "push_working",
        json!({"task_ref": "web-12", "project": "docs", "branch": "feature"}),
    );
    assert!(!ok && text == "refused: not-a-clone", "{text}");
    for call in host.calls() {
        assert_eq!(call.cap, CAP, "every host call carries the runner's capability");
    }
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
}

#[test]
fn fetch_review_fetches_into_remote_tracking_refs_without_hooks_or_checkout() {
    let host = FakeHost::start().unwrap();
    let fx = fixture(&host);
    let web = clone(&fx);
    // The work to review is in the working repository already, pushed from elsewhere.
    let other = fx.workspace.parent().unwrap().join("other");
    std::fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "--quiet", "-b", "main"]).unwrap();
    let reviewed = commit(&other, "work to review");
    git(
        &other,
        &[
            "push",
            "--quiet",
            host.working().to_str().unwrap(),
            &format!("main:refs/heads/{}", work_ref(7)),
        ],
    )
    .unwrap();
    host.review("rr-1", "web", &work_ref(7));
    // A hook that would run on any ref update in the clone.
    let marker = fx.workspace.parent().unwrap().join("hook-ran");
    let hook = web.join(".git/hooks/reference-transaction");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let head = git(&web, &["rev-parse", "HEAD"]).unwrap();
    let child = start(&fx);

    let (ok, text) = tool(&fx, "fetch_review", json!({"request": "rr-1"}));
    assert!(ok, "{text}");
    let reply: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        reply,
        json!({"project": "web", "ref": format!("refs/remotes/working/{}", work_ref(7)), "commit": reviewed})
    );
    assert_eq!(
        git(&web, &["rev-parse", &format!("refs/remotes/working/{}", work_ref(7))]).unwrap(),
        reviewed
    );
    assert_eq!(git(&web, &["rev-parse", "HEAD"]).unwrap(), head, "nothing merged or checked out");
    assert!(!marker.exists(), "git ran a hook");
    assert!(tmp_is_empty(&fx));

    // Over 32 MiB announced: refused before anything is written or fetched.
    host.announce_next_fetch(40 * 1024 * 1024);
    let (ok, text) = tool(&fx, "fetch_review", json!({"request": "rr-1"}));
    assert!(!ok && text == "refused: bundle-too-large", "{text}");
    assert!(tmp_is_empty(&fx));
    let (ok, text) = tool(&fx, "fetch_review", json!({"request": "rr-404"}));
    assert!(!ok && text == "refused: no-such-review", "{text}");

    // A review holding a malformed object (a commit whose author line has no date) is refused
    // by fsck: nothing of it reaches the clone.
    let tree = git(&host.working(), &["mktree"]).unwrap();
    let bad = fx.workspace.parent().unwrap().join("bad-commit");
    std::fs::write(
        &bad,
        format!("tree {tree}\nauthor bad <x> notatime\ncommitter t <t@x> 1 +0000\n\nbad\n"),
    )
    .unwrap();
    let bad_commit = git(
        &host.working(),
        &["hash-object", "-t", "commit", "-w", "--literally", bad.to_str().unwrap()],
    )
    .unwrap();
    git(&host.working(), &["update-ref", &format!("refs/heads/{}", work_ref(8)), &bad_commit])
        .unwrap();
    host.review("rr-bad", "web", &work_ref(8));
    let (ok, text) = tool(&fx, "fetch_review", json!({"request": "rr-bad"}));
    assert!(!ok && text.contains("fsck"), "{text}");
    assert!(git(&web, &["cat-file", "-e", &bad_commit]).is_err(), "the object reached the clone");
    assert!(
        git(&web, &["rev-parse", "--verify", &format!("refs/remotes/working/{}", work_ref(8))])
            .is_err()
    );
    assert!(tmp_is_empty(&fx));
    terminate(&child);
    assert_eq!(finish(child, LIMIT).status.code(), Some(0));
}

#[test]
fn land_work_starts_one_landing_at_a_time_and_launch_goes_to_the_launch_socket() {
    let host = FakeHost::start().unwrap();
    let fx = fixture(&host);
    host.answer(
        "working.land",
        json!({"ok": true, "result": {"landing": "started", "commit": "c1", "base": "b1", "reviewed": "r1", "patch_id": "p1"}}),
    );
    host.answer(
        "launch",
        json!({"ok": true, "result": {"launched": "acme-dev-1", "run": "run-9"}}),
    );
    let child = start(&fx);
    let land = json!({"task_ref": "web-12", "decision": "dec-3"});
    let (ok, text) = tool(&fx, "land_work", land.clone());
    assert!(ok, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["landing"], "started");
    let (ok, text) = tool(&fx, "land_work", land.clone());
    assert!(!ok && text == "refused: land-busy", "{text}");
    // The landing's outcome arrives as a RESULT from the bus; then another may start.
    fx.broker.answer_once(
        "message.read",
        BrokerAnswer::result(json!({"message": {"id": "l1", "from": "landing", "kind": "result", "sentAt": "2026-11-30T04:00:00Z", "text": "Landed c1 on main."}})),
    );
    wait_until(LIMIT, "the landing RESULT read", || {
        fx.broker.calls_of("message.read").iter().any(|call| call.args == json!({"after": "l1"}))
    });
    let (ok, text) = tool(&fx, "land_work", land);
    assert!(ok, "{text}");
    assert!(fx.broker.calls_of("message.send").is_empty(), "a landing RESULT gets no reply");

    let (ok, text) = tool(&fx, "launch", json!({"instance": "acme-dev-1"}));
    assert!(ok, "{text}");
    let ops: Vec<String> = host.calls().iter().map(|call| call.op.clone()).collect();
    assert_eq!(
        ops,
        ["working.land", "working.land", "launch"],
        "the busy one never reached the host"
    );
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}
