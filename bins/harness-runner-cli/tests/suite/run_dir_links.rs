//! Links the session planted in the run directory before the runner started (with bash, in a
//! turn whose confinement let it, or before a confinement change): the runner reaches everything
//! below the run directory through directory handles and never writes, reads or creates through
//! any of them, at any depth. Each case plants one link to a directory outside and checks that
//! nothing appeared there and what the runner did instead.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use harness_testkit::BrokerAnswer;
use serde_json::json;

use super::fixture::{Fixture, finish, message, stderr, terminate, wait_until};

const LIMIT: Duration = Duration::from_secs(30);

/// How the run must go with the link in place.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// The run ends at the start with exit 2, naming the link.
    Refused,
}

/// Plants `link` (a path below the run directory) pointing at a directory outside, starts the
/// runner with a session file under `session/pi-agent/` and one message, and checks `expect`
/// and that the outside directory is still empty.
fn check(link: &str, expect: Expect) {
    let fx = Fixture::with_run_json(|run_json| {
        run_json["sessionFiles"] = json!({"pi-agent/models.json": "{\"providers\": {}}"});
    });
    let outside = fx.run.parent().unwrap().join(format!("outside-{}", link.replace('/', "-")));
    std::fs::create_dir(&outside).unwrap();
    let planted = fx.run.join(link);
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    symlink(&outside, &planted).unwrap();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let child = fx.spawn(&[]);
    let output = finish(child, LIMIT);
    let log = stderr(&output);
    match expect {
        Expect::Refused => {
            assert_eq!(output.status.code(), Some(2), "{link}: {log}");
            assert!(log.contains("symbolic link"), "{link}: the exit names the link: {log}");
            assert!(fx.broker.calls_of("role.claim").is_empty(), "{link}: claimed: {log}");
        }
    }
    assert_eq!(entries(&outside), Vec::<String>::new(), "{link}: written outside: {log}");
    assert!(std::fs::symlink_metadata(&planted).unwrap().is_symlink(), "{link}: link replaced");
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_link_in_place_of_a_session_files_directory_is_never_written_through() {
    check("session/pi-agent", Expect::Refused);
}

#[test]
fn a_link_in_place_of_the_session_directory_is_never_written_through() {
    check("session", Expect::Refused);
}

#[test]
fn a_link_in_place_of_turns_is_never_written_through() {
    check("turns", Expect::Refused);
}

#[test]
fn a_link_in_place_of_the_default_state_directory_is_never_written_through() {
    check("state", Expect::Refused);
}

#[test]
fn a_link_in_place_of_the_clis_tmp_at_the_start_is_never_written_through() {
    check("session/tmp", Expect::Refused);
}

/// What a session with bash does in one turn for the next: `session/tmp` (the CLI's `TMPDIR`)
/// swapped for a link out. The next turn fails naming it, its message is answered, and nothing
/// is created through the link.
#[test]
fn a_link_planted_in_place_of_the_clis_tmp_during_a_turn_fails_the_next_turn() {
    let fx = Fixture::new();
    let outside = fx.run.parent().unwrap().join("outside-tmp");
    std::fs::create_dir(&outside).unwrap();
    let plant = format!(
        "rm -rf \"$MOSAIC_SESSION_DIR/tmp\"; ln -s '{}' \"$MOSAIC_SESSION_DIR/tmp\"; echo planted\n",
        outside.display()
    );
    std::fs::write(fx.workspace.join("probe.sh"), plant).unwrap();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "One")));
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m2", "message", "Two")));
    let child = fx.spawn(&[("TEST_MODE", "probe")]);
    let sent = || fx.broker.calls_of("message.send").len() >= 2;
    wait_until(LIMIT, "two RESULTs", sent);
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let texts: Vec<String> = fx
        .broker
        .calls_of("message.send")
        .iter()
        .map(|call| call.args["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(texts[0], "planted", "{texts:?}");
    assert!(
        texts[1].starts_with("The turn failed: ") && texts[1].contains("symbolic link"),
        "{texts:?}"
    );
    assert_eq!(entries(&outside), Vec::<String>::new(), "written outside");
}

/// `session/id` as a link to a file outside: the runner removes the link (never reads or writes
/// through it) and keeps a fresh id of its own; the file outside is unchanged.
#[test]
fn a_link_in_place_of_the_session_id_is_replaced_never_followed() {
    let fx = Fixture::new();
    let outside = fx.run.parent().unwrap().join("outside-id");
    std::fs::write(&outside, "00000000-0000-4000-8000-000000000000").unwrap();
    std::fs::create_dir_all(fx.run.join("session")).unwrap();
    symlink(&outside, fx.run.join("session/id")).unwrap();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let child = fx.spawn(&[]);
    wait_until(LIMIT, "the RESULT", || !fx.broker.calls_of("message.send").is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let id = std::fs::symlink_metadata(fx.run.join("session/id")).unwrap();
    assert!(id.is_file(), "the link was replaced by the runner's own file");
    let kept = std::fs::read_to_string(fx.run.join("session/id")).unwrap();
    assert_ne!(kept, "00000000-0000-4000-8000-000000000000", "the id was read through the link");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "00000000-0000-4000-8000-000000000000");
}

/// A full disk (issue 20): `turns/` is a 16 KiB tmpfs the test fills before the runner starts
/// (in a user and mount namespace of the runner's own, made by `unshare`), so writing the turn's
/// request fails with ENOSPC. The turn fails with the reason, the sender is answered, and the
/// runner goes on and stops cleanly; before, it exited 2 with the message unanswered.
#[test]
fn a_request_that_cannot_be_written_for_space_fails_the_turn_and_is_answered() {
    use std::io::Write as _;
    let fx = Fixture::with_run_json(|run_json| run_json["confine"] = json!("off"));
    std::fs::create_dir_all(fx.run.join("turns")).unwrap();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Hi")));
    let script = "mount -t tmpfs -o size=16k tmpfs \"$1/turns\" \
                  && { dd if=/dev/zero of=\"$1/turns/filler\" bs=1k count=64 2> /dev/null; true; } \
                  && exec \"$2\" \"$1\"";
    #[expect(
        clippy::disallowed_methods,
        reason = "the test starts the runner in its own namespaces"
    )]
    let mut child = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "sh", "-c", script, "sh"])
        .arg(&fx.run)
        .arg(env!("CARGO_BIN_EXE_harness-runner"))
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{{\"cap\": \"{}\"}}\n", super::fixture::CAP).as_bytes()).unwrap();
    drop(stdin);
    let sent = || !fx.broker.calls_of("message.send").is_empty();
    let started = std::time::Instant::now();
    while !sent() && started.elapsed() < LIMIT {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let answered = sent();
    if answered {
        let marked =
            || fx.broker.calls_of("message.read").iter().any(|call| call.args["after"] == "m1");
        wait_until(LIMIT, "the mark", marked);
    }
    terminate(&child);
    let output = finish(child, LIMIT);
    let log = stderr(&output);
    assert!(answered, "no RESULT: {log}");
    assert_eq!(output.status.code(), Some(0), "{log}");
    let text =
        fx.broker.calls_of("message.send")[0].args["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.starts_with("The turn failed: the request could not be written"), "{text}");
    assert!(text.contains("No space left on device"), "{text}");
}
