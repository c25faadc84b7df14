//! harness-mcp (the library): the stdio transport's answers to malformed input and its
//! cancellation safety under rmcp's `select!`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

mod suite;
