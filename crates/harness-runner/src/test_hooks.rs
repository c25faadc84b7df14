//! The runner binary's one test hook, compiled in only with the `test-hooks` feature.

use crate::env::Environment;

/// Set only by this workspace's tests: a path; once something is there, a thread of the runner
/// panics, to prove that a panic on another thread than the main one still ends the session.
#[cfg(feature = "test-hooks")]
const PANIC_FOR_TEST: &str = "HARNESS_RUNNER_PANIC_FOR_TEST";

/// With the `test-hooks` feature, which only this workspace's tests enable, starts a thread that
/// panics once the path `HARNESS_RUNNER_PANIC_FOR_TEST` names exists; otherwise, and in every
/// release build, it does nothing.
pub fn panic_for_test(env: &Environment) {
    #[cfg(feature = "test-hooks")]
    if let Some(path) = env.get(PANIC_FOR_TEST).map(std::ffi::OsStr::to_owned) {
        std::thread::spawn(move || {
            let path = std::path::PathBuf::from(path);
            while std::fs::symlink_metadata(&path).is_err() {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            panic!("{PANIC_FOR_TEST}: {} appeared", path.display());
        });
    }
    #[cfg(not(feature = "test-hooks"))]
    let _ = env;
}
