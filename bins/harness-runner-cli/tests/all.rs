//! harness-runner (the binary) against the scripted broker, with small adapter scripts.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

mod suite;
