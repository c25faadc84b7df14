//! `cargo xtask`: the workspace's own automation, written in Rust so that it runs wherever cargo runs.
//!
//! Each subcommand lives in its own module and exposes one `run` function; this file only parses the
//! command line, finds the workspace root and maps an error to an exit code.
//! xtask does not build or measure the harness itself (cargo and the crates' bench targets do) and
//! writes outside the workspace only where `dist --prefix` installs and `--archive` writes,
//! temporary directories, and what `apt-get` installs when `rg`, `fd` or `npm` are missing.

mod bench;
mod canary;
mod cargo;
mod ci;
mod demo;
mod dist;
mod fuzz;
mod process;
mod setup;
mod verify_pi;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  setup      install Node 24, Pi 0.85.1, Claude Code 2.1.296 (pinned in tools/) into .tools/,
             plus rg and fd when missing; link them into .tools/bin/ and check their versions
  ci         the test command: setup, cargo fmt --check, clippy -D warnings, verify-pi, cargo test
             with HARNESS_REQUIRE_CLIS=1, a fixed-seed slice of fuzz-cli, then dist into a
             temporary prefix with its archive, doctor and both example hosts on the unpacked
             archive; stops at the first failure
  bench      run every crate's bench target (the gate's hook and decide(), the bundle, the runner,
             its git tools, the unslop hook, harness-mcp and the tool socket, the load), print the
             summary table of medians, floors, ratios, targets and verdicts, and write
             docs/performance.md
             (`--runs N` timed runs per process, default 500; `--only SECTION`)
  demo       one whole session for each of the real Pi and Claude Code through harness-runner,
             against the scripted broker and model (`--endpoint URL --model M` with
             ANTHROPIC_API_KEY: a real Anthropic-compatible model instead)
  dist       --prefix DIR [--archive FILE.tar.gz]: build the release binaries and install them,
             the assets and the schemas in the layout bundles point into; with --archive, also
             write that install as a relocatable .tar.gz (tar -xzf FILE -C PREFIX unpacks it)
  fuzz-cli   the real Pi and Claude Code as the gate's oracle: generated hostile calls through
             the bundle's adapter, with the real gate and with an allow-all one (`--calls N`,
             default 5000 per CLI; `--seed S`; `--cli pi|claude`)
  fuzz       random trees and calls for both harnesses against the kernel's resolution; fails on
             any allowed call that escapes the workspace (`--calls N`, default 1000000; `--seed S`)
  verify-pi  check harness-gate's port of Pi's path handling against the installed Pi 0.85.1:
             file hashes, Pi's and Node's own functions on a generated corpus (100,000 file
             URLs among it), and NFD and JavaScript white space for every scalar
  help       this text";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let args = std::env::args_os().skip(1).map(std::ffi::OsString::into_string);
    let args: Vec<String> = args
        .collect::<Result<_, _>>()
        .map_err(|arg| anyhow::anyhow!("the argument {arg:?} is not UTF-8"))?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] | ["help" | "-h" | "--help"] => {
            println!("{USAGE}");
            Ok(())
        }
        ["setup"] => setup::run(&workspace_root()?).map(|_tools| ()),
        ["ci"] => ci::run(&workspace_root()?),
        ["bench", args @ ..] => bench::run(&workspace_root()?, args),
        ["verify-pi"] => verify_pi::run(&workspace_root()?),
        ["demo", args @ ..] => demo::run(&workspace_root()?, args),
        ["dist", args @ ..] => dist::run(&workspace_root()?, args),
        ["fuzz", args @ ..] => fuzz::run(args),
        ["fuzz-cli", args @ ..] => canary::run(&workspace_root()?, args),
        _ => bail!("unknown command line `{}`\n\n{USAGE}", args.join(" ")),
    }
}

/// Returns the workspace root: the parent of this package's manifest directory.
///
/// `cargo run` sets `CARGO_MANIFEST_DIR` for the process it starts; the value baked in at compile
/// time is the fallback for a binary started by hand.
fn workspace_root() -> Result<PathBuf> {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let root = manifest_dir.parent().context("the manifest directory has no parent")?;
    for marker in ["Cargo.toml", "tools/package-lock.json"] {
        if !root.join(marker).is_file() {
            bail!("{} is not the harness workspace: {marker} is missing", root.display());
        }
    }
    Ok(root.to_path_buf())
}
