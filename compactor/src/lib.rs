//! The compactor: rewrites small segments that mix many streams into large objects
//! sorted by stream, so a historical read of one stream costs about one GET per MiB and
//! objects at rest are large.
//!
//! It owns the data movement; metadata owns the decisions. Each pass asks metadata for a
//! plan (the next consecutive entries of each stream in this compactor's shard, sealed at
//! least `min_age` ago, up to `object_bytes`), fetches those blocks with range GETs,
//! merges each stream's consecutive entries into blocks of about `block_bytes` whose
//! records carry their final timestamps, PUTs one object, and asks metadata to swap the
//! entries. Metadata applies each stream's swap only if its old entries are still
//! indexed exactly as planned (a trim or delete in between drops it), in one write batch
//! that also moves the old objects' references to the new one; reads see the old entries
//! or the new one, never both and never neither. Old objects are deleted by metadata's
//! reference-counted collection once nothing names them.
//!
//! Because it talks to metadata only through [`shale_metadata_contract::MetadataApi`],
//! it runs in `shale serve`, next to `shale metadata`, or as `shale compactor` processes
//! that split the streams between them by shard.
//!
//! Key compaction (Kafka's `cleanup.policy=compact`, `by_key`) runs after each pass: it
//! rewrites a stream keeping the last record of each key at its offset. Then the entries
//! left in fragmented compacted objects (less than half their bytes still named, after
//! trims, retention, deletes or key compaction) are rewritten the same way, so those
//! objects are released.
//!
//! Modules: `config`, `compact` (one pass, and defragmenting), `by_key` (key
//! compaction), `tiered` (what it leaves for the table tier), `merge` (blocks into merged
//! blocks laid out in an object), `stats`, `error`.

mod by_key;
mod compact;
mod config;
mod error;
mod merge;
mod stats;
mod tiered;

pub use by_key::{KeyPassReport, MAX_STREAM_BYTES};
pub use compact::{run_compactor, CompactionReport, Compactor};
pub use config::CompactorConfig;
pub use error::CompactorError;
pub use stats::CompactorStats;
pub use tiered::TieredThrough;
