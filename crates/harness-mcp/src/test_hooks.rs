//! The server's one test hook, compiled in only with the `test-hooks` feature.

/// Set only by this workspace's tests, to prove that a panic on any thread ends the server.
#[cfg(feature = "test-hooks")]
const PANIC_FOR_TEST: &str = "HARNESS_MCP_PANIC_FOR_TEST";

/// With the `test-hooks` feature, which only this workspace's tests enable, panics on a thread of
/// its own when `HARNESS_MCP_PANIC_FOR_TEST` is set; otherwise, and in every release build, it
/// does nothing.
pub fn panic_for_test() {
    #[cfg(feature = "test-hooks")]
    if std::env::var_os(PANIC_FOR_TEST).is_some() {
        // Another thread than the one serving: the panic hook must end the process anyway.
        std::thread::spawn(|| panic!("{PANIC_FOR_TEST} is set"));
    }
}
