//! harness-bus: the broker client against the scripted broker, the tool socket, and both fed
//! garbage.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

mod suite;
