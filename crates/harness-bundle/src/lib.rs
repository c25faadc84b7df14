//! The launch bundle: the directory a session runs from, built once per launch by the host.
//!
//! [`build_bundle`] takes everything the spec's `buildBundle` takes and writes
//! prompt.md, skills/, policy.json, tools.json, manifest.json and the harness module's own files,
//! into a temporary sibling that is renamed into place: a bundle appears whole or not at all and
//! is never overwritten. It returns the bundle's digest, the sha256 of manifest.json, which seals
//! every file the session runs from. [`verify_bundle`] checks a bundle against its manifest and
//! digest; [`SealedBundle`] is the runner's view: verified at start, checked again before each
//! turn. This crate never follows a symlink and never names a harness itself.

mod build;
mod bundle_files;
mod error;
mod prompt;
mod request;
mod request_file;
mod routes;
mod skills;
mod staging;
mod verify;

pub use build::{BUNDLE_VERSION, Built, PROMPT_BYTES, build_bundle};
pub use bundle_files::{Manifest, ManifestAsset, Policy, ReliesOn};
pub use error::{BundleError, RefusalReason};
pub use request::{Arbiters, BundleRequest, CredentialStatus, SessionInfo};
pub use request_file::{LoadedRequest, RequestFile, load_request};
pub use routes::{Route, SessionModel, has_fallback, session_model};
pub use skills::SKILL_BYTES;
pub use staging::hex_sha256;
pub use verify::{Mismatch, SealedBundle, Verification, verify_bundle};
