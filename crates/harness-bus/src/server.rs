//! The tool socket (docs/contracts.md, contract 5), as a component the runner hosts.
//!
//! [`ToolSocket::bind`] creates `RUN/tools.sock` so that it is never reachable with a mode wider
//! than 0600: the socket is bound inside a fresh 0700 directory next to it, set to 0600, checked,
//! and only then renamed into place. [`ToolSocket::spawn`] serves it on a thread per connection:
//! each line is one call, checked against the session's tools.json and the catalogue's argument
//! rules, then forwarded over its route with the capability this component holds and the client
//! never sees. A malformed line gets an error reply and the connection stays open; an oversized
//! line gets an error and the connection is closed; a client that hangs up mid-line is dropped;
//! none of these touch any other connection.

use std::fs::{self, DirBuilder};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::Value;

use harness_tools::{
    MAX_REQUEST_BYTES, Route, ToolDef, ToolErrorKind, ToolReply, ToolRequest, ToolsFile,
    prepare_args, reply_text, shape_result,
};

use crate::broker::{Broker, BrokerError, RefusalCode};
use crate::capability::Capability;

/// The most connections served at once; one more is told `busy` and closed.
const MAX_CONNECTIONS: usize = 256;
/// How long a connection may sit idle between calls before it is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// A route other than the broker's: the host's launch socket or its git socket.
pub trait Backend: Send + Sync {
    /// Carries out one call of `tool` with checked `args`, authorised by `cap`.
    fn call(&self, cap: &Capability, tool: &ToolDef, args: &Value) -> Result<Value, BackendError>;
}

/// Why a backend gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The host refused the call with this code.
    #[error("refused: {0}")]
    Refused(RefusalCode),
    /// This runner does not serve the route.
    #[error(
        "refused: not-available ({tool} goes to the host's {route} socket, which this session was not given)"
    )]
    NotAvailable {
        /// The tool.
        tool: String,
        /// `launch` or `git`.
        route: &'static str,
    },
    /// The call failed.
    #[error("failed: {0}")]
    Failed(String),
}

/// The backend of a route whose host socket the session was not given: every call is
/// `not-available`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NotAvailable;

impl Backend for NotAvailable {
    fn call(&self, _: &Capability, tool: &ToolDef, _: &Value) -> Result<Value, BackendError> {
        Err(BackendError::NotAvailable { tool: tool.name.to_owned(), route: tool.route.name() })
    }
}

/// Where each route's calls go.
#[derive(Clone)]
pub struct Backends {
    /// The broker.
    pub broker: Arc<dyn Broker>,
    /// The host's launch socket.
    pub launch: Arc<dyn Backend>,
    /// The host's git socket.
    pub git: Arc<dyn Backend>,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends").finish_non_exhaustive()
    }
}

impl Backends {
    /// The broker route to `broker`; launch and git not available.
    pub fn broker_only(broker: Arc<dyn Broker>) -> Self {
        Self { broker, launch: Arc::new(NotAvailable), git: Arc::new(NotAvailable) }
    }
}

/// What the tool socket serves.
#[derive(Debug)]
pub struct ToolSocketConfig {
    /// Where to bind (`RUN/tools.sock`); its directory must exist.
    pub path: PathBuf,
    /// The session's tools.json.
    pub tools: ToolsFile,
    /// The capability calls are forwarded with.
    pub capability: Capability,
    /// Where each route goes.
    pub backends: Backends,
}

/// Why the tool socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Something other than a socket is at the path.
    #[error("{0} exists and is not a socket; the tool socket will not replace it")]
    NotASocket(PathBuf),
    /// A live socket is at the path: another process accepts connections on it.
    #[error("{0} is a live socket another process serves; the tool socket will not take it over")]
    InUse(PathBuf),
    /// A step of binding failed.
    #[error("cannot bind the tool socket at {path}: {what}: {source}")]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The step.
        what: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The socket did not end up as a 0600 socket.
    #[error("the tool socket at {path} has mode {mode:o}, not 0600")]
    Mode {
        /// The socket path.
        path: PathBuf,
        /// What it had.
        mode: u32,
    },
}

struct Shared {
    tools: ToolsFile,
    capability: Capability,
    backends: Backends,
    connections: AtomicUsize,
}

/// A bound tool socket, not yet serving. Dropping it (unspawned) removes the socket file.
pub struct ToolSocket {
    listener: UnixListener,
    path: PathBuf,
    /// The bound socket's device and inode: only that file is ever removed.
    identity: (u64, u64),
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ToolSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSocket").field("path", &self.path).finish_non_exhaustive()
    }
}

/// A serving tool socket; [`RunningToolSocket::stop`] (or dropping it) stops accepting,
/// removes the socket file and waits for the accept thread. Connections already open finish
/// their current call.
#[derive(Debug)]
pub struct RunningToolSocket {
    path: PathBuf,
    identity: (u64, u64),
    /// The listener, shared with the accept thread, to wake it with `shutdown(2)`.
    waker: Option<UnixListener>,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ToolSocket {
    /// Binds `config.path` with mode 0600. A stale socket there (one nobody accepts on) is
    /// replaced; a live socket ([`ServerError::InUse`]) and anything that is not a socket
    /// ([`ServerError::NotASocket`]) are left alone and refused.
    pub fn bind(config: ToolSocketConfig) -> Result<Self, ServerError> {
        let ToolSocketConfig { path, tools, capability, backends } = config;
        let (listener, identity) = bind_private(&path)?;
        let shared =
            Arc::new(Shared { tools, capability, backends, connections: AtomicUsize::new(0) });
        Ok(Self { listener, path, identity, shared })
    }

    /// Returns the socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves on a background thread until stopped.
    pub fn spawn(self) -> io::Result<RunningToolSocket> {
        let stopping = Arc::new(AtomicBool::new(false));
        let path = self.path.clone();
        let identity = self.identity;
        let waker = self.listener.try_clone().ok();
        let thread = thread::Builder::new().name("tool-socket".into()).spawn({
            let stopping = stopping.clone();
            move || self.accept_loop(&stopping)
        })?;
        Ok(RunningToolSocket { path, identity, waker, stopping, thread: Some(thread) })
    }

    fn accept_loop(self, stopping: &AtomicBool) {
        for stream in self.listener.incoming() {
            if stopping.load(Ordering::SeqCst) {
                return;
            }
            let Ok(stream) = stream else {
                // An accept error (out of descriptors, say) is worth another try; the pause
                // keeps a persistent one from spinning a core.
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            let shared = self.shared.clone();
            if shared.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                shared.connections.fetch_sub(1, Ordering::SeqCst);
                let busy = ToolReply::failure(ToolErrorKind::Busy, "busy: too many connections");
                let _ = (&stream).write_all(busy.to_line().as_bytes());
                continue;
            }
            let spawned = thread::Builder::new().name("tool-call".into()).spawn({
                let shared = shared.clone();
                move || {
                    serve_connection(&shared, stream);
                    shared.connections.fetch_sub(1, Ordering::SeqCst);
                }
            });
            if spawned.is_err() {
                shared.connections.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

impl RunningToolSocket {
    /// Returns the socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops accepting, removes the socket file and waits for the accept thread.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        let Some(thread) = self.thread.take() else { return };
        self.stopping.store(true, Ordering::SeqCst);
        // Shutting the listener down wakes the blocked accept with an error on Linux, even when
        // the socket file is already gone; a connection is the fallback. Either way the accept
        // loop then sees the flag.
        let woken = self.waker.as_ref().is_some_and(|listener| {
            rustix::net::shutdown(listener, rustix::net::Shutdown::Read).is_ok()
        });
        if !woken {
            let _ = UnixStream::connect(&self.path);
        }
        let _ = thread.join();
        remove_if_ours(&self.path, self.identity);
    }
}

impl Drop for ToolSocket {
    fn drop(&mut self) {
        // Unspawned, or the accept loop ended: the socket file goes with the listener.
        remove_if_ours(&self.path, self.identity);
    }
}

/// Removes `path` if and only if it is still the socket this process bound (same device and
/// inode): a file someone else put there since is never deleted.
fn remove_if_ours(path: &Path, identity: (u64, u64)) {
    use std::os::unix::fs::MetadataExt;
    if let Ok(meta) = fs::symlink_metadata(path)
        && (meta.dev(), meta.ino()) == identity
    {
        let _ = fs::remove_file(path);
    }
}

/// What is at a socket path that exists.
enum Probe {
    /// Nobody accepts on it (`ECONNREFUSED`): a stale socket, safe to replace.
    Stale,
    /// Gone meanwhile.
    Gone,
    /// Someone accepts on it, or its backlog is full, or it cannot be told: left alone.
    Live,
}

/// Connects to the socket at `path` without blocking, to tell a stale socket from a live one.
fn probe(path: &Path) -> Probe {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let socket = match rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    ) {
        Ok(socket) => socket,
        Err(_) => return Probe::Live,
    };
    let address = match SocketAddrUnix::new(path) {
        Ok(address) => address,
        Err(_) => return Probe::Live,
    };
    match rustix::net::connect(&socket, &address) {
        Err(rustix::io::Errno::CONNREFUSED) => Probe::Stale,
        Err(rustix::io::Errno::NOENT) => Probe::Gone,
        Ok(()) | Err(_) => Probe::Live,
    }
}

impl Drop for RunningToolSocket {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Binds a listener at `path` that is never reachable with a mode wider than 0600; returns it
/// with the socket file's device and inode.
fn bind_private(path: &Path) -> Result<(UnixListener, (u64, u64)), ServerError> {
    use std::os::unix::fs::MetadataExt;
    let bind_error = |what| move |source| ServerError::Bind { path: path.to_owned(), what, source };
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => match probe(path) {
            Probe::Stale => {
                fs::remove_file(path).map_err(bind_error("removing a stale socket"))?;
            }
            Probe::Gone => {}
            Probe::Live => return Err(ServerError::InUse(path.to_owned())),
        },
        Ok(_) => return Err(ServerError::NotASocket(path.to_owned())),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(bind_error("looking at the path")(error)),
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // The process id and a counter make the name unique among this process's binds, and
    // `create` (not `create_dir_all`) fails rather than reuse a directory someone else made.
    static BINDS: AtomicUsize = AtomicUsize::new(0);
    let serial = BINDS.fetch_add(1, Ordering::Relaxed);
    let private = parent.join(format!(".tools-sock-{}-{serial}", std::process::id()));
    DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(bind_error("creating a 0700 directory"))?;
    let bound = (|| {
        let inner = private.join("s");
        let listener = UnixListener::bind(&inner).map_err(bind_error("bind"))?;
        fs::set_permissions(&inner, fs::Permissions::from_mode(0o600))
            .map_err(bind_error("setting mode 0600"))?;
        let mode = fs::symlink_metadata(&inner)
            .map_err(bind_error("checking the mode"))?
            .permissions()
            .mode()
            & 0o7777;
        if mode != 0o600 {
            return Err(ServerError::Mode { path: path.to_owned(), mode });
        }
        let meta = fs::symlink_metadata(&inner).map_err(bind_error("reading its identity"))?;
        // No replacing rename: something that appeared at the path meanwhile is left alone.
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            &inner,
            rustix::fs::CWD,
            path,
            rustix::fs::RenameFlags::NOREPLACE,
        )
        .map_err(|errno| bind_error("renaming into place")(errno.into()))?;
        Ok((listener, (meta.dev(), meta.ino())))
    })();
    let _ = fs::remove_dir_all(&private);
    bound
}

/// Serves one connection until it closes, errs, idles out or sends an oversized line.
fn serve_connection(shared: &Shared, stream: UnixStream) {
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IDLE_TIMEOUT));
    let mut reader = BufReader::new(&stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = MAX_REQUEST_BYTES as u64 + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") {
            if line.len() > MAX_REQUEST_BYTES {
                let reply = ToolReply::failure(
                    ToolErrorKind::RequestTooLarge,
                    format!("request-too-large: a request is at most {MAX_REQUEST_BYTES} bytes"),
                );
                let _ = (&stream).write_all(reply.to_line().as_bytes());
            }
            // Otherwise the client hung up mid-request: nothing to answer.
            return;
        }
        let reply = answer(shared, &line);
        if (&stream).write_all(reply.to_line().as_bytes()).is_err() {
            return;
        }
    }
}

/// Answers one request line.
fn answer(shared: &Shared, line: &[u8]) -> ToolReply {
    let request: ToolRequest = match serde_json::from_slice(line) {
        Ok(request) => request,
        Err(error) => {
            return ToolReply::failure(
                ToolErrorKind::BadRequest,
                format!(
                    "bad-request: not a tool request ({{\"tool\": NAME, \"args\": {{…}}}}): {error}"
                ),
            );
        }
    };
    let Some(tool) = shared.tools.get(&request.tool) else {
        return ToolReply::failure(
            ToolErrorKind::UnknownTool,
            format!(
                "unknown-tool: this session has no tool {:?}; its tools are {}",
                request.tool,
                shared.tools.names().join(", ")
            ),
        );
    };
    let args = match prepare_args(tool, &request.args) {
        Ok(args) => args,
        Err(error) => {
            return ToolReply::failure(
                ToolErrorKind::BadArguments,
                format!("bad-arguments: {}: {error}", tool.name),
            );
        }
    };
    let result = match tool.route {
        Route::Broker(verb) => shared
            .backends
            .broker
            .call(&shared.capability, verb, &args)
            .map_err(from_broker)
            .and_then(|result| shape_result(verb, result).map_err(BackendError::Failed)),
        Route::Launch => shared.backends.launch.call(&shared.capability, tool, &args),
        Route::Git(_) => shared.backends.git.call(&shared.capability, tool, &args),
    };
    match result {
        Ok(value) => match reply_text(&value) {
            Ok(text) => ToolReply::success(text),
            Err(too_large) => {
                ToolReply::failure(ToolErrorKind::ReplyTooLarge, too_large.to_string())
            }
        },
        Err(error @ BackendError::Refused(_)) => {
            ToolReply::failure(ToolErrorKind::Refused, error.to_string())
        }
        Err(error @ BackendError::NotAvailable { .. }) => {
            ToolReply::failure(ToolErrorKind::NotAvailable, error.to_string())
        }
        Err(error @ BackendError::Failed(_)) => {
            ToolReply::failure(ToolErrorKind::Failed, error.to_string())
        }
    }
}

fn from_broker(error: BrokerError) -> BackendError {
    match error {
        BrokerError::Refused { code, .. } => BackendError::Refused(code),
        other => BackendError::Failed(other.to_string()),
    }
}
