//! The table tier: records of a basin's streams written as Parquet files that SQL
//! engines (DuckDB, Spark, pyiceberg) read straight from the object store.
//!
//! - [`parquet_file`]: one file from records, one row per record (`stream`, `seq_num`,
//!   `timestamp`, `headers`, `body`), sorted by stream then sequence number, zstd
//!   compressed, with column statistics so engines prune by stream, sequence and time.
//!   JSON bodies may add typed columns ([`body_columns`]).
//! - [`iceberg`]: the Iceberg (format v2) metadata naming those files: manifests,
//!   manifest lists, snapshots and table metadata, Avro ([`avro`]) and JSON to the spec.
//! - [`tiering`]: passes that write each opted-in basin's records, once old enough, as
//!   such files under `tables/<basin>/` on the store, and commit them exactly once;
//!   `attempts`: the keys each attempt at a pass writes under, declared first, and the
//!   sweep of what attempts that cannot commit left.
//! - [`maintenance`]: what keeps a table bounded as passes accumulate: small files
//!   rewritten, manifests merged, snapshots expired, what they named collected; and
//!   [`archive`]: closed days' files moved out of the commit record.
//! - [`history`]: reads of records the log no longer holds, served from those files.
//! - [`pass_stats`]: where tiering passes spend their time.

pub mod archive;
mod attempts;
pub mod avro;
pub mod body_columns;
mod file_reader;
pub mod history;
pub mod iceberg;
pub mod maintenance;
pub mod parquet_file;
pub mod pass_stats;
pub mod tiering;

pub use archive::{all_files, Archive};
pub use attempts::DECLARATION_GRACE_MS;
pub use history::TableHistory;
pub use iceberg::StoreLocation;
pub use maintenance::Maintenance;
pub use parquet_file::{write_parquet, TableRow, ROW_GROUP_ROWS};
pub use pass_stats::{PassStats, PassTotals, Step};
pub use tiering::{
    read_state, run_tiering, shard_owns, table_root, tiered_through, version_hint_path, StreamPosition, TableState,
    Tierer, TieringConfig,
};

/// FNV-1a from `seed`: stable across processes and releases, unlike the standard hasher.
pub(crate) fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325 ^ seed, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}

/// What can go wrong in the table tier.
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    #[error("writing Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error(transparent)]
    Metadata(#[from] shale_metadata_contract::MetadataError),
    #[error(transparent)]
    Reader(#[from] shale_reader::ReaderError),
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    #[error("table state: {0}")]
    State(#[from] serde_json::Error),
    #[error("table file {0}")]
    File(String),
}
