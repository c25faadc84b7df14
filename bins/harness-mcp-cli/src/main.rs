//! harness-mcp: the MCP stdio server Claude Code starts for a session's typed tools.
//!
//! Usage: `harness-mcp [--tools TOOLS_JSON] [--socket TOOLS_SOCK]`; without them it reads
//! `$MOSAIC_BUNDLE/tools.json` and `$MOSAIC_TOOLS_SOCK`. Exit 0 when stdin closes, 2 on a bad
//! command line or tools.json, 1 when the session fails or anything panics. stdout carries only
//! the protocol. Logs go to stderr through `tracing`, as the runner's do (docs/runner.md, "Logs").

#![deny(clippy::print_stdout)]

use std::process::ExitCode;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, fmt};

const HELP: &str = "\
harness-mcp: the MCP stdio server (server name mosaic) Claude Code starts for a session's typed
tools. It lists tools.json's tools and forwards every tools/call to the runner's tool socket.

usage: harness-mcp [--tools TOOLS_JSON] [--socket TOOLS_SOCK]
       harness-mcp --help | --version

Without --tools it reads $MOSAIC_BUNDLE/tools.json; without --socket, $MOSAIC_TOOLS_SOCK.
stdout carries only the protocol (newline-delimited JSON-RPC); diagnostics go to stderr.

exit status: 0 when stdin closes, 2 on a bad command line or tools.json, 1 when the session
fails or anything panics.

Logs go to stderr: human-readable lines, or JSON lines with HARNESS_LOG_FORMAT=json; the level
from HARNESS_LOG (off, error, warn, info, debug, trace; default info). They name each call's tool
and outcome, never its arguments or reply.";

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let [arg] = args.as_slice() {
        // Before anything is served: stdout is the protocol only when serving.
        #[expect(
            clippy::print_stdout,
            reason = "--help and --version answer on stdout, not serving"
        )]
        if arg == "--help" || arg == "-h" {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        } else if arg == "--version" || arg == "-V" {
            println!("harness-mcp {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
    }
    init_logging();
    // A panic anywhere ends the server with exit 1 (docs/reliability.md): tokio would otherwise
    // catch a panic in a request's task and leave that request unanswered, with Claude Code
    // waiting 60 s on a server that looks alive.
    std::panic::set_hook(Box::new(|info| {
        tracing::error!(
            exit_code = 1,
            "panicked: {} (exit 1)",
            info.to_string().replace('\n', " ")
        );
        std::process::exit(1);
    }));
    let config = match harness_mcp::McpConfig::from_args(args, |key| std::env::var_os(key)) {
        Ok(config) => config,
        Err(error) => {
            tracing::error!(exit_code = 2, "{error}");
            return ExitCode::from(2);
        }
    };
    harness_mcp::panic_for_test();
    match harness_mcp::serve(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error @ harness_mcp::McpError::Tools(_)) => {
            tracing::error!(exit_code = 2, "{error}");
            ExitCode::from(2)
        }
        Err(error) => {
            tracing::error!(exit_code = 1, "{error}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr as the runner does: the level from `HARNESS_LOG` (info by default), JSON lines
/// when `HARNESS_LOG_FORMAT=json`. Only the harness crates' events pass, so rmcp's own logs,
/// which may carry a request's arguments, never reach stderr.
fn init_logging() {
    let level = std::env::var("HARNESS_LOG")
        .ok()
        .and_then(|value| value.trim().parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    let filter = Targets::new().with_target("harness", level);
    let layer = fmt::layer().with_writer(std::io::stderr);
    let layer = if std::env::var_os("HARNESS_LOG_FORMAT").is_some_and(|format| format == "json") {
        layer.json().flatten_event(true).with_filter(filter).boxed()
    } else {
        layer.with_filter(filter).boxed()
    };
    tracing_subscriber::registry().with(layer).init();
}
