//! The binary as a command-line citizen: `--help` and `--version` answer on stdout with exit 0
//! without reading stdin (the capability's channel), and a bad command line is a usage error
//! with exit 2, the code of a bad run directory, before stdin is read.

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_harness-runner");

#[test]
fn help_and_version_answer_on_stdout_and_exit_0() {
    harness_testkit::assert_help_and_version(
        std::path::Path::new(BIN),
        "harness-runner",
        env!("CARGO_PKG_VERSION"),
    );
}

#[test]
#[expect(clippy::disallowed_methods, reason = "the test runs the runner binary")]
fn help_names_the_exit_codes_and_never_waits_for_stdin() {
    // stdin stays open and empty: a runner that read it first would hang until the deadline.
    let mut child = Command::new(BIN)
        .arg("--help")
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _stdin = child.stdin.take();
    let output = super::fixture::finish(child, std::time::Duration::from_secs(20));
    let help = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(0), "{help}");
    for text in ["usage: harness-runner <RUN_DIR>", "stdin", "HARNESS_LOG_FORMAT", "23 "] {
        assert!(help.contains(text), "{text:?} in {help}");
    }
}

#[test]
#[expect(clippy::disallowed_methods, reason = "the test runs the runner binary")]
fn a_bad_command_line_is_a_usage_error_with_exit_2() {
    for args in [&[][..], &["--frobnicate"], &["a", "b"], &["--", "-x", "y"]] {
        let mut child = Command::new(BIN)
            .args(args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A capability on stdin changes nothing, and never shows up in the error.
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(b"{\"cap\": \"cap-usage-check-1234\"}\n");
        let output = super::fixture::finish(child, std::time::Duration::from_secs(20));
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("harness-runner <RUN_DIR>"), "{args:?}: {err}");
        assert!(!err.contains("cap-usage-check"), "{args:?}: {err}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}
