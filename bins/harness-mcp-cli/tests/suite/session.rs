//! A tool socket with a scripted broker behind it, and the bundle's tools.json, for one test.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use harness_bus::{
    Backends, BrokerConfig, Capability, RunningToolSocket, ToolSocket, ToolSocketConfig, UnixBroker,
};
use harness_testkit::{ScriptedBroker, workspace_root};
use harness_tools::{ResolvedInstance, tools_for};

/// The capability the test's runner holds; it must never reach the model or the MCP server.
pub(crate) const CAP: &str = "cap-mcp-test-5f1e";

/// Fields drop in order: the socket first, then the broker, then the directory.
pub(crate) struct Session {
    pub(crate) socket: RunningToolSocket,
    pub(crate) broker: ScriptedBroker,
    pub(crate) dir: tempfile::TempDir,
}

impl Session {
    /// A run directory holding `bundle/tools.json` for `fixtures/resolved/FIXTURE.json` and a
    /// tool socket serving it, forwarding to a scripted broker.
    pub(crate) fn start(fixture: &str) -> Self {
        let dir = tempfile::Builder::new().prefix("harness-run-").tempdir().unwrap();
        let resolved = ResolvedInstance::load(
            workspace_root().join(format!("fixtures/resolved/{fixture}.json")).as_std_path(),
        )
        .unwrap();
        let tools = tools_for(&resolved);
        std::fs::create_dir(dir.path().join("bundle")).unwrap();
        std::fs::write(dir.path().join("bundle/tools.json"), tools.to_json()).unwrap();
        let broker = ScriptedBroker::start().unwrap();
        let client = UnixBroker::new(BrokerConfig {
            socket: broker.socket().to_owned(),
            timeout: Duration::from_secs(10),
        });
        let socket = ToolSocket::bind(ToolSocketConfig {
            path: dir.path().join("tools.sock"),
            tools,
            capability: Capability::new(CAP).unwrap(),
            backends: Backends::broker_only(Arc::new(client)),
        })
        .unwrap()
        .spawn()
        .unwrap();
        Self { socket, broker, dir }
    }

    pub(crate) fn bundle(&self) -> PathBuf {
        self.dir.path().join("bundle")
    }

    pub(crate) fn tools_sock(&self) -> &Path {
        self.socket.path()
    }
}

pub(crate) fn mcp_binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_harness-mcp"))
}
