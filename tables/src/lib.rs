//! The table tier: records of a basin's streams written as Parquet files that SQL
//! engines (DuckDB, Spark, pyiceberg) read straight from the object store.
//!
//! - [`parquet_file`]: one file from records, one row per record (`stream`, `seq_num`,
//!   `timestamp`, `headers`, `body`), sorted by stream then sequence number, zstd
//!   compressed, with column statistics so engines prune by stream, sequence and time.
//! - [`tiering`]: passes that write each opted-in basin's records, once old enough, as
//!   such files under `tables/<basin>/` on the store, exactly once.

pub mod parquet_file;
pub mod tiering;

pub use parquet_file::{write_parquet, TableRow, ROW_GROUP_ROWS};
pub use tiering::{read_state, run_tiering, shard_owns, table_root, StreamPosition, TableState, Tierer, TieringConfig};

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
}
