//! harness-mcp (the binary): the MCP handshake as Claude Code 2.1.296 makes it, malformed input,
//! and the typed tools inside the real Claude Code, through the tool socket to a scripted broker.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

mod suite;
