//! Confinement (issue 16): the adapter of a turn, as the attacker, tries everything outside its
//! workspace and session through the runner; the kernel refuses it, whatever a gate would say.
//! The same probe with `confine: "off"` gets through, so the refusals are the domain's doing.

use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use harness_testkit::BrokerAnswer;
use serde_json::{Value, json};

use super::fixture::{Fixture, alive, fake_cli, finish, message, stderr, terminate, wait_until};

const LIMIT: Duration = Duration::from_secs(30);
const SECRET: &str = "outside the workspace, never for the session";

/// What the probe needs from outside the session.
struct World {
    outside: std::path::PathBuf,
    victim: Child,
    abstract_name: String,
    _abstract: UnixListener,
    named: TcpListener,
    other: TcpListener,
}

impl World {
    #[expect(clippy::disallowed_methods, reason = "a process outside the session to signal")]
    fn new(fx: &Fixture) -> World {
        let outside = fx.workspace.parent().unwrap().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        let victim = Command::new("sleep").arg("60").spawn().unwrap();
        static SERIAL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let abstract_name = format!("harness-confine-test-{}-{serial}", std::process::id());
        let address = SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        let abstract_socket = UnixListener::bind_addr(&address).unwrap();
        let named = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        World { outside, victim, abstract_name, _abstract: abstract_socket, named, other }
    }

    fn port(listener: &TcpListener) -> u16 {
        listener.local_addr().unwrap().port()
    }

    /// The probe: one `name=allowed|denied` line per attempt.
    fn script(&self) -> String {
        format!(
            r#"
try() {{ name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=allowed"; else echo "$name=denied"; fi; }}
try read-outside cat '{outside}/secret.txt'
try list-outside ls '{outside}'
try write-outside sh -c 'echo x > "$1/new.txt"' _ '{outside}'
try read-run-json cat "$MOSAIC_RUN/run.json"
try list-run ls "$MOSAIC_RUN"
try read-lock cat "$MOSAIC_RUN/runner.lock"
try read-turn-files ls "$MOSAIC_RUN/turns"
try write-run-tmp sh -c 'echo x > "$MOSAIC_RUN/tmp/planted"'
try list-tmp ls /tmp
try read-workspace cat "$MOSAIC_WORKSPACE/probe.sh"
try write-workspace sh -c 'echo y > "$MOSAIC_WORKSPACE/made.txt"'
try write-session sh -c 'echo y > "$MOSAIC_SESSION_DIR/made.txt"'
try tmpdir-in-session sh -c 'case "$(mktemp)" in "$MOSAIC_SESSION_DIR"/tmp/*) exit 0;; *) exit 1;; esac'
try append-unslop-log sh -c 'printf "" >> "$MOSAIC_UNSLOP_LOG"'
try read-unslop-log cat "$MOSAIC_UNSLOP_LOG"
try read-request cat "$MOSAIC_REQUEST"
try read-bundle cat "$MOSAIC_BUNDLE/manifest.json"
try write-bundle sh -c 'echo x > "$MOSAIC_BUNDLE/planted"'
try signal-outside kill -TERM {victim}
try abstract-socket perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or exit 1; connect($s, pack_sockaddr_un("\0{name}")) or exit 1'
try tcp-named bash -c 'exec 3<>/dev/tcp/127.0.0.1/{named}'
try tcp-other bash -c 'exec 3<>/dev/tcp/127.0.0.1/{other}'
"#,
            outside = self.outside.display(),
            victim = self.victim.id(),
            name = self.abstract_name,
            named = Self::port(&self.named),
            other = Self::port(&self.other),
        )
    }
}

/// Runs one probe turn; returns the probe's lines and the runner's stderr.
fn probe(
    edit: impl FnOnce(&mut Value, &World, &Fixture),
) -> (Vec<(String, String)>, String, World, Fixture) {
    let fx = Fixture::new();
    let mut world = World::new(&fx);
    let mut run: Value =
        serde_json::from_slice(&std::fs::read(fx.run.join("run.json")).unwrap()).unwrap();
    edit(&mut run, &world, &fx);
    std::fs::write(fx.run.join("run.json"), run.to_string()).unwrap();
    std::fs::write(fx.workspace.join("probe.sh"), world.script()).unwrap();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Go")));
    let child = fx.spawn(&[("TEST_MODE", "probe")]);
    wait_until(LIMIT, "the probe's RESULT", || !fx.broker.calls_of("message.send").is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = fx.broker.calls_of("message.send")[0].args["text"].as_str().unwrap().to_owned();
    let lines = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, verdict)| (name.to_owned(), verdict.to_owned()))
        .collect();
    let _ = world.victim.try_wait();
    (lines, stderr(&output), world, fx)
}

fn verdict<'a>(lines: &'a [(String, String)], name: &str) -> &'a str {
    lines.iter().find(|(n, _)| n == name).map_or("missing", |(_, v)| v)
}

#[test]
fn a_confined_turn_reaches_its_workspace_and_session_and_nothing_else() {
    let abi = harness_confine::kernel_abi();
    assert!(abi >= 1, "this machine's kernel offers Landlock (CI runs on the same kind)");
    // With the machine's network ("egress": "open"), so that the Landlock port limit is what
    // refuses (the sandbox's own network namespace refuses both; tests/suite/sandbox.rs).
    let (lines, log, mut world, fx) = probe(|run, world, _| {
        run["connectPorts"] = json!([World::port(&world.named)]);
        run["egress"] = json!("open");
    });
    let expect = |name: &str, want: &str| {
        assert_eq!(verdict(&lines, name), want, "{name}: {lines:?}\n{log}");
    };
    for name in [
        "read-outside",
        "list-outside",
        "write-outside",
        "read-run-json",
        "list-run",
        "read-lock",
        "read-turn-files",
        "write-run-tmp",
        "list-tmp",
        "write-bundle",
    ] {
        expect(name, "denied");
    }
    for name in [
        "read-workspace",
        "write-workspace",
        "write-session",
        "tmpdir-in-session",
        "append-unslop-log",
        "read-request",
        "read-bundle",
    ] {
        expect(name, "allowed");
    }
    assert!(!world.outside.join("new.txt").exists());
    assert!(!fx.run.join("tmp/planted").exists());
    // ABI 6 scopes signals and abstract sockets to the domain; ABI 4 limits TCP connect.
    let scoped = if abi >= 6 { "denied" } else { "allowed" };
    expect("signal-outside", scoped);
    expect("abstract-socket", scoped);
    assert_eq!(alive(world.victim.id()), abi >= 6, "the process outside was signalled");
    expect("tcp-named", "allowed");
    expect("tcp-other", if abi >= 4 { "denied" } else { "allowed" });
    // The log names the ABI and the rules, at every turn.
    assert!(
        log.contains(&format!("turn 1 confinement: Landlock ABI {abi}, confine \"best-effort\"")),
        "{log}"
    );
    assert!(log.contains(&format!("read+write {}", fx.workspace.display())), "{log}");
    if abi >= 6 {
        assert!(log.contains("abstract-unix-socket, signal"), "{log}");
    }
    let _ = world.victim.kill();
    let _ = world.victim.wait();
}

#[test]
fn with_confine_off_the_same_probe_gets_through() {
    let (lines, log, mut world, _fx) = probe(|run, _, _| run["confine"] = json!("off"));
    for name in ["read-outside", "list-outside", "write-outside", "read-run-json", "list-run"] {
        assert_eq!(verdict(&lines, name), "allowed", "{name}: {lines:?}");
    }
    assert_eq!(verdict(&lines, "signal-outside"), "allowed");
    assert_eq!(verdict(&lines, "abstract-socket"), "allowed");
    assert!(log.contains("turn 1 confinement: not confined (confine \"off\""), "{log}");
    let _ = world.victim.kill();
    let _ = world.victim.wait();
}

#[test]
fn required_confinement_exits_2_when_a_rule_cannot_be_applied() {
    // The CLI is there when the runner starts (it checks the CLI's version once) and gone when
    // the turn comes, so its rule cannot be applied.
    let start_then_remove_the_cli = |required: bool| {
        let dir = tempfile::tempdir().unwrap();
        let cli = fake_cli(&dir.path().join("harness-test-cli"));
        let fx = Fixture::with_run_json(|run| {
            if required {
                run["confine"] = json!("required");
            }
            run["cli"] = json!(cli);
        });
        let child = fx.spawn(&[("TEST_MODE", "ok")]);
        wait_until(LIMIT, "the first poll", || !fx.broker.calls_of("message.read").is_empty());
        std::fs::remove_file(&cli).unwrap();
        fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Go")));
        (fx, child, cli, dir)
    };
    let (fx, child, cli, _dir) = start_then_remove_the_cli(true);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains(&cli.display().to_string()), "{}", stderr(&output));
    assert!(fx.broker.calls_of("message.send").is_empty(), "no turn ran unconfined");

    // Best effort runs the turn, confined, and logs the rule it could not apply.
    let (fx, child, cli, _dir) = start_then_remove_the_cli(false);
    wait_until(LIMIT, "the RESULT", || !fx.broker.calls_of("message.send").is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    assert!(
        stderr(&output).contains(&format!("not applied: {}", cli.display())),
        "{}",
        stderr(&output)
    );
    assert!(Path::new(&fx.run).join("unslop.jsonl").is_file());
}

#[test]
fn a_link_in_place_of_the_unslop_log_opens_nothing() {
    // A session that once ran unconfined left RUN/unslop.jsonl as a link to a file outside.
    let (lines, log, mut world, _fx) = probe(|_, world, fx| {
        std::os::unix::fs::symlink(world.outside.join("secret.txt"), fx.run.join("unslop.jsonl"))
            .unwrap();
    });
    assert_eq!(verdict(&lines, "read-unslop-log"), "denied", "{lines:?}\n{log}");
    assert_eq!(verdict(&lines, "append-unslop-log"), "denied", "{lines:?}");
    assert_eq!(std::fs::read_to_string(world.outside.join("secret.txt")).unwrap(), SECRET);
    assert!(log.contains("is not a plain file; the session may not write it"), "{log}");
    let _ = world.victim.kill();
    let _ = world.victim.wait();
}
