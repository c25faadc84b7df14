//! `LineTransport` on in-memory pipes.

use std::time::Duration;

use harness_mcp::LineTransport;
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

type Pipes = (LineTransport<DuplexStream, DuplexStream>, DuplexStream, BufReader<DuplexStream>);

/// A transport reading what the test writes to the first stream and writing what the test
/// reads from the second.
fn pipes() -> Pipes {
    let (client_in, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, client_out) = tokio::io::duplex(1 << 16);
    (LineTransport::new(server_in, server_out), client_in, BufReader::new(client_out))
}

async fn next_reply(out: &mut BufReader<DuplexStream>) -> Value {
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(5), out.read_line(&mut line)).await.unwrap().unwrap();
    serde_json::from_str(&line).unwrap()
}

const LIST: &str = r#"{"method":"tools/list","jsonrpc":"2.0","id":1}"#;
const INITIALIZE: &str = r#"{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}},"jsonrpc":"2.0","id":0}"#;

#[test]
fn a_read_dropped_mid_line_loses_nothing() {
    runtime().block_on(async {
        let (mut transport, mut input, _out) = pipes();
        let writer = tokio::spawn(async move {
            for byte in INITIALIZE.bytes().chain(*b"\n") {
                input.write_all(&[byte]).await.unwrap();
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            input
        });
        // rmcp drops `receive` whenever another branch of its select! is ready; do the same,
        // many times mid-line.
        let mut dropped = 0;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let message = loop {
            assert!(tokio::time::Instant::now() < deadline, "the line never arrived whole");
            match tokio::time::timeout(Duration::from_micros(300), transport.receive()).await {
                Ok(message) => break message.unwrap(),
                Err(_) => dropped += 1,
            }
        };
        assert!(dropped > 10, "the read was dropped only {dropped} times");
        let value = serde_json::to_value(&message).unwrap();
        assert_eq!(value["method"], "initialize", "{value}");
        drop(writer.await.unwrap());
    });
}

#[test]
fn malformed_lines_are_answered_and_the_next_request_still_arrives() {
    runtime().block_on(async {
        let (mut transport, mut input, mut out) = pipes();
        let lines = [
            "{not json",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            INITIALIZE,
            r#"{"jsonrpc":"2.0","id":9}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":5}"#,
            LIST,
        ];
        for line in lines {
            input.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        }
        let first = transport.receive().await.unwrap();
        assert_eq!(serde_json::to_value(&first).unwrap()["method"], "initialize");
        let second = transport.receive().await.unwrap();
        assert_eq!(serde_json::to_value(&second).unwrap()["method"], "tools/list");
        let mut codes = Vec::new();
        for _ in 0..3 {
            let reply = next_reply(&mut out).await;
            codes.push((reply["id"].clone(), reply["error"]["code"].as_i64().unwrap()));
        }
        codes.sort_by_key(|(_, code)| *code);
        assert_eq!(
            codes,
            [(Value::Null, -32700), (Value::from(5), -32602), (Value::from(9), -32600)],
            "the notification before initialize is dropped without an answer"
        );
    });
}
