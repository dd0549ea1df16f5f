//! The gateway: Shale's write path.
//!
//! Callers hand [`Gateway::append`] (or [`Gateway::append_atomic`]) records for any
//! stream. The gateway validates and encodes them into a block right away, then the
//! batcher gathers blocks from every stream and caller into one open segment and seals
//! it adaptively: at once when nothing is uploading, otherwise when an upload slot frees,
//! when `linger` elapses, or when `max_segment_bytes` is reached. Each sealed segment is
//! PUT as one object, committed to metadata ([`shale_metadata_contract::MetadataApi`]) in seal order, and only then is
//! each caller answered with its own ack or error.
//!
//! Modules: `config` (knobs and their costs), `append` (validation and encoding),
//! `batcher` (the open segment and when to seal), `pipeline` (upload and ordered commit),
//! `unit` (what those two share), `metrics`, `error`.

mod append;
mod batcher;
mod config;
mod error;
mod metrics;
mod pipeline;
mod unit;

pub use append::{AppendInput, BatchLimits};
pub use batcher::{EncodedUnit, Gateway, PendingAppend};
pub use config::GatewayConfig;
pub use error::GatewayError;
pub use metrics::GatewayMetrics;
