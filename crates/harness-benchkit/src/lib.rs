//! What the workspace's process-level bench targets share, so that each bench target holds only
//! what it measures: [`Samples`] and their nearest-rank quantiles, [`time_interleaved`] (processes
//! spawned in turns so that a noisy neighbour slows them alike), [`Memory`] read from
//! `/proc/PID/status`, [`runs`] (how many timed runs `cargo xtask bench --runs N` asked for) and
//! [`Row`]: a figure judged against its target, printed by a bench target as one machine-readable
//! `bench-row` line that `cargo xtask bench` reads back into its summary table.
//!
//! It measures nothing itself; bench targets and xtask link it, no shipped binary does.

#![forbid(unsafe_code)]

mod error;
mod memory;
mod row;
mod samples;
mod spawn;

pub use error::BenchError;
pub use memory::Memory;
pub use row::{Row, Unit};
pub use samples::{Samples, median};
pub use spawn::{RUNS_ENV, WARMUP_RUNS, binary_beside, runs, time_interleaved};
