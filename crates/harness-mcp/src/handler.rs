//! The server itself: rmcp's [`ServerHandler`] over tools.json and the tool socket.

use std::borrow::Cow;
use std::sync::Arc;

use harness_tools::{ToolsFile, ToolsFileError};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverResult,
    Implementation, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::config::McpConfig;
use crate::socket_client;
use crate::transport::LineTransport;

/// The server's name in the MCP handshake; Claude Code shows its tools as `mcp__mosaic__NAME`.
pub const SERVER_NAME: &str = harness_contract::MCP_SERVER;

/// The protocol versions Claude Code 2.1.296 was seen to accept in `initialize` (docs/clis.md).
const VERSIONS: &[ProtocolVersion] =
    &[ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2025_06_18, ProtocolVersion::V_2024_11_05];

/// Why the server could not serve.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// tools.json could not be used.
    #[error(transparent)]
    Tools(#[from] ToolsFileError),
    /// The async runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The session could not start (no `initialize` before stdin closed, or stdout failed).
    #[error("the MCP session did not start: {0}")]
    Session(String),
}

/// The typed tools of one session, served over MCP.
#[derive(Debug, Clone)]
pub struct MosaicServer {
    tools: Arc<Vec<Tool>>,
    config: Arc<McpConfig>,
}

impl MosaicServer {
    /// Reads tools.json and prepares the tool list.
    pub fn new(config: McpConfig) -> Result<Self, McpError> {
        let file = ToolsFile::load(&config.tools_json)?;
        let tools = file
            .tools
            .into_iter()
            .map(|entry| {
                let schema = match entry.input_schema {
                    Value::Object(schema) => schema,
                    // tools.json comes from the bundle; a schema that is not an object still
                    // lists the tool, and the tool socket checks every call anyway.
                    _ => serde_json::Map::new(),
                };
                Tool::new(entry.name, entry.description, schema)
            })
            .collect();
        Ok(Self { tools: Arc::new(tools), config: Arc::new(config) })
    }
}

impl ServerHandler for MosaicServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info.server_info = Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION"));
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(VERSIONS)
    }

    /// Claude Code 2.1.296 opens with `server/discover`; an error at once sends it on to
    /// `initialize`, the handshake docs/clis.md recorded, where no answer would cost 2.5 s.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(ErrorData::method_not_found::<rmcp::model::DiscoverRequestMethod>())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.map_or(Value::Null, Value::Object);
        let started = std::time::Instant::now();
        let answer = socket_client::call(
            &self.config.tool_socket,
            &request.name,
            args,
            self.config.call_timeout,
        )
        .await;
        // The tool's name and the outcome only, never the arguments or the reply's text. The
        // name is the model's choice: one tools.json does not list is logged by its length.
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let outcome = if answer.is_error { "error" } else { "ok" };
        if self.tools.iter().any(|tool| tool.name == request.name) {
            tracing::info!(tool = %request.name, outcome, duration_ms, "tool call");
        } else {
            let name_bytes = request.name.len();
            tracing::warn!(name_bytes, outcome, duration_ms, "tool call to a tool not listed");
        }
        let content = vec![ContentBlock::text(answer.text)];
        let result = if answer.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        Ok(result.into())
    }
}

/// Serves `config` on stdin and stdout until stdin closes.
pub fn serve(config: McpConfig) -> Result<(), McpError> {
    let server = MosaicServer::new(config)?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        tools_json = %server.config.tools_json.display(),
        tool_socket = %server.config.tool_socket.display(),
        tools = server.tools.len(),
        "harness-mcp serving on stdio"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(McpError::Runtime)?;
    let result = runtime.block_on(serve_on(server, tokio::io::stdin(), tokio::io::stdout()));
    if result.is_ok() {
        tracing::info!("stdin closed; harness-mcp exits");
    }
    result
}

/// Serves `server` on `reader` and `writer` until the reader ends.
pub async fn serve_on<R, W>(server: MosaicServer, reader: R, writer: W) -> Result<(), McpError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let transport = LineTransport::new(reader, writer);
    let running = rmcp::serve_server(server, transport)
        .await
        .map_err(|error| McpError::Session(error.to_string()))?;
    running.waiting().await.map_err(|error| McpError::Session(error.to_string()))?;
    Ok(())
}
