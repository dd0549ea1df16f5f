//! A basin's table tier status (a Shale extension): what has been tiered into its
//! Parquet files, and how far each stream's table copy is behind its log.

use std::sync::Arc;

use shale_storage::object_store::ObjectStore;

use super::{valid_basin, Service};
use crate::auth::{Operation, Target};
use crate::ServiceError;

/// The store the tables are on, and its URL (for the query snippets).
#[derive(Clone)]
pub struct TableStore {
    pub store: Arc<dyn ObjectStore>,
    pub url: String,
}

/// A basin's table: its location, committed passes, rows and files, and per stream
/// how far tiering has come.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableStatus {
    /// The table's directory: the store URL joined with `tables/<basin>`.
    pub location: String,
    /// The current Iceberg table metadata file, once a pass committed.
    pub metadata_location: Option<String>,
    pub after_secs: u64,
    pub passes: u64,
    pub rows: u64,
    pub files: Vec<String>,
    pub streams: Vec<StreamTableStatus>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamTableStatus {
    pub stream: String,
    /// Records before this sequence number are in the table.
    pub tiered_seq: u64,
    /// The stream's tail in the log.
    pub tail: u64,
}

/// Streams a status lists at most.
const MAX_STATUS_STREAMS: usize = 10_000;

impl Service {
    pub async fn table_status(&self, basin: &str) -> Result<TableStatus, ServiceError> {
        valid_basin(basin)?;
        self.allow(Operation::GetBasinConfig, Target::Basin(basin))?;
        let Some(tables) = self.metadata.basin(basin).await?.config.tables else {
            return Err(ServiceError::bad(format!(
                "the table tier is off for basin `{basin}`: set \"tables\" in its config"
            )));
        };
        let table_store =
            self.table_store.as_ref().ok_or_else(|| ServiceError::bad("this process has no table store"))?;
        let (state, _) = shale_tables::read_state(table_store.store.as_ref(), basin).await?;
        let files = shale_tables::all_files(table_store.store.as_ref(), &state).await?;
        let mut streams = Vec::new();
        let mut start_after = String::new();
        loop {
            let page = self.metadata.list_streams(basin, "", &start_after, 1000).await?;
            for summary in &page.items {
                let tail = summary.tail;
                let tiered_seq = match state.positions.get(&summary.name) {
                    Some(position) if position.created_at_ms == summary.created_at_ms => position.next_seq,
                    _ => 0,
                };
                streams.push(StreamTableStatus { stream: summary.name.clone(), tiered_seq, tail });
            }
            match page.items.last() {
                Some(last) if page.has_more && streams.len() < MAX_STATUS_STREAMS => start_after = last.name.clone(),
                _ => break,
            }
        }
        let store = shale_tables::StoreLocation::of_url(&table_store.url);
        let root = shale_tables::table_root(basin);
        let metadata_location =
            (!state.snapshots.is_empty()).then(|| store.uri(&shale_tables::iceberg::metadata_file(&root, state.pass)));
        Ok(TableStatus {
            location: store.uri(&root),
            metadata_location,
            after_secs: tables.after_secs,
            passes: state.pass,
            rows: state.rows,
            files: files.into_iter().map(|f| f.path).collect(),
            streams,
        })
    }
}
