//! Foundations shared by every role: object stores, storage decorators, the clock and
//! a metrics histogram.
//!
//! - [`open_store`]: turns `memory://`, `file://path` or `s3://bucket/prefix` into an
//!   object store (S3 settings from the standard `AWS_*` environment).
//! - [`InstrumentedStore`]: counts object requests and bytes, for `/metrics` and for
//!   tests that assert how many objects a workload wrote.
//! - [`FailingStore`]: fault injection, failing chosen PUTs (tests in process).
//! - [`FaultyStore`]: a seeded random fraction of chosen requests fails (process-level
//!   fault injection, `store_faults`).
//! - [`DelayedStore`]: object-store latency in user space, for benchmarks and tests at
//!   S3-like latency.
//! - [`RecentWrites`]: this process's recent small PUTs answer its range reads from
//!   memory (a reader following what its own gateway just wrote).
//! - [`SyncedDir`]: fsyncs what the local-filesystem store writes, so acked data survives
//!   a power loss, and maps the files long range reads ask for (the page cache's bytes,
//!   not a copy); a put marked [`PutInPlace`] (an object nothing reads before a later
//!   write names it) is written there under its own name, without a rename.
//! - [`Histogram`]: latency histogram rendered as Prometheus text.
//! - [`describe`]: a failed request's kind, for clients (no paths from the server's disk).
//! - [`Clock`]: the one place that reads wall-clock time, so tests can control it.
//! - [`ids`]: the one place ids and random numbers come from.
//!
//! `object_store` (the version slatedb uses) is re-exported so the workspace agrees on
//! one version.

mod clock;
mod delayed;
mod describe;
mod failing;
mod faulty;
mod histogram;
pub mod ids;
mod in_place;
mod instrumented;
mod mapped;
mod open;
mod recent;
mod synced;

pub use clock::{Clock, ManualClock, SystemClock};
pub use delayed::DelayedStore;
pub use describe::describe;
pub use failing::FailingStore;
pub use faulty::FaultyStore;
pub use histogram::{render_counters, render_gauges, Histogram, LATENCY_BUCKETS};
pub use in_place::PutInPlace;
pub use instrumented::{coalesced_requests, InstrumentedStore, StoreCounters};
pub use mapped::MAPPED_READ_MIN;
pub use object_store;
pub use open::{open_store, open_store_with, StoreError};
pub use recent::RecentWrites;
pub use synced::SyncedDir;
