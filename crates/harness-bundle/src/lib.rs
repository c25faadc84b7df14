//! The launch bundle: the directory a session runs from, built once per launch by the host.
//!
//! [`build_bundle`] takes everything the spec's `buildBundle` takes and writes
//! prompt.md, skills/, policy.json, tools.json, manifest.json and the harness module's own files,
//! into a temporary sibling that is renamed into place: a bundle appears whole or not at all and
//! is never overwritten. This crate never follows a symlink and never names a harness itself.

mod build;
mod error;
mod prompt;
mod request;
mod request_file;
mod routes;
mod skills;
mod staging;
mod verify;

pub use build::{BUNDLE_VERSION, build_bundle};
pub use error::{BundleError, RefusalReason};
pub use request::{Arbiters, BundleRequest, CredentialStatus, SessionInfo};
pub use request_file::{LoadedRequest, load_request};
pub use routes::{Route, SessionModel, has_fallback, session_model};
pub use skills::SKILL_BYTES;
pub use staging::hex_sha256;
pub use verify::{Mismatch, Verification, verify_bundle};
