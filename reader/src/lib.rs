//! The reader: Shale's read path.
//!
//! [`Reader::read`] resolves a start position (sequence number, timestamp or offset from
//! the tail) against the stream's durable state, walks index entries from metadata, and
//! fetches each entry's block with a range GET on its segment object through a moka
//! cache weighed in bytes. Records are numbered from the entry's first sequence number
//! and timestamped by replaying the sequencer's resolver. With `wait`, an empty read
//! sleeps on the stream's tail notification from metadata (never a polling timer) until
//! records arrive. Metadata is any [`shale_metadata_contract::MetadataApi`]: in process or remote.
//!
//! A reader may be given a [`History`] (the table tier) that serves reads starting
//! below a stream's trim point.
//!
//! Modules: `config`, `memory` (what the block cache is sized by), `cache` (blocks and
//! index entries), `read` (positions and limits), `history`, `error`.

mod cache;
mod config;
mod error;
mod history;
mod memory;
mod read;

pub use cache::CacheStats;
pub use config::{ReaderConfig, DEFAULT_CHUNK_BYTES};
pub use error::ReaderError;
pub use history::{History, HistoryOutput, HistoryRead};
pub use memory::{MAX_DEFAULT_BLOCK_CACHE_BYTES, MIN_BLOCK_CACHE_BYTES};
pub use read::{ReadCursor, ReadLimits, ReadOutput, ReadRequest, ReadStart, Reader};
