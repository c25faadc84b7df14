//! harness-mcp: the MCP stdio server Claude Code starts for a session's typed tools.
//!
//! Usage: `harness-mcp [--tools TOOLS_JSON] [--socket TOOLS_SOCK]`; without them it reads
//! `$MOSAIC_BUNDLE/tools.json` and `$MOSAIC_TOOLS_SOCK`. Exit 0 when stdin closes, 2 on a bad
//! command line or tools.json, 1 when the session fails. stdout carries only the protocol.

#![deny(clippy::print_stdout)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let config = match harness_mcp::McpConfig::from_args(std::env::args_os().skip(1), |key| {
        std::env::var_os(key)
    }) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("harness-mcp: {error}");
            return ExitCode::from(2);
        }
    };
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
