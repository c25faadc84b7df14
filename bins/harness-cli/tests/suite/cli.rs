//! The binary as a command-line citizen: `--help` and `--version` on stdout with exit 0, a help
//! of their own for `bundle build` and `bundle verify`, and a usage error (exit 2, on stderr)
//! for a command line it does not know.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_harness");

#[expect(clippy::disallowed_methods, reason = "the test runs the harness binary")]
fn harness(args: &[&str]) -> Output {
    Command::new(BIN).args(args).env_clear().output().unwrap()
}

#[test]
fn help_and_version_answer_on_stdout_and_exit_0() {
    harness_testkit::assert_help_and_version(
        std::path::Path::new(BIN),
        "harness",
        env!("CARGO_PKG_VERSION"),
    );
}

#[test]
fn bundle_build_and_verify_have_help_of_their_own() {
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["bundle", "build", "--help"],
            &["usage: harness bundle build --request <FILE> --out <DIR>", "bundleDigest", "exit"],
        ),
        (&["bundle", "verify", "--help"], &["usage: harness bundle verify", "--digest", "exit"]),
        (&["bundle", "--help"], &["usage: harness bundle <COMMAND>", "build", "verify"]),
    ];
    for (args, texts) in cases {
        let output = harness(args);
        let help = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        assert!(output.stderr.is_empty(), "{args:?}: {output:?}");
        for text in texts {
            assert!(help.contains(text), "{args:?}: {text:?} in {help}");
        }
    }
}

#[test]
fn an_unknown_argument_is_a_usage_error_with_exit_2() {
    for args in [
        &["--frobnicate"][..],
        &["bundle", "build", "--request", "r.json", "--out", "o", "--extra"],
        &["bundle", "verify"],
        &["bundle", "verify", "dir", "--digest"],
        &["bundle", "pack"],
    ] {
        let output = harness(args);
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        // clap's error: what was wrong, and where the help is.
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains("--help"), "{args:?}: {err}");
        assert!(output.stdout.is_empty(), "{args:?}: {output:?}");
    }
}
