//! `harness`: the operator's command.
//!
//! `harness unslop counts LOG` prints what a finished session's unslop log says, as JSON.
//! `harness bundle build --request FILE --out DIR` builds a launch bundle and prints its digest;
//! `harness bundle verify DIR [--digest D]` checks one against its manifest and digest.
//! `harness doctor --prefix P [--run RUN_DIR [--broker SOCKET --cap-stdin [--claim]]] [--json]`
//! checks an install, a run directory and a broker, one `ok NAME` or `FAIL NAME: reason` line
//! (or JSON object) per check. Each
//! top-level word is one module with one `run`; the command line is parsed by `clap`, so every
//! command answers `--help` and the binary `--version`.
//! Exit 0 on success, 1 when the command fails, 2 on a usage error.

mod bundle;
mod doctor;
mod unslop;

use std::path::PathBuf;
use std::process::ExitCode;

use camino::Utf8PathBuf;
use clap::{CommandFactory as _, Parser, Subcommand};

/// Every help page's layout: what it does, then the usage line.
const TEMPLATE: &str = "{about}\n\nusage: {usage}\n\n{all-args}{after-help}";

const EXIT_STATUS: &str = "\
exit status: 0 on success, 1 when the command ran and failed (the reason on stderr), 2 on a
usage error.";

const DOCTOR_AFTER: &str = "\
Each check prints one line on stdout as it is found: `ok NAME`, `ok NAME: what doctor did`, or
`FAIL NAME: reason`; with --json, one JSON object a line instead, {\"name\", \"ok\", \"reason\"}
(docs/schemas/doctor-check.json). Checks: every file of the install layout (present, a regular
file, readable; binaries executable), each binary's --version, every schema under
share/harness/schemas (present, JSON), `node --version` from PATH (Node 24); with --run, the run
directory as the runner loads it, with the runner's own functions (run.json, the bundle against
bundleDigest, the workspace against the bundle's, the CLI's --version against cliVersion, then
the whole load): what fails here, the runner refuses with exit 2.

With --broker and no --claim, doctor sends `state` alone, which changes nothing on the broker; a
broker that answers it only after a claim (`not-claimed`) passes, noted. With --claim, doctor
makes the runner's first calls as it makes them, and says so: `role.claim` with the run of
--run's bundle, `state`, `message.read` and `role.release`. Do not --claim on a broker whose run
has a live session: the claim would take the role from it, or be refused. message.read marks
messages read: doctor sends it as {\"limit\": 0} with no `after`, the runner's mark-only form,
so a broker that follows docs/protocol.md takes no message. A broker that ignores `limit` and
returns a message fails the check (and may have taken that message). An unreachable broker is
named with the runner's exit on it: 23, broker-unreachable; a refused claim, 21. The capability
never appears in the output.

exit status: 0 when every check passes, 1 when one fails (or stdin holds no usable capability),
2 on a usage error.";

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "harness",
    version,
    about = "harness: the operator's command. Builds and verifies launch bundles (docs/bundle.md), \
             reads unslop logs, and checks an install, a run and a broker (docs/host.md).",
    help_template = TEMPLATE,
    after_help = EXIT_STATUS
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build a launch bundle, or verify one against its manifest.
    #[command(subcommand, help_template = TEMPLATE, after_help = EXIT_STATUS)]
    Bundle(BundleCommand),
    /// Check an install, a run directory's CLI and a broker before a launch relies on them.
    #[command(help_template = TEMPLATE, after_help = DOCTOR_AFTER)]
    Doctor {
        /// The install prefix (`cargo xtask dist --prefix P`, or where the release archive was
        /// unpacked), absolute or relative to the current directory: every binary, asset and
        /// schema under it must be there, and every binary must answer `--version` with this
        /// release.
        #[arg(long, value_name = "PREFIX")]
        prefix: PathBuf,
        /// A run directory, checked as the runner loads it: run.json, and when the bundle is
        /// there, the bundle against run.json's bundleDigest, the workspace against the
        /// bundle's, and the CLI's `--version` against the manifest's cliVersion.
        #[arg(long, value_name = "RUN_DIR")]
        run: Option<PathBuf>,
        /// The broker's socket: doctor checks that `state` answers in the shape the runner
        /// parses, and changes nothing there (with --claim, more). Needs --cap-stdin and --run.
        #[arg(long, value_name = "SOCKET", requires_all = ["cap_stdin", "run"])]
        broker: Option<PathBuf>,
        /// Read the capability from stdin as `{"cap": "..."}` and a newline, as the runner does
        /// (never from argv or the environment). Needs --broker.
        #[arg(long, requires = "broker")]
        cap_stdin: bool,
        /// Claim the role for the run of --run's bundle, as the runner does, check `state` and
        /// `message.read`, and release it; each of those lines says what was done. Needs
        /// --broker.
        #[arg(long, requires = "broker")]
        claim: bool,
        /// One JSON object a check, {"name", "ok", "reason"}, a line each, instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Read what a session's unslop log says.
    #[command(subcommand, help_template = TEMPLATE, after_help = EXIT_STATUS)]
    Unslop(UnslopCommand),
}

#[derive(Debug, Subcommand)]
enum BundleCommand {
    /// Build a launch bundle from a JSON request (docs/bundle.md) and print the bundle's digest,
    /// the sha256 of its manifest.json, alone on stdout: the host puts it in run.json's
    /// bundleDigest.
    #[command(help_template = TEMPLATE, after_help = EXIT_STATUS)]
    Build {
        /// The bundle request, a JSON file (docs/bundle.md).
        #[arg(long, value_name = "FILE")]
        request: Utf8PathBuf,
        /// Where the bundle goes: a directory that does not exist yet, in one that does.
        #[arg(long, value_name = "DIR")]
        out: Utf8PathBuf,
    },
    /// Recompute every digest and mode of a bundle against its manifest, and the manifest
    /// against the digest given; name each mismatch on stdout and exit 1 if there is one.
    #[command(help_template = TEMPLATE, after_help = EXIT_STATUS)]
    Verify {
        /// The bundle's directory.
        dir: PathBuf,
        /// The digest the bundle must have (run.json's bundleDigest); without it,
        /// manifest.json's own fields are unchecked.
        #[arg(long, value_name = "SHA256")]
        digest: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum UnslopCommand {
    /// What an unslop log says: replies checked and flagged, findings per pattern id, notices,
    /// the first reason the check broke (JSON on stdout).
    #[command(help_template = TEMPLATE, after_help = EXIT_STATUS)]
    Counts {
        /// The session's unslop log (RUN/unslop.jsonl).
        log: PathBuf,
    },
}

/// How a command failed.
#[derive(Debug)]
enum Failure {
    /// The command ran and failed; the text says why.
    Failed(String),
}

fn main() -> ExitCode {
    // `args_os`: an argument that is not UTF-8 is named, where clap would only say that one is.
    let args: Result<Vec<String>, _> =
        std::env::args_os().map(std::ffi::OsString::into_string).collect();
    let args = match args {
        Ok(args) => args,
        Err(arg) => {
            eprintln!(
                "harness: the argument {arg:?} is not UTF-8\n\n{}",
                Cli::command().render_usage()
            );
            return ExitCode::from(2);
        }
    };
    if args.len() <= 1 {
        // `harness` alone is a question: the help, exit 0.
        println!("{}", Cli::command().render_help());
        return ExitCode::SUCCESS;
    }
    // Help and version exit 0 on stdout; a usage error exits 2 on stderr.
    let cli = Cli::try_parse_from(args).unwrap_or_else(|error| error.exit());
    let result = match cli.command {
        Command::Bundle(BundleCommand::Build { request, out }) => bundle::build(&request, &out),
        Command::Bundle(BundleCommand::Verify { dir, digest }) => {
            bundle::verify(&dir, digest.as_deref())
        }
        Command::Doctor { prefix, run, broker, cap_stdin: _, claim, json } => {
            doctor::run(&doctor::Request {
                prefix: &prefix,
                run: run.as_deref(),
                broker: broker.as_deref(),
                claim,
                json,
            })
        }
        Command::Unslop(UnslopCommand::Counts { log }) => unslop::counts(&log),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Failed(text)) => {
            eprintln!("harness: error: {text}");
            ExitCode::from(1)
        }
    }
}
