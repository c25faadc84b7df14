//! harness-unslop: the lists, the checker, the log, counts, the RESULT note and the hooks.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

mod suite;
