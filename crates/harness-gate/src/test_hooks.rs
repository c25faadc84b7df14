//! The gate binary's one test hook, compiled in only with the `test-hooks` feature.

/// Set only by this workspace's tests, to prove that a panic in the gate blocks the call.
#[cfg(feature = "test-hooks")]
const PANIC_FOR_TEST: &str = "HARNESS_GATE_PANIC_FOR_TEST";

/// With the `test-hooks` feature, which only this workspace's tests enable, panics when
/// `HARNESS_GATE_PANIC_FOR_TEST` is set; otherwise, and in every release build, it does nothing.
pub fn panic_for_test() {
    #[cfg(feature = "test-hooks")]
    if std::env::var_os(PANIC_FOR_TEST).is_some() {
        panic!("{PANIC_FOR_TEST} is set");
    }
}
