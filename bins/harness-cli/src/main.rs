//! `harness`: the operator's command.
//!
//! `harness unslop counts LOG` prints what a finished session's unslop log says, as JSON.
//! `harness bundle build --request FILE --out DIR` builds a launch bundle and prints its digest;
//! `harness bundle verify DIR [--digest D]` checks one against its manifest and digest. Each top-level word is one module with one `run(args)`.
//! Exit 0 on success, 1 when the command fails, 2 on a usage error.

mod bundle;
mod unslop;

use std::process::ExitCode;

const USAGE: &str = "\
usage: harness <command> ...

commands:
  bundle build --request FILE --out DIR
                      build a launch bundle from a JSON request (docs/bundle.md); prints
                      the bundle's digest (the sha256 of its manifest.json)
  bundle verify DIR [--digest SHA256]
                      recompute every digest and mode of a bundle against its manifest, and
                      the manifest against the digest given; names each mismatch and exits 1
                      if there is one
  unslop counts LOG   what an unslop log says: replies checked and flagged, findings per
                      pattern id, notices, the first reason the check broke (JSON on stdout)";

/// How a command failed.
#[derive(Debug)]
enum Failure {
    /// The command line is wrong; the text says how.
    Usage(String),
    /// The command ran and failed; the text says why.
    Failed(String),
}

fn main() -> ExitCode {
    // `args_os`: `std::env::args` panics on an argument that is not UTF-8.
    let args: Result<Vec<String>, _> =
        std::env::args_os().skip(1).map(std::ffi::OsString::into_string).collect();
    let args = match args {
        Ok(args) => args,
        Err(arg) => {
            eprintln!("harness: the argument {arg:?} is not UTF-8\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        [] | ["help" | "-h" | "--help"] => {
            println!("{USAGE}");
            Ok(())
        }
        ["unslop", rest @ ..] => unslop::run(rest),
        ["bundle", rest @ ..] => bundle::run(rest),
        _ => Err(Failure::Usage(format!("unknown command line `{}`", args.join(" ")))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(text)) => {
            eprintln!("harness: {text}\n\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(text)) => {
            eprintln!("harness: error: {text}");
            ExitCode::from(1)
        }
    }
}
