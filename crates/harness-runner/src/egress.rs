//! A turn's one way out of its network namespace (docs/runner.md, "Egress").
//!
//! A turn's sandbox has loopback only. Its PID 1 listens, inside the namespace, on the
//! addresses the [`Plan`] names and hands the listening sockets to the runner over a socket
//! pair made before the fork (`harness_confine::Handoff`); the runner serves them from its own
//! network namespace:
//!
//! - a *forwarder* on each model endpoint the launch names on a loopback address (the tests'
//!   scripted Messages API on `127.0.0.1:PORT`): the CLI connects to the address it was given,
//!   whatever proxy variables it honours or ignores, and the runner connects to the same
//!   address on the host;
//! - an HTTP *proxy* on `127.0.0.1:3128` (or the next free port) that the CLIs reach through
//!   `HTTPS_PROXY`/`HTTP_PROXY` (and `NODE_USE_ENV_PROXY=1` for Node's fetch). It tunnels
//!   `CONNECT host:port` and forwards absolute-form requests only to `host:port` entries of
//!   the allowlist; anything else gets `403 Forbidden` with a text body saying why.
//!
//! Why listeners made inside and served outside, rather than a bridge or a veth pair: it needs
//! no privilege (no device, no route, no address of the host), nothing for a host to install,
//! and the runner stays the only process with a foot in both networks.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::config::{EgressSetting, Run};
use crate::env::Environment;

/// Anthropic's API, Claude Code's and Pi's default endpoint.
const ANTHROPIC_DEFAULT: &str = "https://api.anthropic.com";
/// The proxy's first choice of port inside the namespace.
const PROXY_PORT: u16 = 3128;
/// How long a client has to send its request head, and the most of it read.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
const HEAD_LIMIT: usize = 16 * 1024;
/// How long connecting to an allowed endpoint may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the runner waits for the sandbox's listeners.
const HANDOFF_TIMEOUT: Duration = Duration::from_secs(30);

/// One `host:port` the egress may connect to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Endpoint {
    /// The host, lowercase (an IPv6 address without brackets).
    pub(crate) host: String,
    /// The port.
    pub(crate) port: u16,
}

impl Endpoint {
    /// Parses `host:port` (`[v6]:port` for an IPv6 address).
    pub(crate) fn parse(text: &str) -> Result<Self, &'static str> {
        let (host, port) = text.rsplit_once(':').ok_or("is not host:port")?;
        let port: u16 = port.parse().map_err(|_| "has no port number")?;
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        if host.is_empty() || host.contains(['/', ' ', '@']) || port == 0 {
            return Err("is not host:port");
        }
        Ok(Self { host: host.to_ascii_lowercase(), port })
    }

    /// The endpoint of a base URL, its port defaulting by scheme.
    fn of_url(text: &str) -> Option<Self> {
        let url = url::Url::parse(text).ok()?;
        let host = match url.host()? {
            url::Host::Domain(domain) => domain.to_ascii_lowercase(),
            url::Host::Ipv4(ip) => ip.to_string(),
            url::Host::Ipv6(ip) => ip.to_string(),
        };
        Some(Self { host, port: url.port_or_known_default()? })
    }

    /// The loopback addresses this endpoint names (none for a host elsewhere).
    fn loopback(&self) -> Vec<SocketAddr> {
        if self.host == "localhost" {
            return vec![
                SocketAddr::new(Ipv4Addr::LOCALHOST.into(), self.port),
                SocketAddr::new(Ipv6Addr::LOCALHOST.into(), self.port),
            ];
        }
        match self.host.parse::<IpAddr>() {
            Ok(ip) if ip.is_loopback() => vec![SocketAddr::new(ip, self.port)],
            _ => Vec::new(),
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// What a run's turns may reach, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Every endpoint the proxy connects to.
    pub(crate) allow: Vec<Endpoint>,
    /// Loopback endpoints served at their own address inside the namespace.
    pub(crate) forwards: Vec<SocketAddr>,
    /// The proxy's address inside the namespace.
    pub(crate) proxy: SocketAddr,
}

impl Plan {
    /// The plan of `run` with the runner's environment `env`; `None` for `"egress": "open"`.
    pub(crate) fn of(run: &Run, env: &Environment) -> Option<Self> {
        let extra = match &run.file.egress {
            Some(EgressSetting::Open(_)) => return None,
            Some(EgressSetting::Allow(entries)) => entries.as_slice(),
            None => &[],
        };
        let mut allow: Vec<Endpoint> = model_endpoints(run, env);
        allow.extend(extra.iter().filter_map(|entry| Endpoint::parse(entry).ok()));
        allow.sort();
        allow.dedup();
        let mut forwards: Vec<SocketAddr> = allow.iter().flat_map(Endpoint::loopback).collect();
        forwards.dedup();
        // The listeners a sandbox makes are few (harness_confine's limit is 8, the proxy one).
        forwards.truncate(7);
        let mut port = PROXY_PORT;
        while forwards.iter().any(|address| address.port() == port) {
            port = port.saturating_add(1);
        }
        let proxy = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port);
        Some(Self { allow, forwards, proxy })
    }

    /// The addresses the sandbox listens on: the forwards, then the proxy.
    pub(crate) fn listen(&self) -> Vec<SocketAddr> {
        self.forwards.iter().copied().chain([self.proxy]).collect()
    }

    /// The ports a turn connects to inside its namespace (for run.json's `connectPorts`).
    pub(crate) fn ports(&self) -> Vec<u16> {
        self.listen().iter().map(SocketAddr::port).collect()
    }

    /// The variables that send a CLI's requests through the proxy; they replace any of the
    /// same name the host passed.
    pub(crate) fn env(&self) -> Vec<(OsString, OsString)> {
        let proxy = format!("http://{}", self.proxy);
        let no_proxy = "localhost,127.0.0.1,::1";
        [
            ("HTTPS_PROXY", proxy.as_str()),
            ("HTTP_PROXY", proxy.as_str()),
            ("https_proxy", proxy.as_str()),
            ("http_proxy", proxy.as_str()),
            ("NO_PROXY", no_proxy),
            ("no_proxy", no_proxy),
            ("NODE_USE_ENV_PROXY", "1"),
        ]
        .into_iter()
        .map(|(name, value)| (name.into(), value.into()))
        .collect()
    }

    /// The allowlist, for the log.
    pub(crate) fn describe(&self) -> String {
        let allow: Vec<String> = self.allow.iter().map(ToString::to_string).collect();
        let forwards: Vec<String> = self.forwards.iter().map(ToString::to_string).collect();
        format!(
            "egress to [{}] through the proxy at {} (forwarded in place: [{}])",
            allow.join(", "),
            self.proxy,
            forwards.join(", ")
        )
    }
}

/// The model endpoints the launch names: `ANTHROPIC_BASE_URL` when it reaches the adapter, the
/// `baseUrl`s of the session's Pi `models.json`; Anthropic's API when it names none.
fn model_endpoints(run: &Run, env: &Environment) -> Vec<Endpoint> {
    let mut found = Vec::new();
    let passed = run.file.pass_env.iter().any(|name| name == "ANTHROPIC_BASE_URL");
    if let Some(url) = env.get("ANTHROPIC_BASE_URL").and_then(|url| url.to_str()).filter(|_| passed)
    {
        found.extend(Endpoint::of_url(url));
    }
    for (name, text) in &run.file.session_files {
        if !name.ends_with("models.json") {
            continue;
        }
        let Ok(models) = serde_json::from_str::<serde_json::Value>(text) else { continue };
        let providers = models.get("providers").and_then(serde_json::Value::as_object);
        for provider in providers.into_iter().flat_map(|providers| providers.values()) {
            if let Some(url) = provider.get("baseUrl").and_then(serde_json::Value::as_str) {
                found.extend(Endpoint::of_url(url));
            }
        }
    }
    if found.is_empty() {
        found.extend(Endpoint::of_url(ANTHROPIC_DEFAULT));
    }
    found
}

/// The runner serving one sandbox's listeners; dropping it closes them and ends their threads
/// (connections already open end with the sandbox's processes).
#[derive(Debug)]
pub(crate) struct Server {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    stopped: AtomicBool,
    listeners: Mutex<Vec<Arc<TcpListener>>>,
}

impl Server {
    /// Waits, on a thread of its own, for the sandbox's listeners on `handoff`, then serves
    /// them as `plan` says.
    pub(crate) fn start(plan: Arc<Plan>, handoff: harness_confine::Handoff) -> Self {
        let shared = Arc::new(Shared::default());
        let serving = Arc::clone(&shared);
        let started = std::thread::Builder::new().name("egress".into()).spawn(move || {
            let listeners = match handoff.receive(HANDOFF_TIMEOUT) {
                Ok(listeners) => listeners,
                Err(error) => {
                    if !serving.stopped.load(Ordering::SeqCst) {
                        tracing::warn!("the turn's egress did not start: {error}");
                    }
                    return;
                }
            };
            let mut kept = serving.listeners.lock().unwrap_or_else(PoisonError::into_inner);
            if serving.stopped.load(Ordering::SeqCst) {
                return;
            }
            let forwards = plan.forwards.len();
            for (index, listener) in listeners.into_iter().enumerate() {
                let listener = Arc::new(listener);
                kept.push(Arc::clone(&listener));
                let role = match plan.forwards.get(index) {
                    Some(&address) if index < forwards => Role::Forward(address),
                    _ => Role::Proxy(Arc::clone(&plan)),
                };
                let stopped = Arc::clone(&serving);
                let _ = std::thread::Builder::new()
                    .name("egress-accept".into())
                    .spawn(move || accept_loop(&listener, &role, &stopped.stopped));
            }
        });
        if let Err(error) = started {
            tracing::warn!("the turn's egress did not start: {error}");
        }
        Self { shared }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        let listeners = self.shared.listeners.lock().unwrap_or_else(PoisonError::into_inner);
        for listener in listeners.iter() {
            // Wakes the accept loop (a listening socket shut down fails its accept).
            let _ = rustix::net::shutdown(&**listener, rustix::net::Shutdown::Both);
        }
    }
}

/// What a listener does with a connection.
#[derive(Debug)]
enum Role {
    /// Connects to the same address on the host.
    Forward(SocketAddr),
    /// The HTTP proxy with its allowlist.
    Proxy(Arc<Plan>),
}

fn accept_loop(listener: &TcpListener, role: &Role, stopped: &AtomicBool) {
    while !stopped.load(Ordering::SeqCst) {
        let Ok((client, _)) = listener.accept() else { return };
        let job = match role {
            Role::Forward(address) => Job::Forward(*address),
            Role::Proxy(plan) => Job::Proxy(Arc::clone(plan)),
        };
        let _ = std::thread::Builder::new().name("egress-conn".into()).spawn(move || match job {
            Job::Forward(address) => {
                if let Ok(upstream) = TcpStream::connect_timeout(&address, CONNECT_TIMEOUT) {
                    pipe(client, upstream, &[]);
                }
            }
            Job::Proxy(plan) => proxy(client, &plan),
        });
    }
}

enum Job {
    Forward(SocketAddr),
    Proxy(Arc<Plan>),
}

/// Serves one proxy connection: reads the request head, checks its target against the
/// allowlist, and tunnels (`CONNECT`) or forwards (absolute-form) it, or refuses it with 403.
fn proxy(client: TcpStream, plan: &Plan) {
    let _ = client.set_read_timeout(Some(HEAD_TIMEOUT));
    let mut reader = BufReader::new(match client.try_clone() {
        Ok(clone) => clone,
        Err(_) => return,
    });
    let mut head = Vec::new();
    loop {
        let before = head.len();
        match reader.by_ref().take(HEAD_LIMIT as u64).read_until(b'\n', &mut head) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if head.ends_with(b"\r\n\r\n") || head.ends_with(b"\n\n") || head.len() == before {
            break;
        }
        if head.len() >= HEAD_LIMIT {
            return refuse(client, 431, "the request head is too large");
        }
    }
    let rest = reader.buffer().to_vec();
    let _ = client.set_read_timeout(None);
    let text = String::from_utf8_lossy(&head).into_owned();
    let first = text.lines().next().unwrap_or_default().to_owned();
    let mut words = first.split_whitespace();
    let (method, target) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let connect = method.eq_ignore_ascii_case("CONNECT");
    let endpoint = if connect {
        Endpoint::parse(target).ok()
    } else {
        Endpoint::of_url(target).filter(|_| target.starts_with("http://"))
    };
    let Some(endpoint) = endpoint else {
        return refuse(client, 400, "the proxy takes CONNECT host:port or an http:// URL");
    };
    if !plan.allow.contains(&endpoint) {
        tracing::warn!("egress refused: {endpoint} is not on the allowlist");
        let reason = format!(
            "{endpoint} is not on this session's egress allowlist; the sandbox reaches only the \
             model endpoints its launch names and run.json's \"egress\" entries"
        );
        return refuse(client, 403, &reason);
    }
    let upstream = (endpoint.host.as_str(), endpoint.port);
    let connected = std::net::ToSocketAddrs::to_socket_addrs(&upstream)
        .ok()
        .into_iter()
        .flatten()
        .find_map(|address| TcpStream::connect_timeout(&address, CONNECT_TIMEOUT).ok());
    let Some(upstream) = connected else {
        return refuse(client, 502, &format!("cannot connect to {endpoint}"));
    };
    if connect {
        let mut client = client;
        if client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").is_err() {
            return;
        }
        pipe(client, upstream, &rest);
    } else {
        // The request goes on in origin form: `GET /path HTTP/1.1`, the rest of the head as is.
        let origin = url::Url::parse(target).map_or_else(
            |_| "/".to_owned(),
            |url| match url.query() {
                Some(query) => format!("{}?{query}", url.path()),
                None => url.path().to_owned(),
            },
        );
        let version = words.next().unwrap_or("HTTP/1.1");
        let line_end = head.iter().position(|&byte| byte == b'\n').map_or(head.len(), |at| at + 1);
        let mut first = format!("{method} {origin} {version}\r\n").into_bytes();
        first.extend_from_slice(&head[line_end..]);
        first.extend_from_slice(&rest);
        pipe(client, upstream, &first);
    }
}

/// Answers `status` with `reason` as a text body a model can read, and closes.
fn refuse(mut client: TcpStream, status: u16, reason: &str) {
    let title = match status {
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        _ => "Bad Request",
    };
    let body = format!("harness egress: {reason}\n");
    let reply = format!(
        "HTTP/1.1 {status} {title}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(reply.as_bytes());
    let _ = client.shutdown(Shutdown::Both);
}

/// Copies both ways until either side ends, `first` sent upstream before; then closes both.
fn pipe(client: TcpStream, upstream: TcpStream, first: &[u8]) {
    let mut up = upstream;
    if !first.is_empty() && up.write_all(first).is_err() {
        return;
    }
    let (Ok(mut client_read), Ok(mut up_read)) = (client.try_clone(), up.try_clone()) else {
        return;
    };
    let mut client_write = client;
    let closer = (client_write.try_clone(), up.try_clone());
    let back = std::thread::Builder::new().name("egress-back".into()).spawn(move || {
        let _ = std::io::copy(&mut up_read, &mut client_write);
        let _ = client_write.shutdown(Shutdown::Both);
    });
    let _ = std::io::copy(&mut client_read, &mut up);
    let _ = up.shutdown(Shutdown::Both);
    if let (Ok(client), Ok(upstream)) = closer {
        let _ = client.shutdown(Shutdown::Both);
        let _ = upstream.shutdown(Shutdown::Both);
    }
    if let Ok(back) = back {
        let _ = back.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_and_print() {
        assert_eq!(
            Endpoint::parse("Example.COM:443").unwrap(),
            Endpoint { host: "example.com".into(), port: 443 }
        );
        assert_eq!(Endpoint::parse("[::1]:8080").unwrap().to_string(), "[::1]:8080");
        assert!(Endpoint::parse("example.com").is_err());
        assert!(Endpoint::parse("example.com:0").is_err());
        assert_eq!(
            Endpoint::of_url("https://api.anthropic.com").unwrap().to_string(),
            "api.anthropic.com:443"
        );
        assert_eq!(
            Endpoint::of_url("http://127.0.0.1:4000/v1").unwrap().loopback(),
            vec![SocketAddr::from(([127, 0, 0, 1], 4000))]
        );
        assert!(Endpoint::of_url("https://api.anthropic.com").unwrap().loopback().is_empty());
    }
}
