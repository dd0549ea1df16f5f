//! Storage foundations shared by every role.
//!
//! - [`open_store`]: turns `memory://`, `file://path` or `s3://bucket/prefix` into an
//!   object store (S3 settings from the standard `AWS_*` environment).
//! - [`InstrumentedStore`]: counts object requests and bytes, for `/metrics` and for
//!   tests that assert how many objects a workload wrote.
//! - [`FailingStore`]: fault injection, failing chosen PUTs.
//! - [`Clock`]: the one place that reads wall-clock time, so tests can control it.
//!
//! `object_store` is re-exported from slatedb so the workspace agrees on one version.

mod clock;
mod failing;
mod instrumented;
mod open;

pub use clock::{Clock, SystemClock};
pub use failing::FailingStore;
pub use instrumented::{InstrumentedStore, StoreCounters};
pub use open::{open_store, StoreError};
pub use slatedb::object_store;
