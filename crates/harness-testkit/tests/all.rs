//! The one integration-test binary of harness-testkit: the scripted Messages API on its own, the
//! deadline runner, and the real CLIs driven against the scripted model.

// Clippy's test exemption covers `#[test]` functions only; the helpers beside them are test code
// too, and a test fails by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code fails by panicking")]

mod suite;
