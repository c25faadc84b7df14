//! The two system calls made between fork and exec, and the ABI query. The only unsafe code of
//! the crate: `landlock_restrict_self` and `landlock_create_ruleset` have no safe wrapper that is
//! allocation-free (the landlock crate's `restrict_self` consumes the ruleset and builds a status
//! value), and `Command::pre_exec` is unsafe by nature.
#![allow(unsafe_code, reason = "raw Landlock system calls and pre_exec, each with its SAFETY")]

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;

use crate::domain::Domain;

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask for the ABI instead of creating a ruleset.
const CREATE_RULESET_VERSION: libc::c_uint = 1;

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

impl Domain {
    /// Makes `command` enter this domain in its child, after fork and before exec; a child that
    /// cannot enter it does not run (its spawn fails). A domain that confines nothing leaves
    /// `command` as it is.
    pub fn attach(self: &Arc<Self>, command: &mut Command) {
        let Some(fd) = self.fd.as_ref().map(AsRawFd::as_raw_fd) else { return };
        let domain = Arc::clone(self);
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe work is allowed: it calls `enter`, which makes two system calls and
        // allocates nothing (io::Error::last_os_error and rustix's Errno are plain values). The
        // `Arc` it holds keeps the descriptor open in the parent until the command is dropped.
        unsafe {
            command.pre_exec(move || {
                let _keep = &domain;
                enter(fd)
            });
        }
    }

    /// Enters this domain in the calling thread (and what it later starts), for a child built
    /// without [`std::process::Command`] (a supervisor's own fork): async-signal-safe.
    pub fn enter_here(&self) -> std::io::Result<()> {
        match self.fd.as_ref() {
            Some(fd) => enter(fd.as_raw_fd()),
            None => Ok(()),
        }
    }
}
