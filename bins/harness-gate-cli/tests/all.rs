//! harness-gate (the binary): contract 1, and the gate inside the real Claude Code and Pi.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

mod suite;
