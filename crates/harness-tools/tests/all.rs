//! harness-tools: the catalogue, the argument checks, the reply cap, and the crate's boundaries.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

mod suite;
