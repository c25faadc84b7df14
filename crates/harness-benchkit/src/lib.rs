//! What the workspace's process-level bench targets share, so that each bench target holds only
//! what it measures: [`Samples`] and their nearest-rank quantiles, [`time_interleaved`] (processes
//! spawned in turns so that a noisy neighbour slows them alike), [`Memory`] read from
//! `/proc/PID/status`, [`runs`] (how many timed runs `cargo xtask bench --runs N` asked for) and
//! [`result_line`], the one machine-readable line a bench target prints for `cargo xtask bench`.
//!
//! It measures nothing itself and is a dev-dependency only: no shipped binary links it.

#![forbid(unsafe_code)]

mod error;
mod memory;
mod samples;
mod spawn;

pub use error::BenchError;
pub use memory::Memory;
pub use samples::{Samples, median};
pub use spawn::{RUNS_ENV, WARMUP_RUNS, binary_beside, result_line, runs, time_interleaved};
