//! harness-tools: the catalogue, the argument checks, the reply cap, the broker client against
//! the scripted broker, and the tool socket.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

mod suite;
