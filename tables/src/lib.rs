//! The table tier: records of a basin's streams written as Parquet files that SQL
//! engines (DuckDB, Spark, pyiceberg) read straight from the object store.
//!
//! - [`parquet_file`]: one file from records, one row per record (`stream`, `seq_num`,
//!   `timestamp`, `headers`, `body`), sorted by stream then sequence number, zstd
//!   compressed, with column statistics so engines prune by stream, sequence and time.

pub mod parquet_file;

pub use parquet_file::{write_parquet, TableRow, ROW_GROUP_ROWS};

/// What can go wrong in the table tier.
#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    #[error("writing Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
}
