//! harness-unslop (the binary): its contract as a hook, and the check inside the real Claude Code
//! and Pi.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

mod suite;
