//! The ruleset, built in the parent with every rule added, and the report of what it holds.

use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use crate::error::ConfineError;
use crate::policy::{Grant, Mode, Network, Policy};
use crate::sys::{Namespaces, namespace_support};

/// The Landlock ABI that brought each part of the policy.
const ABI_TCP: u32 = 4;
const ABI_SCOPE: u32 = 6;
const ABI_RESOLVE_UNIX: u32 = 9;

/// What a domain holds, for the runner's log: the ABI, the mode, the rules applied and the ones
/// that were not, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The kernel's Landlock ABI (0: none).
    pub abi: u32,
    /// The mode.
    pub mode: &'static str,
    /// True if and only if a domain will be entered.
    pub confined: bool,
    /// `grant path` for each rule applied.
    pub applied: Vec<String>,
    /// What the domain scopes (`abstract-unix-socket`, `signal`) and limits (`tcp-connect`).
    pub scoped: Vec<String>,
    /// The namespaces entered (`user`, `pid`, `mount`, `net`, `ipc`), in that order.
    pub namespaces: Vec<String>,
    /// What was not applied, and why.
    pub not_applied: Vec<String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.confined {
            write!(f, "not confined (confine \"{}\", Landlock ABI {})", self.mode, self.abi)?;
        } else {
            write!(
                f,
                "Landlock ABI {}, confine \"{}\": {}; {}",
                self.abi,
                self.mode,
                self.applied.join(", "),
                if self.scoped.is_empty() {
                    "nothing scoped".to_owned()
                } else {
                    self.scoped.join(", ")
                }
            )?;
        }
        if self.namespaces.is_empty() {
            write!(f, "; no namespace")?;
        } else {
            write!(f, "; namespaces {}", self.namespaces.join(", "))?;
        }
        if !self.not_applied.is_empty() {
            write!(f, "; not applied: {}", self.not_applied.join(", "))?;
        }
        Ok(())
    }
}

/// A prepared domain: the ruleset descriptor (none when confinement is off or unavailable) and
/// its report. Entering it in a child is [`Domain::attach`].
#[derive(Debug)]
pub struct Domain {
    pub(crate) fd: Option<OwnedFd>,
    /// The namespaces a child enters before the Landlock domain.
    pub(crate) namespaces: Namespaces,
    /// The access the fresh `/proc` of a PID namespace gets in the ruleset.
    pub(crate) proc_access: u64,
    /// The addresses PID 1 listens on inside the network namespace, for the runner.
    pub(crate) listen: Vec<std::net::SocketAddr>,
    /// True if and only if the child installs the seccomp filter that refuses TCP Fast Open
    /// (confined, without a network namespace of its own).
    pub(crate) refuse_fast_open: bool,
    report: Report,
}

/// The runner's end of the socket a sandboxed child hands its listeners over on
/// ([`Domain::attach`]).
#[derive(Debug)]
pub struct Handoff {
    pub(crate) socket: OwnedFd,
    pub(crate) count: usize,
}

impl Handoff {
    /// Waits up to `timeout` for the listeners, in the order of the policy's `listen`. An
    /// error when the child sent none in time (it failed before, or was killed).
    pub fn receive(
        self,
        timeout: std::time::Duration,
    ) -> std::io::Result<Vec<std::net::TcpListener>> {
        use std::mem::MaybeUninit;
        let timeout = rustix::event::Timespec::try_from(timeout)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let mut poll = [rustix::event::PollFd::new(&self.socket, rustix::event::PollFlags::IN)];
        if rustix::event::poll(&mut poll, Some(&timeout))? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the sandbox handed over no listener",
            ));
        }
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(8))];
        let mut control = rustix::net::RecvAncillaryBuffer::new(&mut space);
        let mut byte = [0u8; 1];
        let mut iov = [std::io::IoSliceMut::new(&mut byte)];
        rustix::net::recvmsg(
            &self.socket,
            &mut iov,
            &mut control,
            rustix::net::RecvFlags::CMSG_CLOEXEC,
        )?;
        let mut listeners = Vec::new();
        for message in control.drain() {
            if let rustix::net::RecvAncillaryMessage::ScmRights(fds) = message {
                listeners.extend(fds.map(std::net::TcpListener::from));
            }
        }
        if listeners.len() != self.count {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the sandbox handed over {} of {} listeners", listeners.len(), self.count),
            ));
        }
        Ok(listeners)
    }
}

impl Domain {
    /// What the domain holds.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// True if and only if a child attached to it is confined by Landlock.
    pub fn confines(&self) -> bool {
        self.fd.is_some()
    }

    /// True if and only if a child attached to it runs in a PID namespace of its own, whose end
    /// ends every process in it.
    pub fn isolates_processes(&self) -> bool {
        self.namespaces.pid
    }

    /// True if and only if a child attached to it runs in a network namespace with loopback
    /// only.
    pub fn isolates_network(&self) -> bool {
        self.namespaces.net
    }
}

/// Adds one rule. In best effort a rule the kernel refuses is reported and the ruleset kept as it
/// was before it (a duplicate descriptor of the same ruleset): a rule missing denies more, never
/// less. (A macro, since the crate's rule trait bound cannot be named outside it.)
macro_rules! add_rule {
    ($created:expr, $rule:expr, $required:expr, $what:expr, $report:expr) => {{
        let created: RulesetCreated = $created;
        match created.try_clone() {
            Ok(kept) => match created.add_rule($rule) {
                Ok(created) => created,
                Err(error) => {
                    not_applied($report, $required, $what, error.to_string())?;
                    kept
                }
            },
            Err(error) => {
                not_applied(
                    $report,
                    $required,
                    $what,
                    format!("cannot keep the ruleset: {error}"),
                )?;
                created
            }
        }
    }};
}

fn access_of(grant: Grant, abi: ABI, is_dir: bool) -> BitFlags<AccessFs> {
    let all = AccessFs::from_all(abi);
    let access = match grant {
        Grant::ReadExec => AccessFs::from_read(abi),
        Grant::Read => AccessFs::ReadFile | AccessFs::ReadDir,
        Grant::ReadWrite => all,
        Grant::ReadWriteFile => AccessFs::ReadFile | AccessFs::WriteFile,
        Grant::Device => AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate,
        Grant::Connect => BitFlags::from(AccessFs::ResolveUnix),
    };
    let access = access & all;
    if is_dir { access } else { access & AccessFs::from_file(abi) }
}

/// Builds the domain of `policy` at the best ABI the kernel offers. `"off"` builds nothing;
/// `"best-effort"` applies what it can and reports the rest; `"required"` fails when Landlock is
/// missing or any rule, port limit or scope cannot be applied.
pub fn prepare(policy: &Policy) -> Result<Domain, ConfineError> {
    let raw_abi = crate::sys::kernel_abi();
    let mut report = Report { abi: raw_abi, mode: policy.mode.as_str(), ..Report::default() };
    if policy.mode == Mode::Off {
        return Ok(Domain {
            fd: None,
            namespaces: Namespaces::default(),
            proc_access: 0,
            listen: Vec::new(),
            refuse_fast_open: false,
            report,
        });
    }
    let required = policy.mode == Mode::Required;
    let namespaces = namespaces_of(policy, required, &mut report)?;
    let proc_access = if raw_abi == 0 {
        0
    } else {
        let abi = ABI::from(i32::try_from(raw_abi).unwrap_or(i32::MAX));
        access_of(Grant::Read, abi, true).bits()
    };
    if raw_abi == 0 {
        if required {
            return Err(ConfineError::Unavailable(
                "landlock_create_ruleset reports no ABI (not built in or not enabled)".to_owned(),
            ));
        }
        report.not_applied.push("Landlock (the kernel offers none)".to_owned());
        let listen = listen_of(policy, namespaces);
        let refuse_fast_open = fast_open_filter(namespaces, &mut report);
        return Ok(Domain { fd: None, namespaces, proc_access, listen, refuse_fast_open, report });
    }
    let abi = ABI::from(i32::try_from(raw_abi).unwrap_or(i32::MAX));
    let level = if required { CompatLevel::HardRequirement } else { CompatLevel::BestEffort };
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(AccessFs::from_all(abi))
        .map_err(ConfineError::Ruleset)?;
    match &policy.connect_ports {
        Some(_) if raw_abi >= ABI_TCP => {
            ruleset =
                ruleset.handle_access(AccessNet::ConnectTcp).map_err(ConfineError::Ruleset)?;
        }
        Some(_) if required => {
            return Err(ConfineError::Abi {
                what: "limiting TCP connect",
                needs: ABI_TCP,
                abi: raw_abi,
            });
        }
        Some(_) => report.not_applied.push(format!("tcp-connect ports (needs ABI {ABI_TCP})")),
        None => {}
    }
    if raw_abi >= ABI_SCOPE {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(ConfineError::Ruleset)?;
        report.scoped.extend(["abstract-unix-socket".to_owned(), "signal".to_owned()]);
    } else if required {
        return Err(ConfineError::Abi {
            what: "scoping signals and abstract sockets",
            needs: ABI_SCOPE,
            abi: raw_abi,
        });
    } else {
        report
            .not_applied
            .push(format!("signal and abstract-socket scopes (need ABI {ABI_SCOPE})"));
    }
    let mut created = ruleset.create().map_err(ConfineError::Ruleset)?;
    for rule in &policy.rules {
        let fd = match PathFd::new(&rule.path) {
            Ok(fd) => fd,
            Err(_) if rule.optional => continue,
            Err(error) => {
                let reason = format!("cannot open it: {error}");
                not_applied(&mut report, required, &rule.path, reason)?;
                continue;
            }
        };
        if rule.grant == Grant::Connect && raw_abi < ABI_RESOLVE_UNIX {
            // Before ABI 9 Landlock does not restrict connecting to a pathname socket at all.
            continue;
        }
        let is_dir = rustix::fs::fstat(&fd).map(|stat| {
            rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory
        });
        let is_dir = match is_dir {
            Ok(is_dir) => is_dir,
            Err(error) => {
                not_applied(&mut report, required, &rule.path, format!("cannot stat it: {error}"))?;
                continue;
            }
        };
        let access = access_of(rule.grant, abi, is_dir);
        let before = report.not_applied.len();
        created =
            add_rule!(created, PathBeneath::new(fd, access), required, &rule.path, &mut report);
        if report.not_applied.len() > before {
            continue;
        }
        report.applied.push(format!("{} {}", rule.grant.as_str(), rule.path.display()));
    }
    if let Some(ports) = policy.connect_ports.as_ref().filter(|_| raw_abi >= ABI_TCP) {
        for &port in ports {
            let what = PathBuf::from(format!("tcp:{port}"));
            created = add_rule!(
                created,
                NetPort::new(port, AccessNet::ConnectTcp),
                required,
                &what,
                &mut report
            );
        }
        let list: Vec<String> = ports.iter().map(u16::to_string).collect();
        report.scoped.push(format!("tcp-connect only to ports [{}]", list.join(",")));
    } else if policy.connect_ports.is_none() {
        report.scoped.push("tcp-connect open (run.json names no connectPorts)".to_owned());
    }
    let fd: Option<OwnedFd> = created.into();
    report.confined = fd.is_some();
    if fd.is_none() {
        if required {
            return Err(ConfineError::Unavailable("the ruleset has no descriptor".to_owned()));
        }
        report.not_applied.push("everything (no ruleset descriptor)".to_owned());
    }
    let listen = listen_of(policy, namespaces);
    let refuse_fast_open = fast_open_filter(namespaces, &mut report);
    Ok(Domain { fd, namespaces, proc_access, listen, refuse_fast_open, report })
}

/// True if and only if the sandbox needs the TCP Fast Open filter: it has no network namespace,
/// so the machine's network is reachable and Landlock's TCP rule sees `connect` only.
fn fast_open_filter(namespaces: Namespaces, report: &mut Report) -> bool {
    if namespaces.net {
        return false;
    }
    report.scoped.push("tcp-fast-open refused (seccomp)".to_owned());
    true
}

/// The listeners a child makes: only inside a network namespace of its own, at most
/// [`crate::sys::MAX_LISTENERS`].
fn listen_of(policy: &Policy, namespaces: Namespaces) -> Vec<std::net::SocketAddr> {
    if !namespaces.net {
        return Vec::new();
    }
    policy.listen.iter().copied().take(crate::sys::MAX_LISTENERS).collect()
}

/// The namespaces of `policy` this kernel can give: each one it cannot is an error under
/// `"required"` and a line of the report otherwise.
fn namespaces_of(
    policy: &Policy,
    required: bool,
    report: &mut Report,
) -> Result<Namespaces, ConfineError> {
    if !policy.namespaces {
        return Ok(Namespaces::default());
    }
    let support = namespace_support();
    let mut missing = Vec::new();
    if !support.user {
        missing.push("user namespace");
    }
    let user = support.user;
    let pid = user && support.pid;
    if user && !support.pid {
        missing.push("PID namespace with its own /proc");
    }
    let want_net = policy.network == Network::Loopback;
    let net = want_net && user && support.net;
    if want_net && user && !support.net {
        missing.push("network namespace");
    }
    let ipc = user && support.ipc;
    if user && !support.ipc {
        missing.push("IPC namespace");
    }
    if let Some(first) = missing.first() {
        if required {
            return Err(ConfineError::Layer(first));
        }
        report.not_applied.extend(
            missing
                .iter()
                .map(|layer| format!("{layer} (the kernel does not let this user make one)")),
        );
    }
    let namespaces = Namespaces { pid, net, ipc };
    if namespaces.any() {
        report.namespaces.push("user".to_owned());
    }
    if pid {
        report.namespaces.extend(["pid".to_owned(), "mount (own /proc)".to_owned()]);
    }
    if net {
        report.namespaces.push("net (loopback only)".to_owned());
    } else if policy.network == Network::Host {
        report.namespaces.push("net shared with the host (egress \"open\")".to_owned());
    }
    if ipc {
        report.namespaces.push("ipc".to_owned());
    }
    Ok(namespaces)
}

fn not_applied(
    report: &mut Report,
    required: bool,
    path: &Path,
    reason: String,
) -> Result<(), ConfineError> {
    if required {
        return Err(ConfineError::Rule { path: path.to_path_buf(), reason });
    }
    report.not_applied.push(format!("{} ({reason})", path.display()));
    Ok(())
}
