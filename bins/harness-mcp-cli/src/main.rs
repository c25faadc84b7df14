//! harness-mcp: the MCP stdio server Claude Code starts for a session's typed tools.
//!
//! Usage: `harness-mcp [--tools TOOLS_JSON] [--socket TOOLS_SOCK]`; without them it reads
//! `$MOSAIC_BUNDLE/tools.json` and `$MOSAIC_TOOLS_SOCK`. Exit 0 when stdin closes, 2 on a bad
//! command line or tools.json, 1 when the session fails or anything panics. stdout carries only
//! the protocol.

#![deny(clippy::print_stdout)]

use std::process::ExitCode;

fn main() -> ExitCode {
    // A panic anywhere ends the server with exit 1 (docs/reliability.md): tokio would otherwise
    // catch a panic in a request's task and leave that request unanswered, with Claude Code
    // waiting 60 s on a server that looks alive.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("harness-mcp: panicked: {} (exit 1)", info.to_string().replace('\n', " "));
        std::process::exit(1);
    }));
    let config = match harness_mcp::McpConfig::from_args(std::env::args_os().skip(1), |key| {
        std::env::var_os(key)
    }) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("harness-mcp: {error}");
            return ExitCode::from(2);
        }
    };
    harness_mcp::panic_for_test();
    match harness_mcp::serve(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error @ harness_mcp::McpError::Tools(_)) => {
            eprintln!("harness-mcp: {error}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("harness-mcp: {error}");
            ExitCode::FAILURE
        }
    }
}
