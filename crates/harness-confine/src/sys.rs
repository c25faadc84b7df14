//! The system calls made between fork and exec, the namespace probe and the ABI query. The only
//! unsafe code of the crate: `landlock_restrict_self`, `landlock_add_rule` and
//! `landlock_create_ruleset` have no safe wrapper that is allocation-free (the landlock crate's
//! `restrict_self` consumes the ruleset and builds a status value), `fork` has to be a raw
//! `clone` in a child of a multithreaded parent (glibc's `fork` takes locks a vanished thread may
//! hold), `mount`, `unshare` and `SIOCSIFFLAGS` have no allocation-free safe wrapper here, and
//! `Command::pre_exec` is unsafe by nature.
//!
//! # The sandbox between fork and exec
//!
//! With namespaces on, the child [`std::process::Command`] forks (the *keeper*, still in the
//! runner's namespaces) unshares user, mount, PID, network and IPC namespaces, maps the runner's
//! uid and gid to themselves (`setgroups` denied), and forks again: that child is PID 1 of the
//! new PID namespace. PID 1 mounts a fresh `/proc` (its mounts are slaves of the runner's: nothing propagates back) (and grants it to
//! the Landlock ruleset, whose rule on the runner's `/proc` names another mount), brings `lo` up,
//! hands the listeners of its egress over to the runner, and forks the turn process, which drops
//! its capability bounding set, enters the Landlock domain and returns to `Command`, which
//! execs. PID 1 reaps every orphan of the namespace and exits with the turn's status as soon as
//! the turn process ends; the kernel then kills whatever is left in the namespace. The keeper
//! waits for PID 1 and ends with the turn's status, so the runner sees the turn's own status.
//!
//! Each level dies with the one above it (`PR_SET_PDEATHSIG` SIGKILL, checked after it is set
//! against the parent having died before): the runner SIGKILLed takes the keeper, the keeper
//! takes PID 1, PID 1 takes the namespace. Everything here is a system call on memory prepared
//! in the parent: no allocation, no lock.
#![allow(unsafe_code, reason = "raw system calls between fork and exec, each with its SAFETY")]

use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::{Arc, OnceLock};

use crate::domain::{Domain, Handoff};

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask for the ABI instead of creating a ruleset.
const CREATE_RULESET_VERSION: libc::c_uint = 1;
/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_int = 1;

/// The Landlock ABI the running kernel offers; 0 when it has none (not built in, or disabled).
pub fn kernel_abi() -> u32 {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the call reads no
    // memory and creates nothing; it returns the ABI or -1 with errno set.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(version).unwrap_or(0)
}

/// Enters the domain whose ruleset is `fd`: `PR_SET_NO_NEW_PRIVS` (required to restrict oneself
/// without CAP_SYS_ADMIN) and `landlock_restrict_self`. Async-signal-safe: two system calls, no
/// allocation, no lock, so it may run in the child of a multithreaded parent.
fn enter(fd: RawFd) -> std::io::Result<()> {
    rustix::thread::set_no_new_privs(true)?;
    // SAFETY: `fd` is the ruleset descriptor the parent holds open in an `OwnedFd` for as long
    // as the `Command` (which holds an `Arc` of the domain) lives, so it is open in the child;
    // flags 0; the call reads no memory of ours.
    let done = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) };
    if done == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// The namespaces a sandbox enters (the user namespace comes with any of them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Namespaces {
    /// A PID namespace whose PID 1 ends the turn's whole tree, with a fresh `/proc` mounted in
    /// a mount namespace of its own.
    pub(crate) pid: bool,
    /// A network namespace with loopback only.
    pub(crate) net: bool,
    /// An IPC namespace (System V IPC and POSIX message queues of its own).
    pub(crate) ipc: bool,
}

impl Namespaces {
    /// True if and only if a user namespace (and so a sandbox) is entered at all.
    pub(crate) fn any(self) -> bool {
        self.pid || self.net || self.ipc
    }

    fn flags(self) -> libc::c_int {
        let mut flags = 0;
        if self.any() {
            flags |= libc::CLONE_NEWUSER;
        }
        if self.pid {
            flags |= libc::CLONE_NEWPID | libc::CLONE_NEWNS;
        }
        if self.net {
            flags |= libc::CLONE_NEWNET;
        }
        if self.ipc {
            flags |= libc::CLONE_NEWIPC;
        }
        flags
    }
}

/// What this kernel lets an unprivileged process of this machine enter, probed once by doing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// A user namespace with the runner's own uid and gid mapped.
    pub user: bool,
    /// A PID namespace with a fresh `/proc` in a mount namespace of its own.
    pub pid: bool,
    /// A network namespace with `lo` up.
    pub net: bool,
    /// An IPC namespace.
    pub ipc: bool,
}

/// What the namespaces layer can have here: probed once per process by forking a child that
/// enters each namespace the way a turn does (see the module docs) and exits.
pub fn namespace_support() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(|| {
        let all = Namespaces { pid: true, net: true, ipc: true };
        if probe(all) {
            return Support { user: true, pid: true, net: true, ipc: true };
        }
        let user = probe(Namespaces { pid: false, net: false, ipc: true })
            || probe(Namespaces { pid: true, net: false, ipc: false })
            || probe(Namespaces { pid: false, net: true, ipc: false });
        Support {
            user,
            pid: user && probe(Namespaces { pid: true, net: false, ipc: false }),
            net: user && probe(Namespaces { pid: false, net: true, ipc: false }),
            ipc: user && probe(Namespaces { pid: false, net: false, ipc: true }),
        }
    })
}

/// Enters `namespaces` in a forked child whose turn process exits at once; true if and only if
/// every step succeeded.
fn probe(namespaces: Namespaces) -> bool {
    let entry = Entry::new(namespaces, None, 0, true);
    // SAFETY: the child runs `sandbox`, which makes system calls on `entry` (prepared here,
    // before the fork) and allocates nothing, then `_exit`s; it never returns into Rust code
    // of the parent's.
    let child = unsafe { libc::fork() };
    if child == 0 {
        let code = match sandbox(&entry) {
            Ok(()) => 0,
            Err(_) => 1,
        };
        // SAFETY: `_exit` ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    if child < 0 {
        return false;
    }
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child; `status` is a valid out pointer.
        let done = unsafe { libc::waitpid(child, &raw mut status, 0) };
        if done == child {
            return libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        }
        if done < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// `AUDIT_ARCH_*` of this target, for the seccomp filter.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// The syscall numbers the filter looks at, as the filter compares them.
const NR_SENDTO: u32 = libc::SYS_sendto as u32;
const NR_SENDMSG: u32 = libc::SYS_sendmsg as u32;
const NR_SENDMMSG: u32 = libc::SYS_sendmmsg as u32;
/// `MSG_FASTOPEN`, as the filter tests it.
const FASTOPEN: u32 = libc::MSG_FASTOPEN as u32;
/// `SECCOMP_RET_ALLOW` and `SECCOMP_RET_ERRNO | EPERM`.
const RET_ALLOW: u32 = 0x7FFF_0000;
const RET_EPERM: u32 = 0x0005_0000 | libc::EPERM as u32;

const fn op(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code: code as u16, jt, jf, k }
}

/// A seccomp filter that refuses `sendto`, `sendmsg` and `sendmmsg` with `MSG_FASTOPEN` (EPERM):
/// TCP Fast Open opens a connection without `connect`, so Landlock's TCP rule never sees it. It
/// is installed where there is no network namespace to close the network instead. The flags
/// are the fourth argument of `sendto` and `sendmmsg` and the third of `sendmsg` (their low 32
/// bits, at offsets 40 and 32 of `seccomp_data` on a little-endian target).
const TFO_FILTER: [libc::sock_filter; 13] = {
    const LD_ABS: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    const JEQ: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    const JSET: u32 = libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K;
    const RET: u32 = libc::BPF_RET | libc::BPF_K;
    [
        op(LD_ABS, 0, 0, 4),
        op(JEQ, 0, 9, AUDIT_ARCH),
        op(LD_ABS, 0, 0, 0),
        op(JEQ, 3, 0, NR_SENDTO),
        op(JEQ, 2, 0, NR_SENDMMSG),
        op(JEQ, 3, 0, NR_SENDMSG),
        op(RET, 0, 0, RET_ALLOW),
        op(LD_ABS, 0, 0, 40),
        op(JSET, 3, 2, FASTOPEN),
        op(LD_ABS, 0, 0, 32),
        op(JSET, 1, 0, FASTOPEN),
        op(RET, 0, 0, RET_ALLOW),
        op(RET, 0, 0, RET_EPERM),
    ]
};

/// Installs [`TFO_FILTER`] on the calling thread (after `PR_SET_NO_NEW_PRIVS`).
fn refuse_fast_open() -> std::io::Result<()> {
    rustix::thread::set_no_new_privs(true)?;
    let program = libc::sock_fprog {
        len: TFO_FILTER.len() as libc::c_ushort,
        filter: TFO_FILTER.as_ptr().cast_mut(),
    };
    // SAFETY: the program points at a static filter of `len` instructions; the kernel copies it.
    let done = unsafe {
        libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &raw const program, 0, 0)
    };
    if done == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// One line of a uid or gid map, written before the fork: `INSIDE OUTSIDE 1`.
#[derive(Debug, Clone, Copy)]
struct MapLine {
    bytes: [u8; 40],
    len: usize,
}

impl MapLine {
    fn new(id: u32) -> Self {
        let text = format!("{id} {id} 1\n");
        let mut bytes = [0u8; 40];
        let len = text.len().min(bytes.len());
        bytes[..len].copy_from_slice(&text.as_bytes()[..len]);
        Self { bytes, len }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The most listeners PID 1 makes for the runner.
pub(crate) const MAX_LISTENERS: usize = 8;

/// One address PID 1 listens on, as the kernel takes it.
#[derive(Clone, Copy)]
struct ListenAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
    family: libc::c_int,
}

impl ListenAddr {
    fn new(address: std::net::SocketAddr) -> Self {
        // SAFETY: an all-zero sockaddr_storage is a valid value of this plain C struct.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let (len, family) = match address {
            std::net::SocketAddr::V4(v4) => {
                let raw = libc::sockaddr_in {
                    sin_family: libc::sa_family_t::try_from(libc::AF_INET).unwrap_or(0),
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr { s_addr: u32::from(*v4.ip()).to_be() },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
                unsafe { std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in>(), raw) };
                (std::mem::size_of::<libc::sockaddr_in>(), libc::AF_INET)
            }
            std::net::SocketAddr::V6(v6) => {
                let raw = libc::sockaddr_in6 {
                    sin6_family: libc::sa_family_t::try_from(libc::AF_INET6).unwrap_or(0),
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: 0,
                    sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                    sin6_scope_id: 0,
                };
                // SAFETY: sockaddr_storage is larger than sockaddr_in6 and suitably aligned.
                unsafe { std::ptr::write((&raw mut storage).cast::<libc::sockaddr_in6>(), raw) };
                (std::mem::size_of::<libc::sockaddr_in6>(), libc::AF_INET6)
            }
        };
        Self { storage, len: libc::socklen_t::try_from(len).unwrap_or(0), family }
    }
}

/// Everything the child needs, prepared in the parent.
#[derive(Clone, Copy)]
struct Entry {
    namespaces: Namespaces,
    flags: libc::c_int,
    uid_map: MapLine,
    gid_map: MapLine,
    /// The process that forks the keeper: the keeper ends if it is no longer its parent.
    parent: libc::pid_t,
    /// The Landlock ruleset the fresh `/proc` is granted in, and the access it gets.
    ruleset: Option<RawFd>,
    proc_access: u64,
    /// A probe: the turn process exits 0 instead of going on to exec.
    probe: bool,
    /// The addresses PID 1 listens on inside the network namespace, and the socket it hands
    /// the listeners to the runner over (-1: none).
    listen: [Option<ListenAddr>; MAX_LISTENERS],
    handoff: RawFd,
}

impl Entry {
    fn new(namespaces: Namespaces, ruleset: Option<RawFd>, proc_access: u64, probe: bool) -> Self {
        Self {
            listen: [None; MAX_LISTENERS],
            handoff: -1,
            namespaces,
            flags: namespaces.flags(),
            uid_map: MapLine::new(rustix::process::getuid().as_raw()),
            gid_map: MapLine::new(rustix::process::getgid().as_raw()),
            parent: rustix::process::getpid().as_raw_nonzero().get(),
            ruleset,
            proc_access,
            probe,
        }
    }
}

fn check(result: libc::c_int) -> std::io::Result<libc::c_int> {
    if result < 0 { Err(std::io::Error::last_os_error()) } else { Ok(result) }
}

/// `fork` as a raw `clone(SIGCHLD)`: no atfork handler, no lock of the C library.
fn raw_fork() -> std::io::Result<libc::pid_t> {
    // SAFETY: clone with only SIGCHLD and a null stack is fork: the child gets a copy of this
    // (single-threaded) process and returns 0 here. No glibc state is touched.
    let pid = unsafe {
        libc::syscall(libc::SYS_clone, libc::c_long::from(libc::SIGCHLD), 0usize, 0usize, 0usize)
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(libc::pid_t::try_from(pid).unwrap_or(0))
}

/// Ends this process now, without unwinding or exit handlers.
fn exit_now(code: libc::c_int) -> ! {
    // SAFETY: `_exit` is async-signal-safe and never returns.
    unsafe { libc::_exit(code) }
}

/// Asks for SIGKILL when the parent dies, then makes sure it has not died already (the request
/// only covers a death after it): `alive` says whether it still lives.
fn die_with_parent(alive: impl Fn() -> bool) {
    // SAFETY: prctl with integer arguments only.
    let set = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    if set != 0 || !alive() {
        exit_now(1);
    }
}

/// Writes `bytes` to the file at `path` (a /proc control file), in one write.
fn write_file(path: &CStr, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: `path` is a NUL-terminated string; the flags are plain.
    let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) })?;
    // SAFETY: `bytes` is valid for its length; `fd` was just opened.
    let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    let error = std::io::Error::last_os_error();
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(fd) };
    if usize::try_from(written).ok() == Some(bytes.len()) { Ok(()) } else { Err(error) }
}

/// Closes every descriptor from 3 up but `keep` (descriptors the runner holds, CLOEXEC or
/// not, have no business in a process that never execs).
fn close_all_but(keep: RawFd) {
    let keep = u32::try_from(keep).unwrap_or(u32::MAX);
    // SAFETY: close_range takes plain integers; closing descriptors this process does not need
    // cannot break memory safety (no Rust object of the child is used after this).
    unsafe {
        if keep > 3 {
            libc::syscall(libc::SYS_close_range, 3u32, keep - 1, 0u32);
        }
        libc::syscall(libc::SYS_close_range, keep.saturating_add(1).max(3), u32::MAX, 0u32);
    }
}

/// Waits for `pid`, retrying on EINTR; its wait status.
fn wait_for(pid: libc::pid_t) -> libc::c_int {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out pointer.
        let done = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        if done == pid {
            return status;
        }
        if done < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 1 << 8;
        }
    }
}

/// Ends this process the way `status` says another one ended: the same exit code, or killed by
/// the same signal.
fn end_like(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // SAFETY: resets one signal to its default action and sends it to this process; both
        // calls are async-signal-safe and read only the zeroed action built here.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(signal, &raw const action, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
        }
        exit_now(128 + signal);
    }
    exit_now(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 1 })
}

/// Brings the loopback interface up (a new network namespace starts with it down).
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: a plain socket call.
    let sock =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: an all-zero ifreq is a valid value of this plain C struct.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo") {
        *slot = libc::c_char::try_from(*byte).unwrap_or(0);
    }
    request.ifr_ifru.ifru_flags =
        libc::c_short::try_from(libc::IFF_UP | libc::IFF_RUNNING).unwrap_or(0);
    // SAFETY: SIOCSIFFLAGS reads the ifreq built above; `sock` is open.
    let done = unsafe { libc::ioctl(sock, libc::SIOCSIFFLAGS, &raw const request) };
    let error = std::io::Error::last_os_error();
    // SAFETY: closes the socket opened above.
    unsafe { libc::close(sock) };
    if done < 0 { Err(error) } else { Ok(()) }
}

/// Makes a listening TCP socket on each address of `entry` inside the network namespace and
/// sends them all to the runner in one message (SCM_RIGHTS); PID 1 keeps none of them.
fn hand_listeners_over(entry: &Entry) -> std::io::Result<()> {
    let mut fds = [-1 as RawFd; MAX_LISTENERS];
    let mut count = 0;
    let mut failure = None;
    for address in entry.listen.iter().flatten() {
        match listen_on(address) {
            Ok(fd) => {
                fds[count] = fd;
                count += 1;
            }
            Err(error) => {
                failure = Some(error);
                break;
            }
        }
    }
    let sent = match failure {
        Some(error) => Err(error),
        None => send_fds(entry.handoff, &fds[..count]),
    };
    for &fd in &fds[..count] {
        // SAFETY: closes a descriptor made above.
        unsafe { libc::close(fd) };
    }
    sent
}

/// A TCP listener on `address`.
fn listen_on(address: &ListenAddr) -> std::io::Result<RawFd> {
    // SAFETY: a plain socket call.
    let fd =
        check(unsafe { libc::socket(address.family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    let one: libc::c_int = 1;
    let size = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4);
    // SAFETY: setsockopt reads one int; bind reads `len` bytes of the storage; listen takes
    // integers. On failure the descriptor is closed before returning.
    let done = unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, (&raw const one).cast(), size);
        if address.family == libc::AF_INET6 {
            libc::setsockopt(
                fd,
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                (&raw const one).cast(),
                size,
            );
        }
        if libc::bind(fd, (&raw const address.storage).cast(), address.len) == 0 {
            libc::listen(fd, 128)
        } else {
            -1
        }
    };
    if done < 0 {
        let error = std::io::Error::last_os_error();
        // SAFETY: closes the descriptor made above.
        unsafe { libc::close(fd) };
        return Err(error);
    }
    Ok(fd)
}

/// Sends `fds` over the Unix socket `socket` with one byte of data.
fn send_fds(socket: RawFd, fds: &[RawFd]) -> std::io::Result<()> {
    // Room for MAX_LISTENERS descriptors, aligned for cmsghdr.
    let mut control = [0u64; 16];
    let mut byte = [b'L'];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let bytes = std::mem::size_of_val(fds);
    // SAFETY: an all-zero msghdr is a valid value; every pointer set below points into this
    // stack frame, which outlives the sendmsg call; CMSG_SPACE of at most 8 descriptors (48
    // bytes) fits the 128-byte control buffer, and the copy writes `bytes` bytes into the data
    // of the one header.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &raw mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast();
        let len = u32::try_from(bytes).unwrap_or(0);
        message.msg_controllen = libc::CMSG_SPACE(len) as _;
        let header = libc::CMSG_FIRSTHDR(&raw const message);
        if header.is_null() {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(len) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(header), bytes);
        if libc::sendmsg(socket, &raw const message, libc::MSG_NOSIGNAL) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The `landlock_path_beneath_attr` of the kernel's UAPI.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Mounts a fresh `/proc` and grants it to `ruleset`. The mounts need not be made private
/// first: a mount namespace owned by a less privileged user namespace gets the parent's shared
/// mounts as slaves, so nothing mounted here propagates back (and the recursive walk over every
/// mount of the machine would cost each turn).
fn fresh_proc(ruleset: Option<RawFd>, access: u64) -> std::io::Result<()> {
    // SAFETY: mount with NUL-terminated strings and a null data pointer.
    check(unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    })?;
    let Some(ruleset) = ruleset else { return Ok(()) };
    // SAFETY: opens a path with plain flags.
    let fd = check(unsafe {
        libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
    })?;
    let attr = PathBeneathAttr { allowed_access: access, parent_fd: fd };
    // SAFETY: the attribute lives on this stack for the call; `ruleset` is the open ruleset
    // descriptor the parent holds for the command's lifetime.
    let added = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_PATH_BENEATH,
            &raw const attr,
            0u32,
        )
    };
    let error = std::io::Error::last_os_error();
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(fd) };
    if added < 0 { Err(error) } else { Ok(()) }
}

/// Drops every capability from the bounding set, so a turn whose uid is 0 in its user namespace
/// has no capability there once it execs (it cannot unmount its /proc, for one).
fn drop_bounding_set() {
    for capability in 0..64 {
        // SAFETY: prctl with integer arguments; EINVAL past the last capability is ignored.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) };
    }
}

/// The sandbox of the module docs, up to the turn process, which returns `Ok(())` (and goes on
/// to exec). The keeper and PID 1 never return.
fn sandbox(entry: &Entry) -> std::io::Result<()> {
    if entry.flags == 0 {
        return Ok(());
    }
    let parent = entry.parent;
    // SAFETY: getppid has no arguments.
    die_with_parent(|| unsafe { libc::getppid() } == parent);
    // SAFETY: unshare with flags only.
    check(unsafe { libc::unshare(entry.flags) })?;
    match write_file(c"/proc/self/setgroups", b"deny") {
        Err(error) if error.raw_os_error() != Some(libc::ENOENT) => return Err(error),
        _ => {}
    }
    write_file(c"/proc/self/uid_map", entry.uid_map.as_bytes())?;
    write_file(c"/proc/self/gid_map", entry.gid_map.as_bytes())?;
    let mut link = [0 as RawFd; 2];
    // SAFETY: `link` has room for the two descriptors.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            link.as_mut_ptr(),
        )
    })?;
    let [keeper_end, init_end] = link;
    let init = raw_fork()?;
    if init > 0 {
        // The keeper: waits for PID 1 and ends as the turn ended (PID 1 sends its status).
        close_all_but(keeper_end);
        let init_status = wait_for(init);
        let mut status = [0u8; 4];
        // SAFETY: reads at most 4 bytes into `status`.
        let read = unsafe { libc::read(keeper_end, status.as_mut_ptr().cast(), status.len()) };
        if read == 4 {
            end_like(libc::c_int::from_ne_bytes(status));
        }
        end_like(init_status);
    }
    // PID 1 of the new PID namespace (or the turn's parent, without one).
    // SAFETY: closes the keeper's end, which PID 1 does not use.
    unsafe { libc::close(keeper_end) };
    die_with_parent(|| {
        let mut poll = libc::pollfd { fd: init_end, events: 0, revents: 0 };
        // SAFETY: polls one valid descriptor without waiting.
        let ready = unsafe { libc::poll(&raw mut poll, 1, 0) };
        ready == 0 || (ready > 0 && poll.revents & libc::POLLHUP == 0)
    });
    if entry.namespaces.pid {
        fresh_proc(entry.ruleset, entry.proc_access)?;
    }
    if entry.namespaces.net {
        loopback_up()?;
        if entry.handoff >= 0 {
            hand_listeners_over(entry)?;
        }
    }
    let turn = raw_fork()?;
    if turn > 0 {
        close_all_but(init_end);
        // PID 1 reaps every orphan of the namespace; the turn's own end ends it, and with it
        // everything the turn left.
        loop {
            let mut status = 0;
            // SAFETY: `status` is a valid out pointer.
            let done = unsafe { libc::waitpid(-1, &raw mut status, 0) };
            if done == turn {
                let bytes = status.to_ne_bytes();
                // SAFETY: writes 4 bytes from `bytes`.
                unsafe { libc::write(init_end, bytes.as_ptr().cast(), bytes.len()) };
                end_like(status);
            }
            if done < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                exit_now(1);
            }
        }
    }
    // The turn process.
    // SAFETY: closes PID 1's end, which the turn does not use.
    unsafe { libc::close(init_end) };
    drop_bounding_set();
    if entry.probe {
        exit_now(0);
    }
    Ok(())
}

impl Domain {
    /// Makes `command` enter this sandbox in its child, after fork and before exec: the
    /// namespaces the domain holds, then the Landlock domain. A child that cannot enter it does
    /// not run (its spawn fails). A domain that confines nothing leaves `command` as it is.
    ///
    /// With listeners to make inside the network namespace (see [`crate::SessionPaths`]'s
    /// `listen`), returns the [`Handoff`] their descriptors arrive on once the child is
    /// spawned; `None` otherwise, or when the socket pair cannot be made (then the child makes
    /// no listener and its loopback reaches nothing).
    pub fn attach(self: &Arc<Self>, command: &mut Command) -> Option<Handoff> {
        let fd = self.fd.as_ref().map(AsRawFd::as_raw_fd);
        let namespaces = self.namespaces;
        if fd.is_none() && !namespaces.any() {
            return None;
        }
        let mut entry = Entry::new(namespaces, fd, self.proc_access, false);
        let tfo_filter = self.refuse_fast_open;
        let mut handoff = None;
        let mut child_end: Option<OwnedFd> = None;
        let pair = if namespaces.net && !self.listen.is_empty() {
            rustix::net::socketpair(
                rustix::net::AddressFamily::UNIX,
                rustix::net::SocketType::SEQPACKET,
                rustix::net::SocketFlags::CLOEXEC,
                None,
            )
            .ok()
        } else {
            None
        };
        if let Some((ours, theirs)) = pair {
            for (slot, address) in entry.listen.iter_mut().zip(&self.listen) {
                *slot = Some(ListenAddr::new(*address));
            }
            entry.handoff = theirs.as_raw_fd();
            child_end = Some(theirs);
            handoff = Some(Handoff { socket: ours, count: self.listen.len() });
        }
        let domain = Arc::clone(self);
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe work is allowed: `sandbox` and `enter` make system calls on `entry`
        // (a plain value prepared here) and allocate nothing (io::Error::last_os_error and
        // rustix's Errno are plain values). The `Arc` it holds keeps the ruleset descriptor
        // open in the parent until the command is dropped, and so does `child_end` for the
        // handoff socket.
        unsafe {
            command.pre_exec(move || {
                let _keep = (&domain, &child_end);
                sandbox(&entry)?;
                if tfo_filter {
                    refuse_fast_open()?;
                }
                match fd {
                    Some(fd) => enter(fd),
                    None => Ok(()),
                }
            });
        }
        handoff
    }

    /// Enters this domain's Landlock layer in the calling thread (and what it later starts),
    /// for a child built without [`std::process::Command`] (a supervisor's own fork):
    /// async-signal-safe. It enters no namespace.
    pub fn enter_here(&self) -> std::io::Result<()> {
        match self.fd.as_ref() {
            Some(fd) => enter(fd.as_raw_fd()),
            None => Ok(()),
        }
    }
}
