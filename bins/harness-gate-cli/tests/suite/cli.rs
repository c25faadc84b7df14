//! The binary as a command-line citizen, without weakening the contract: only `--help` or
//! `--version` alone answer with exit 0; any other command line still blocks (contract.rs).

#[test]
fn help_and_version_answer_on_stdout_and_exit_0() {
    harness_testkit::assert_help_and_version(
        std::path::Path::new(env!("CARGO_BIN_EXE_harness-gate")),
        "harness-gate",
        env!("CARGO_PKG_VERSION"),
    );
}
