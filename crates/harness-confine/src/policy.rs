//! What a session may reach: the paths, the grants, and the policy mode.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// run.json's `confine`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Landlock must be there and every rule must apply; otherwise the runner exits 2.
    Required,
    /// Apply what the kernel's ABI allows and log what was not (the default).
    #[default]
    BestEffort,
    /// No confinement: the gate is the only check.
    Off,
}

impl Mode {
    /// The name run.json uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "required",
            Self::BestEffort => "best-effort",
            Self::Off => "off",
        }
    }
}

/// What a rule allows beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Read files, list directories, execute files.
    ReadExec,
    /// Read files and list directories.
    Read,
    /// Everything the ABI handles: read, write, create, remove, execute.
    ReadWrite,
    /// One existing file: read and write (append), no truncation, nothing created.
    ReadWriteFile,
    /// A device such as `/dev/null`: read, write, truncate (a shell's `>` truncates).
    Device,
    /// A pathname Unix socket the session connects to (ABI 9's `ResolveUnix`).
    Connect,
}

impl Grant {
    fn label(self) -> &'static str {
        match self {
            Self::ReadExec => "read+exec",
            Self::Read => "read",
            Self::ReadWrite => "read+write",
            Self::ReadWriteFile => "read+append",
            Self::Device => "device",
            Self::Connect => "connect",
        }
    }

    /// The label of the report.
    pub fn as_str(self) -> &'static str {
        self.label()
    }
}

/// One path and what it allows. An `optional` path that does not exist is skipped (a system
/// directory this machine lacks); a required one that cannot be opened is a rule not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRule {
    /// The path (followed if a symlink: the rule is on what it names).
    pub path: PathBuf,
    /// What it allows.
    pub grant: Grant,
    /// True if its absence is no failure.
    pub optional: bool,
}

/// The network a sandbox has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Network {
    /// A network namespace of its own with loopback only: nothing of the machine's network is
    /// reachable but what the runner serves inside it (the default).
    #[default]
    Loopback,
    /// The machine's network, as the seed had it (run.json `"egress": "open"`).
    Host,
}

/// Everything a domain is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The policy mode.
    pub mode: Mode,
    /// The path rules; every other path is denied, reads included.
    pub rules: Vec<PathRule>,
    /// TCP ports `connect` may reach (ABI 4); `None` leaves TCP connect open.
    pub connect_ports: Option<Vec<u16>>,
    /// The network of the sandbox.
    pub network: Network,
    /// Loopback addresses the sandbox's PID 1 listens on inside its network namespace and hands
    /// to the runner, which serves them (its egress); at most 8.
    pub listen: Vec<std::net::SocketAddr>,
    /// True (what [`SessionPaths::policy`] sets) to enter the namespaces; false for the Landlock
    /// domain alone (a measurement's floor).
    pub namespaces: bool,
}

/// The system directories and files a CLI, Node, git and a shell read or run. Everything else of
/// the machine (home directories, `/tmp`, `/var`, `/srv`, `/opt`, `/root`, `/mnt`, ...) is denied.
const SYSTEM_READ_EXEC: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"];

/// The parts of `/etc` the CLIs, Node, git and the C library read: the loader's cache, names
/// (users, hosts, services), time zone, TLS roots, git's and the shell's system files.
const ETC_READ: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/gitconfig",
    "/etc/inputrc",
    "/etc/terminfo",
    "/etc/mime.types",
    "/etc/os-release",
];

/// Devices: the bit buckets and randomness.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// The paths of one session, from which [`SessionPaths::policy`] builds its policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPaths {
    /// The workspace: read and write.
    pub workspace: PathBuf,
    /// `RUN/session`: the CLI's home, config, sessions and temp directory; read and write.
    pub session_dir: PathBuf,
    /// The bundle: read only.
    pub bundle: PathBuf,
    /// Single files read only (the turn's request).
    pub read_files: Vec<PathBuf>,
    /// Single existing files read and appended (the unslop log).
    pub append_files: Vec<PathBuf>,
    /// Programs and assets: each file read and executable. The ones in `installations` bring
    /// their whole installation (see [`installation_root`]).
    pub programs: Vec<PathBuf>,
    /// Programs whose installation comes with them (the CLI, the Node it runs on).
    pub installations: Vec<PathBuf>,
    /// Directories read and written besides the workspace and the session (git's scratch).
    pub scratch: Vec<PathBuf>,
    /// Pathname sockets the session connects to (the tool socket).
    pub sockets: Vec<PathBuf>,
    /// `PATH`, to find the `node` a script CLI runs on.
    pub search_path: Option<OsString>,
    /// TCP ports `connect` may reach, when run.json names them.
    pub connect_ports: Option<Vec<u16>>,
    /// The network of the sandbox.
    pub network: Network,
    /// Loopback addresses the runner serves inside the sandbox's network namespace (see
    /// [`Policy::listen`]).
    pub listen: Vec<std::net::SocketAddr>,
}

impl SessionPaths {
    /// The policy of this session under `mode`.
    pub fn policy(&self, mode: Mode) -> Policy {
        let mut rules = Vec::new();
        let mut push = |path: &Path, grant: Grant, optional: bool| {
            let rule = PathRule { path: path.to_path_buf(), grant, optional };
            if !rules.contains(&rule) {
                rules.push(rule);
            }
        };
        for path in SYSTEM_READ_EXEC {
            push(Path::new(path), Grant::ReadExec, true);
        }
        for path in ETC_READ {
            push(Path::new(path), Grant::Read, true);
        }
        push(Path::new("/proc"), Grant::Read, true);
        for path in DEVICES {
            push(Path::new(path), Grant::Device, true);
        }
        push(&self.bundle, Grant::Read, false);
        for path in &self.read_files {
            push(path, Grant::Read, false);
        }
        for path in &self.programs {
            push(path, Grant::ReadExec, false);
        }
        let node = self.search_path.as_ref().and_then(|search| find_program(search, "node"));
        for program in self.installations.iter().chain(node.as_ref()) {
            let root = installation_root(program);
            push(&root, Grant::ReadExec, false);
        }
        push(&self.workspace, Grant::ReadWrite, false);
        push(&self.session_dir, Grant::ReadWrite, false);
        for path in &self.scratch {
            push(path, Grant::ReadWrite, false);
        }
        for path in &self.append_files {
            push(path, Grant::ReadWriteFile, false);
        }
        for path in &self.sockets {
            push(path, Grant::Connect, true);
        }
        Policy {
            mode,
            rules,
            connect_ports: self.connect_ports.clone(),
            network: self.network,
            listen: self.listen.clone(),
            namespaces: true,
        }
    }
}

/// The first `name` on `search`, as a shell would find it.
fn find_program(search: &std::ffi::OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(search)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// Where the program at `path` is installed: with its links resolved, its outermost
/// `node_modules` directory (an npm install holds the package and its dependencies there, a
/// local install hoists them beside it), or else the directory holding it (a launcher script
/// beside the binaries it names, a standalone binary). Never a directory above a
/// `node_modules`: a CLI installed by `npm install` in a home directory brings that
/// `node_modules`, not the home with its keys.
pub fn installation_root(path: &Path) -> PathBuf {
    let resolved = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let outermost = resolved
        .ancestors()
        .filter(|dir| dir.file_name().is_some_and(|name| name == "node_modules"))
        .last();
    match outermost {
        Some(modules) => modules.to_path_buf(),
        None => resolved.parent().map_or_else(|| resolved.clone(), Path::to_path_buf),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_npm_package_brings_its_node_modules_and_a_binary_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let bin = root.join("prefix/node_modules/pkg/node_modules/dep/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("cli"), "").unwrap();
        std::fs::create_dir_all(root.join("tools/bin")).unwrap();
        std::os::unix::fs::symlink(bin.join("cli"), root.join("tools/bin/cli")).unwrap();
        assert_eq!(
            installation_root(&root.join("tools/bin/cli")),
            root.join("prefix/node_modules")
        );
        std::fs::write(root.join("tools/bin/plain"), "").unwrap();
        assert_eq!(installation_root(&root.join("tools/bin/plain")), root.join("tools/bin"));
    }

    #[test]
    fn the_policy_grants_the_session_and_nothing_of_the_run_directory_else() {
        let paths = SessionPaths {
            workspace: "/w".into(),
            session_dir: "/r/session".into(),
            bundle: "/r/bundle".into(),
            read_files: vec!["/r/turns/0001.request".into()],
            append_files: vec!["/r/unslop.jsonl".into()],
            ..SessionPaths::default()
        };
        let policy = paths.policy(Mode::Required);
        let grant = |path: &str| {
            policy.rules.iter().find(|rule| rule.path == Path::new(path)).map(|rule| rule.grant)
        };
        assert_eq!(grant("/w"), Some(Grant::ReadWrite));
        assert_eq!(grant("/r/session"), Some(Grant::ReadWrite));
        assert_eq!(grant("/r/bundle"), Some(Grant::Read));
        assert_eq!(grant("/r/unslop.jsonl"), Some(Grant::ReadWriteFile));
        assert_eq!(grant("/r"), None);
        assert_eq!(grant("/tmp"), None);
        assert!(policy.rules.iter().all(|rule| !rule.path.starts_with("/r/tmp")));
    }
}
