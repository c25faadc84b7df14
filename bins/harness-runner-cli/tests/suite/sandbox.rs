//! Issue 24: each turn is a sandbox the kernel owns. The adapter of a turn, as the attacker,
//! leaves fork chains hopping under `setsid`, lists /proc, reads the runner's environment, and
//! reads the home of a CLI installed in it; every test goes through the runner as a session
//! would, and each has its control (`confine: "off"` gets through) where one is meaningful.

use std::process::Child;
use std::time::{Duration, Instant};

use harness_testkit::{BrokerAnswer, kill_marked, marked_processes};
use serde_json::{Value, json};

use super::fixture::{Fixture, finish, message, stderr, terminate, wait_until};

const LIMIT: Duration = Duration::from_secs(30);

fn marker(what: &str) -> String {
    static SERIAL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("harness-sandbox-{what}-{}-{serial}", std::process::id())
}

/// 40 fork-exit chains, each in a session of its own, hopping to a new process as fast as bash
/// forks for 8 s; each process carries `$TEST_MARK` on its command line, and each hop writes
/// `WORKSPACE/heartbeat` (a process that lives a millisecond is easily missed in /proc; its
/// heartbeat is not).
const FORK_CHAINS: &str = r#"
i=0
while [ $i -lt 40 ]; do
  setsid bash -c 'beat=$1; hop() { [ $SECONDS -lt 8 ] || exit 0; : > "$beat"; ( hop ) & exit 0; }; hop' "$TEST_MARK" "$MOSAIC_WORKSPACE/heartbeat" > /dev/null 2>&1 < /dev/null &
  i=$((i + 1))
done
"#;

/// Starts a runner whose first turn runs `probe` (sourced by the adapter), with `mark` and
/// `edit` applied to run.json.
fn start_probe(probe: &str, mark: &str, edit: impl FnOnce(&mut Value)) -> (Fixture, Child) {
    let fx = Fixture::with_run_json(edit);
    std::fs::write(fx.workspace.join("probe.sh"), probe).unwrap();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Go")));
    let child = fx.spawn(&[("TEST_MODE", "probe"), ("TEST_MARK", mark)]);
    (fx, child)
}

/// Returns true if and only if something still writes `heartbeat` (removed, then looked for
/// 300 ms later).
fn beating(heartbeat: &std::path::Path) -> bool {
    let _ = std::fs::remove_file(heartbeat);
    std::thread::sleep(Duration::from_millis(300));
    heartbeat.exists()
}

/// The zombies whose parent is `pid`.
fn zombies_under(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let Some(rest) = stat.rfind(')').map(|at| &stat[at + 1..]) else { continue };
        let mut fields = rest.split_whitespace();
        let (state, parent) = (fields.next(), fields.next().and_then(|p| p.parse::<u32>().ok()));
        if state == Some("Z") && parent == Some(pid) {
            found.push(child);
        }
    }
    found
}

#[test]
fn fork_chains_end_with_the_turn_and_leave_no_zombie() {
    let mark = marker("chains");
    let probe = format!("{FORK_CHAINS}\nsleep 0.5\necho started");
    let (fx, child) = start_probe(&probe, &mark, |_| {});
    wait_until(LIMIT, "the RESULT", || !fx.broker.calls_of("message.send").is_empty());
    std::thread::sleep(Duration::from_millis(1700));
    let alive = beating(&fx.workspace.join("heartbeat"));
    let zombies = zombies_under(child.id());
    let started = Instant::now();
    terminate(&child);
    let output = finish(child, LIMIT);
    let answered = started.elapsed();
    let left = kill_marked(&mark);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!alive, "a chain is alive 2 s after the RESULT (left: {left:?})");
    assert!(zombies.is_empty(), "zombies under the runner: {}", zombies.len());
    assert!(answered < Duration::from_secs(2), "SIGTERM answered in {answered:?}");
}

#[test]
fn fork_chains_of_a_turn_stopped_by_sigterm_end_within_2_s() {
    let mark = marker("chains-term");
    let probe = format!("{FORK_CHAINS}\necho started > \"$MOSAIC_SESSION_DIR/started\"\nsleep 300");
    let (fx, child) = start_probe(&probe, &mark, |_| {});
    wait_until(LIMIT, "the chains", || fx.run.join("session/started").is_file());
    let heartbeat = fx.workspace.join("heartbeat");
    wait_until(LIMIT, "the chains beating", || beating(&heartbeat));
    let started = Instant::now();
    terminate(&child);
    let output = finish(child, LIMIT);
    let answered = started.elapsed();
    let alive = beating(&heartbeat);
    let left = kill_marked(&mark);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(answered < Duration::from_secs(2), "SIGTERM answered in {answered:?}");
    assert!(!alive, "a chain is alive after the runner's exit (left: {left:?})");
}

#[test]
fn fork_chains_end_when_the_runner_is_sigkilled_mid_turn() {
    let mark = marker("chains-kill");
    // The adapter itself ends up carrying the mark too.
    let probe = format!(
        "{FORK_CHAINS}\necho started > \"$MOSAIC_SESSION_DIR/started\"\nexec sh -c 'sleep 300; :' \"$TEST_MARK\""
    );
    let (fx, mut child) = start_probe(&probe, &mark, |_| {});
    wait_until(LIMIT, "the chains", || fx.run.join("session/started").is_file());
    let heartbeat = fx.workspace.join("heartbeat");
    wait_until(LIMIT, "the chains beating", || beating(&heartbeat));
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1700));
    let alive = beating(&heartbeat);
    // The adapter (which exec'd into a marked `sleep`) too.
    let adapter = marked_processes(&mark);
    kill_marked(&mark);
    assert!(!alive, "a chain is alive 2 s after the runner was SIGKILLed");
    assert!(adapter.is_empty(), "alive 2 s after the runner was SIGKILLed: {adapter:?}");
}

/// The probe of /proc: how many processes it lists, and how many environments of them it read
/// that hold `RUNNER_ONLY`, a variable only the runner has.
const PROC_PROBE: &str = r#"
echo "listed=$(ls /proc | grep -c '^[0-9]')"
found=0
for dir in /proc/[0-9]*; do
  if tr '\0' '\n' < "$dir/environ" 2> /dev/null | grep -q '^RUNNER_ONLY='; then found=$((found + 1)); fi
done
echo "environ=$found"
"#;

fn proc_probe(edit: impl FnOnce(&mut Value)) -> (usize, usize, String) {
    let fx = Fixture::with_run_json(edit);
    std::fs::write(fx.workspace.join("probe.sh"), PROC_PROBE).unwrap();
    fx.broker.answer_once("message.read", BrokerAnswer::result(message("m1", "message", "Go")));
    let child = fx.spawn(&[("TEST_MODE", "probe"), ("RUNNER_ONLY", "runner-secret")]);
    wait_until(LIMIT, "the RESULT", || !fx.broker.calls_of("message.send").is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = fx.broker.calls_of("message.send")[0].args["text"].as_str().unwrap().to_owned();
    let value = |name: &str| -> usize {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name}=")))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    (value("listed"), value("environ"), text)
}

#[test]
fn proc_lists_only_the_turn_and_no_environment_of_the_runner_is_readable() {
    let (listed, environ, text) = proc_probe(|_| {});
    // PID 1 of the namespace, the adapter's shell, and the probe's `ls` and `grep`.
    assert!(listed <= 5, "the turn lists {listed} processes: {text}");
    assert_eq!(environ, 0, "the turn read the runner's environment: {text}");
    // The control: without the sandbox the same probe lists the machine and, as root, reads the
    // runner's environment.
    let (listed, environ, text) = proc_probe(|run| run["confine"] = json!("off"));
    assert!(listed > 5, "{text}");
    if rustix::process::geteuid().is_root() {
        assert!(environ >= 1, "the control reads the runner's environment as root: {text}");
    }
}

#[test]
fn a_cli_installed_under_a_home_does_not_open_the_home() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path().canonicalize().unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    let package = home.join("node_modules/fake-cli/bin");
    super::fixture::fake_cli(&package.join("cli"));
    std::fs::create_dir_all(home.join("node_modules/.bin")).unwrap();
    std::os::unix::fs::symlink(package.join("cli"), home.join("node_modules/.bin/fake-cli"))
        .unwrap();
    let probe = format!(
        "cat '{key}' > /dev/null 2>&1 && echo key=read || echo key=denied\n\
         ls '{home}' > /dev/null 2>&1 && echo home=listed || echo home=denied\n\
         '{cli}' --version > /dev/null 2>&1 && echo cli=ran || echo cli=denied\n",
        key = home.join(".ssh/id_ed25519").display(),
        home = home.display(),
        cli = home.join("node_modules/.bin/fake-cli").display(),
    );
    let cli = home.join("node_modules/.bin/fake-cli");
    let (fx, child) = start_probe(&probe, &marker("home"), |run| run["cli"] = json!(cli));
    wait_until(LIMIT, "the RESULT", || !fx.broker.calls_of("message.send").is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = fx.broker.calls_of("message.send")[0].args["text"].as_str().unwrap().to_owned();
    assert!(text.contains("key=denied"), "{text}");
    assert!(text.contains("home=denied"), "{text}");
    assert!(text.contains("cli=ran"), "the CLI itself runs: {text}");
    // The runner logs the grant: the node_modules, not the home.
    let log = stderr(&output);
    assert!(log.contains(&format!("read+exec {}/node_modules,", home.display())), "{log}");
}

/// Listeners outside the sandbox, on the machine's loopback: TCP and UDP over IPv4 and IPv6.
struct Targets {
    tcp4: std::net::TcpListener,
    tcp6: std::net::TcpListener,
    udp4: std::net::UdpSocket,
    udp6: std::net::UdpSocket,
}

impl Targets {
    fn new() -> Targets {
        let tcp4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp6 = std::net::TcpListener::bind("[::1]:0").unwrap();
        let udp4 = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp6 = std::net::UdpSocket::bind("[::1]:0").unwrap();
        for listener in [&tcp4, &tcp6] {
            listener.set_nonblocking(true).unwrap();
        }
        for socket in [&udp4, &udp6] {
            socket.set_nonblocking(true).unwrap();
        }
        Targets { tcp4, tcp6, udp4, udp6 }
    }

    /// The attack, in Python from a bash call: connect, TCP Fast Open (`sendto` with
    /// MSG_FASTOPEN, which never passes a connect hook) and UDP, to each target.
    fn probe(&self) -> String {
        let port = |address: std::net::SocketAddr| address.port();
        format!(
            r#"/usr/bin/python3 - <<'PY'
import socket
def tcp(family, address):
    s = socket.socket(family, socket.SOCK_STREAM); s.settimeout(3); s.connect(address); s.sendall(b"leak-tcp"); s.close()
def tfo(family, address):
    s = socket.socket(family, socket.SOCK_STREAM); s.settimeout(3); s.sendto(b"leak-tfo", socket.MSG_FASTOPEN, address); s.close()
def udp(family, address):
    s = socket.socket(family, socket.SOCK_DGRAM); s.sendto(b"leak-udp", address); s.close()
for name, attack, family, address in [
    ("tcp4", tcp, socket.AF_INET, ("127.0.0.1", {tcp4})),
    ("tcp6", tcp, socket.AF_INET6, ("::1", {tcp6})),
    ("tfo4", tfo, socket.AF_INET, ("127.0.0.1", {tcp4})),
    ("tfo6", tfo, socket.AF_INET6, ("::1", {tcp6})),
    ("udp4", udp, socket.AF_INET, ("127.0.0.1", {udp4})),
    ("udp6", udp, socket.AF_INET6, ("::1", {udp6})),
]:
    try:
        attack(family, address); print(name + "=sent")
    except Exception as error:
        print(name + "=failed " + type(error).__name__)
PY
"#,
            tcp4 = port(self.tcp4.local_addr().unwrap()),
            tcp6 = port(self.tcp6.local_addr().unwrap()),
            udp4 = port(self.udp4.local_addr().unwrap()),
            udp6 = port(self.udp6.local_addr().unwrap()),
        )
    }

    /// What arrived: one name per connection or datagram.
    fn arrived(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (name, listener) in [("tcp4", &self.tcp4), ("tcp6", &self.tcp6)] {
            while let Ok((mut stream, _)) = listener.accept() {
                let mut bytes = Vec::new();
                stream.set_nonblocking(false).unwrap();
                stream.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let _ = std::io::Read::read_to_end(&mut stream, &mut bytes);
                found.push(format!("{name}: {}", String::from_utf8_lossy(&bytes)));
            }
        }
        for (name, socket) in [("udp4", &self.udp4), ("udp6", &self.udp6)] {
            let mut buffer = [0u8; 64];
            while let Ok(read) = socket.recv(&mut buffer) {
                found.push(format!("{name}: {}", String::from_utf8_lossy(&buffer[..read])));
            }
        }
        found
    }
}

/// Runs the network probe in a turn with `edit` applied to run.json: the probe's lines, what
/// arrived, and the runner's log.
fn network_probe(edit: impl FnOnce(&mut Value)) -> (String, Vec<String>, String) {
    let targets = Targets::new();
    let (fx, child) = start_probe(&targets.probe(), &marker("net"), edit);
    wait_until(LIMIT, "the RESULT", || !fx.broker.calls_of("message.send").is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = fx.broker.calls_of("message.send")[0].args["text"].as_str().unwrap().to_owned();
    std::thread::sleep(Duration::from_millis(200));
    (text, targets.arrived(), stderr(&output))
}

#[test]
fn tcp_fast_open_and_udp_to_the_machine_arrive_nowhere() {
    let (text, arrived, log) = network_probe(|_| {});
    assert!(arrived.is_empty(), "arrived from the default sandbox: {arrived:?}\n{text}");
    assert!(text.contains("tcp4=failed") && text.contains("udp4="), "{text}");
    assert!(log.contains("net (loopback only)"), "{log}");
    // An egress list that does not name them changes nothing.
    let (text, arrived, _) = network_probe(|run| run["egress"] = json!(["example.invalid:443"]));
    assert!(arrived.is_empty(), "arrived with an egress list: {arrived:?}\n{text}");
    // The control: with "egress": "open" the same probe reaches every one of them.
    let (text, arrived, _) = network_probe(|run| run["egress"] = json!("open"));
    for name in ["tcp4", "tcp6", "udp4", "udp6"] {
        assert!(arrived.iter().any(|line| line.starts_with(name)), "{name}: {arrived:?}\n{text}");
    }
}

/// Asks the turn's proxy for `target` (CONNECT) and prints its status line and body.
fn proxy_probe(target: &str) -> String {
    format!(
        r#"/usr/bin/python3 - <<'PY'
import os, socket, urllib.parse
proxy = urllib.parse.urlparse(os.environ["HTTPS_PROXY"])
s = socket.create_connection((proxy.hostname, proxy.port), timeout=10)
s.sendall(b"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")
reply = b""
while True:
    chunk = s.recv(4096)
    if not chunk:
        break
    reply += chunk
print(reply.decode(errors="replace"))
PY
"#
    )
}

#[test]
fn the_proxy_refuses_a_host_off_the_allowlist_with_a_readable_error() {
    let (fx, child) = start_probe(&proxy_probe("example.com:443"), &marker("proxy"), |_| {});
    wait_until(LIMIT, "the RESULT", || !fx.broker.calls_of("message.send").is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    let text = fx.broker.calls_of("message.send")[0].args["text"].as_str().unwrap().to_owned();
    assert!(text.starts_with("HTTP/1.1 403 Forbidden"), "{text}\n{}", stderr(&output));
    assert!(
        text.contains("example.com:443 is not on this session's egress allowlist"),
        "the model reads why: {text}"
    );
    assert!(stderr(&output).contains("egress refused: example.com:443"), "{}", stderr(&output));
}

#[test]
fn an_egress_entry_is_reached_in_place_and_through_the_proxy() {
    let target = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = target.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let mut served = 0;
        for stream in target.incoming().take(2) {
            let mut stream = stream.unwrap();
            std::io::Write::write_all(&mut stream, b"hello from outside\n").unwrap();
            served += 1;
        }
        served
    });
    let probe = format!(
        "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && head -n 1 <&3' | sed 's/^/direct: /'\n{}",
        proxy_probe(&format!("127.0.0.1:{port}"))
    );
    let (fx, child) = start_probe(&probe, &marker("entry"), |run| {
        run["egress"] = json!([format!("127.0.0.1:{port}")]);
    });
    wait_until(LIMIT, "the RESULT", || !fx.broker.calls_of("message.send").is_empty());
    terminate(&child);
    let output = finish(child, LIMIT);
    let text = fx.broker.calls_of("message.send")[0].args["text"].as_str().unwrap().to_owned();
    assert!(text.contains("direct: hello from outside"), "{text}\n{}", stderr(&output));
    assert!(text.contains("HTTP/1.1 200 Connection established"), "{text}");
    assert_eq!(server.join().unwrap(), 2);
}

#[test]
fn without_a_network_namespace_tcp_fast_open_does_not_get_past_connect_ports() {
    // "egress": "open" leaves the machine's network, where Landlock's connect rule is the limit
    // and TCP Fast Open (no connect) would slip past it but for the seccomp filter.
    let (text, arrived, log) = network_probe(|run| {
        run["egress"] = json!("open");
        run["connectPorts"] = json!([9]);
    });
    let tcp: Vec<&String> = arrived.iter().filter(|line| line.starts_with("tcp")).collect();
    assert!(tcp.is_empty(), "a TCP connection arrived past connectPorts: {tcp:?}\n{text}");
    assert!(text.contains("tfo4=failed") && text.contains("tfo6=failed"), "{text}");
    assert!(log.contains("tcp-fast-open refused (seccomp)"), "{log}");
    // The control: unconfined, the same Fast Open arrives.
    let (text, arrived, _) = network_probe(|run| {
        run["egress"] = json!("open");
        run["confine"] = json!("off");
    });
    // (A Fast Open without a cookie is a plain handshake: the connection arrives, its data
    // may not.)
    let tcp4 = arrived.iter().filter(|line| line.starts_with("tcp4")).count();
    assert_eq!(tcp4, 2, "the connect and the Fast Open arrive: {arrived:?}\n{text}");
}

#[test]
fn with_confine_off_fork_chains_pile_no_zombie_under_the_runner() {
    // Unconfined, the chains' orphans are reparented to the runner (a child subreaper): it
    // reaps them as they come, not only in the sweep after the turn.
    let mark = marker("chains-off");
    let probe = format!(
        "{FORK_CHAINS}\necho started > \"$MOSAIC_SESSION_DIR/started\"\nexec sh -c 'sleep 300; :' \"$TEST_MARK\""
    );
    let (fx, child) = start_probe(&probe, &mark, |run| run["confine"] = json!("off"));
    wait_until(LIMIT, "the chains", || fx.run.join("session/started").is_file());
    std::thread::sleep(Duration::from_secs(2));
    let zombies = zombies_under(child.id()).len();
    terminate(&child);
    let output = finish(child, LIMIT);
    kill_marked(&mark);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(zombies < 100, "{zombies} zombies under the runner mid-turn");
}
