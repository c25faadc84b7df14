//! Where the server finds tools.json and the tool socket: `--tools PATH` and `--socket PATH`,
//! or else `$MOSAIC_BUNDLE/tools.json` and `$MOSAIC_TOOLS_SOCK`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use harness_contract::AdapterEnv;

/// The environment variable naming the bundle directory (tools.json is in it).
pub const BUNDLE_ENV: &str = AdapterEnv::Bundle.name();
/// The environment variable naming the tool socket.
pub const SOCKET_ENV: &str = AdapterEnv::ToolsSock.name();

/// How long one tool call may wait for the tool socket's reply (the spec's callTool limit).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// What the server serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfig {
    /// The bundle's tools.json.
    pub tools_json: PathBuf,
    /// The runner's tool socket.
    pub tool_socket: PathBuf,
    /// How long one call may wait for its reply.
    pub call_timeout: Duration,
}

/// Why the command line and environment name no usable configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// An argument this server does not take.
    #[error(
        "unknown argument {0:?}; usage: harness-mcp [--tools TOOLS_JSON] [--socket TOOLS_SOCK]"
    )]
    Unknown(String),
    /// An option without its value.
    #[error("{0} needs a value")]
    MissingValue(&'static str),
    /// Neither `--tools` nor `MOSAIC_BUNDLE`.
    #[error("no tools.json: pass --tools PATH or set MOSAIC_BUNDLE")]
    NoTools,
    /// Neither `--socket` nor `MOSAIC_TOOLS_SOCK`.
    #[error("no tool socket: pass --socket PATH or set MOSAIC_TOOLS_SOCK")]
    NoSocket,
}

impl McpConfig {
    /// Builds the configuration from the arguments after the program name and a lookup of the
    /// environment; arguments win over the environment.
    pub fn from_args(
        args: impl IntoIterator<Item = OsString>,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Self, ConfigError> {
        let (mut tools, mut socket) = (None, None);
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.to_str() {
                Some("--tools") => {
                    tools = Some(PathBuf::from(
                        args.next().ok_or(ConfigError::MissingValue("--tools"))?,
                    ));
                }
                Some("--socket") => {
                    socket = Some(PathBuf::from(
                        args.next().ok_or(ConfigError::MissingValue("--socket"))?,
                    ));
                }
                _ => return Err(ConfigError::Unknown(arg.to_string_lossy().into_owned())),
            }
        }
        let tools_json = tools
            .or_else(|| env(BUNDLE_ENV).map(|bundle| PathBuf::from(bundle).join("tools.json")))
            .ok_or(ConfigError::NoTools)?;
        let tool_socket =
            socket.or_else(|| env(SOCKET_ENV).map(PathBuf::from)).ok_or(ConfigError::NoSocket)?;
        Ok(Self { tools_json, tool_socket, call_timeout: CALL_TIMEOUT })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str], env: &[(&str, &str)]) -> Result<McpConfig, ConfigError> {
        let env: Vec<(String, OsString)> =
            env.iter().map(|(k, v)| ((*k).to_owned(), OsString::from(v))).collect();
        McpConfig::from_args(args.iter().map(OsString::from), |key| {
            env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn arguments_win_over_the_environment() {
        let env = [(BUNDLE_ENV, "/run/bundle"), (SOCKET_ENV, "/run/tools.sock")];
        let from_env = config(&[], &env).unwrap();
        assert_eq!(from_env.tools_json, PathBuf::from("/run/bundle/tools.json"));
        assert_eq!(from_env.tool_socket, PathBuf::from("/run/tools.sock"));
        let from_args = config(&["--tools", "/t.json", "--socket", "/s"], &env).unwrap();
        assert_eq!((from_args.tools_json, from_args.tool_socket), ("/t.json".into(), "/s".into()));
        assert_eq!(config(&[], &[]), Err(ConfigError::NoTools));
        assert_eq!(config(&["--tools", "/t"], &[]), Err(ConfigError::NoSocket));
        assert_eq!(config(&["--tools"], &[]), Err(ConfigError::MissingValue("--tools")));
        assert_eq!(config(&["-v"], &[]), Err(ConfigError::Unknown("-v".into())));
    }
}
