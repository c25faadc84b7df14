//! The binary as a command-line citizen.

#[test]
fn help_and_version_answer_on_stdout_and_exit_0_without_serving() {
    harness_testkit::assert_help_and_version(
        std::path::Path::new(env!("CARGO_BIN_EXE_harness-mcp")),
        "harness-mcp",
        env!("CARGO_PKG_VERSION"),
    );
}
