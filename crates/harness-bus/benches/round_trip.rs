//! The tool socket's cost per call, in the release profile: one client connection makes call after
//! call of list_tasks through the socket to the scripted broker, alternating with the same call
//! made straight to the broker with the broker client (the floor); then 64 clients at once.
//!
//! The floor is interleaved call by call, which a statistics harness such as criterion does not do,
//! so this bench times by hand. Prints a Markdown report and a `bench-row` line per target for
//! `cargo xtask bench`. Targets: a round trip of at most 200 µs, no error among 64 clients.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a benchmark fails loudly")]
#![allow(clippy::print_stdout, reason = "the result line is the benchmark's output")]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_benchkit::{Row, Unit};
use harness_bus::{
    Backends, Broker, BrokerConfig, Capability, ToolSocket, ToolSocketConfig, UnixBroker,
};
use harness_testkit::{BrokerAnswer, ScriptedBroker};
use harness_tools::{ToolEntry, ToolReply, ToolsFile, Verb, tool};
use serde_json::json;

const WARMUP: usize = 200;
const CALLS: usize = 5000;
const CLIENTS: usize = 64;
const CALLS_PER_CLIENT: usize = 50;
const REQUEST: &[u8] = b"{\"tool\":\"list_tasks\",\"args\":{}}\n";

fn client(broker: &ScriptedBroker) -> UnixBroker {
    UnixBroker::new(BrokerConfig {
        socket: broker.socket().to_owned(),
        timeout: Duration::from_secs(10),
    })
}

fn call(
    stream: &mut UnixStream,
    reader: &mut BufReader<UnixStream>,
    line: &mut String,
) -> ToolReply {
    stream.write_all(REQUEST).unwrap();
    line.clear();
    reader.read_line(line).unwrap();
    serde_json::from_str(line).unwrap()
}

fn quantile(values: &mut [Duration], q: f64) -> f64 {
    values.sort();
    let rank = (q * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1].as_secs_f64() * 1e6
}

fn main() {
    let broker = ScriptedBroker::start().unwrap();
    let tasks: Vec<_> = (1..=20)
        .map(|n| json!({"ref": format!("T-{n}"), "title": format!("Task number {n}")}))
        .collect();
    broker.answer("tasks", BrokerAnswer::result(json!({"tasks": tasks, "total": 20})));
    let dir = tempfile::tempdir().unwrap();
    let socket = ToolSocket::bind(ToolSocketConfig {
        path: dir.path().join("tools.sock"),
        tools: ToolsFile {
            tools: vec![ToolEntry::from_def(tool("list_tasks").unwrap())],
            projects: vec![],
        },
        capability: Capability::new("cap-bench").unwrap(),
        backends: Backends::broker_only(Arc::new(client(&broker))),
    })
    .unwrap()
    .spawn()
    .unwrap();

    let mut stream = UnixStream::connect(socket.path()).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    let direct = client(&broker);
    let cap = Capability::new("cap-bench").unwrap();
    let args = json!({"done": false, "limit": 50, "descriptions": false});
    let (mut through, mut straight) = (Vec::new(), Vec::new());
    for n in 0..WARMUP + CALLS {
        let started = Instant::now();
        let reply = call(&mut stream, &mut reader, &mut line);
        let took = started.elapsed();
        assert!(reply.ok, "{}", reply.text);
        let started = Instant::now();
        direct.call(&cap, Verb::Tasks, &args).unwrap();
        let direct_took = started.elapsed();
        if n >= WARMUP {
            through.push(took);
            straight.push(direct_took);
        }
    }

    let path = socket.path().to_owned();
    let started = Instant::now();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                let Ok(mut stream) = UnixStream::connect(&path) else { return CALLS_PER_CLIENT };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                (0..CALLS_PER_CLIENT)
                    .filter(|_| !call(&mut stream, &mut reader, &mut line).ok)
                    .count()
            })
        })
        .collect();
    let errors: usize = threads.into_iter().map(|t| t.join().unwrap_or(CALLS_PER_CLIENT)).sum();
    let wall = started.elapsed();
    let (median, p90) = (quantile(&mut through, 0.5), quantile(&mut through, 0.9));
    let (direct_median, direct_p90) = (quantile(&mut straight, 0.5), quantile(&mut straight, 0.9));
    let calls = CLIENTS * CALLS_PER_CLIENT;
    let wall_ms = wall.as_secs_f64() * 1e3;
    println!(
        "{CALLS} round trips each through the socket and straight to the broker, alternating, \
         after {WARMUP} warm-up ones, in the release profile.\n\n\
         | benchmark | median | p90 |\n| --- | ---: | ---: |\n\
         | list_tasks: client → tool socket → scripted broker → client | {median:.1} µs | {p90:.1} µs |\n\
         | the same call, broker client straight to the broker (floor) | {direct_median:.1} µs | {direct_p90:.1} µs |\n\
         | {CLIENTS} clients at once × {CALLS_PER_CLIENT} calls each | {calls} calls in {wall_ms:.1} ms, {errors} errors | |\n\n\
         One client connection sends `{{\"tool\":\"list_tasks\",\"args\":{{}}}}` and reads the reply; \
         the socket checks the name and arguments, the broker client opens a connection to the \
         scripted broker (a thread per connection), and the reply (20 tasks) comes back. The \
         difference from the floor is what the tool socket adds."
    );
    let floor = Some(("the broker straight", direct_median));
    println!(
        "{}",
        Row::at_most(("tools", "tool-socket round trip"), Unit::Us, median, floor, 200.0)
    );
    let clients = ("tools", "64 concurrent clients × 50 calls");
    let outcome = format!("{errors} errors");
    println!(
        "{}",
        Row::check(clients, format!("{wall_ms:.1} ms"), outcome, "no error", errors == 0)
    );
    drop(socket);
}
