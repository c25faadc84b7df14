//! The binary as a command-line citizen.

#[test]
fn help_and_version_answer_on_stdout_and_exit_0() {
    harness_testkit::assert_help_and_version(
        std::path::Path::new(env!("CARGO_BIN_EXE_harness-unslop")),
        "harness-unslop",
        env!("CARGO_PKG_VERSION"),
    );
}
