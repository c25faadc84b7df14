//! The tool socket (docs/contracts.md, contract 5), as a component the runner hosts.
//!
//! [`ToolSocket::bind`] creates `RUN/tools.sock` so that it is never reachable with a mode wider
//! than 0600: the socket is bound inside a fresh 0700 directory next to it, set to 0600, checked,
//! and only then renamed into place. [`ToolSocket::spawn`] serves it on one thread that reads every
//! connection (`serve.rs`, with the bounds that keep one client from starving another): each line
//! is one call, checked against the session's tools.json and the catalogue's argument rules, then
//! forwarded over its route, on a thread of its own, with the capability this component holds and
//! the client never sees. A malformed line gets an error reply and the connection stays open; an
//! oversized line gets an error and the connection is closed; a client that hangs up mid-line is
//! dropped; none of these touch any other connection.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};

use serde_json::Value;

use harness_tools::{
    Route, ToolDef, ToolErrorKind, ToolReply, ToolRequest, ToolsFile, prepare_args, reply_text,
    shape_result,
};

use crate::broker::{Broker, BrokerError, RefusalCode};
use crate::capability::Capability;

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

/// What the loop and every call's thread share.
pub(crate) struct Shared {
    tools: ToolsFile,
    capability: Capability,
    backends: Backends,
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

/// A serving tool socket; [`RunningToolSocket::stop`] (or dropping it) stops serving, closes
/// every connection, removes the socket file and waits for the loop's thread. A call in flight
/// still reaches its backend; its reply is sent if the client's buffer takes it at once.
#[derive(Debug)]
pub struct RunningToolSocket {
    path: PathBuf,
    identity: (u64, u64),
    /// The loop's eventfd, to wake it.
    wake: Arc<OwnedFd>,
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
        let shared = Arc::new(Shared { tools, capability, backends });
        Ok(Self { listener, path, identity, shared })
    }

    /// Returns the socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves on a background thread until stopped.
    pub fn spawn(self) -> io::Result<RunningToolSocket> {
        use rustix::event::{EventfdFlags, eventfd};
        self.listener.set_nonblocking(true)?;
        let wake = Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?);
        let stopping = Arc::new(AtomicBool::new(false));
        let path = self.path.clone();
        let identity = self.identity;
        // Made here, so that the loop's thread allocates nothing until a client connects.
        let done = std::sync::mpsc::channel::<crate::serve::Done>();
        let thread = thread::Builder::new().name("tool-socket".into()).spawn({
            let (stopping, wake) = (stopping.clone(), wake.clone());
            move || crate::serve::run(&self.listener, self.shared.clone(), &stopping, wake, done)
        })?;
        Ok(RunningToolSocket { path, identity, wake, stopping, thread: Some(thread) })
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
        // The loop polls the eventfd: a write wakes it, and it then sees the flag.
        let _ = rustix::io::write(&*self.wake, &1u64.to_ne_bytes());
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

/// Checks one request line: the tool and its arguments, or the error reply.
pub(crate) fn check(shared: &Shared, line: &[u8]) -> Result<(&'static ToolDef, Value), ToolReply> {
    let request: ToolRequest = match serde_json::from_slice(line) {
        Ok(request) => request,
        Err(error) => {
            return Err(ToolReply::failure(
                ToolErrorKind::BadRequest,
                format!(
                    "bad-request: not a tool request ({{\"tool\": NAME, \"args\": {{…}}}}): {error}"
                ),
            ));
        }
    };
    let Some(tool) = shared.tools.get(&request.tool) else {
        return Err(ToolReply::failure(
            ToolErrorKind::UnknownTool,
            format!(
                "unknown-tool: this session has no tool {:?}; its tools are {}",
                request.tool,
                shared.tools.names().join(", ")
            ),
        ));
    };
    match prepare_args(tool, &request.args) {
        Ok(args) => Ok((tool, args)),
        Err(error) => Err(ToolReply::failure(
            ToolErrorKind::BadArguments,
            format!("bad-arguments: {}: {error}", tool.name),
        )),
    }
}

/// Carries out a checked call over its route.
pub(crate) fn call(shared: &Shared, tool: &ToolDef, args: &Value) -> ToolReply {
    let result = match tool.route {
        Route::Broker(verb) => shared
            .backends
            .broker
            .call(&shared.capability, verb, args)
            .map_err(from_broker)
            .and_then(|result| shape_result(verb, result).map_err(BackendError::Failed)),
        Route::Launch => shared.backends.launch.call(&shared.capability, tool, args),
        Route::Git(_) => shared.backends.git.call(&shared.capability, tool, args),
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
