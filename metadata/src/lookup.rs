//! Index lookups for readers.

use slatedb::config::DurabilityLevel;

use crate::{keys, IndexEntry, Lookup, Metadata, MetadataError, Result};

impl Metadata {
    /// Runs one index lookup: the single place each [`Lookup`] meets its scan. Entries
    /// are read in sequence order, from the `i/` family by last sequence number or the
    /// `t/` family by last timestamp.
    pub(crate) async fn run_lookup(&self, query: Lookup) -> Result<Vec<IndexEntry>> {
        self.check_usable()?;
        match query {
            Lookup::From { stream_id, seq, limit } => {
                // A live read woken by a commit finds that commit's entries in memory.
                let published = self.tails.entries_from(stream_id, seq, limit);
                if !published.is_empty() {
                    return Ok(published);
                }
                let (start, end) = (keys::index(stream_id, seq), keys::end_of_stream(b"i/", stream_id));
                self.scan_entries(start, end, limit, DurabilityLevel::Remote).await
            }
            Lookup::AtTime { stream_id, timestamp } => {
                let start = keys::by_time(stream_id, timestamp, 0);
                self.scan_entries(start, keys::end_of_stream(b"t/", stream_id), 1, DurabilityLevel::Remote).await
            }
        }
    }

    /// Up to `limit` index entries between two keys of one family; readers see only
    /// durable ones, the writer (reclaiming space) the latest.
    pub(crate) async fn scan_entries(
        &self,
        start: Vec<u8>,
        end: Vec<u8>,
        limit: usize,
        durability_filter: DurabilityLevel,
    ) -> Result<Vec<IndexEntry>> {
        let options = Self::scan_options(durability_filter);
        let mut iter = self.db.scan_with_options(start..end, &options).await.map_err(|e| self.storage_error(e))?;
        let mut entries = Vec::new();
        while entries.len() < limit {
            let Some(kv) = iter.next().await.map_err(|e| self.storage_error(e))? else { break };
            let entry = IndexEntry::decode(&kv.value).ok_or_else(|| MetadataError::Corrupt {
                key: format!("{:?}", kv.key),
                reason: "bad index entry".into(),
            })?;
            entries.push(entry);
        }
        Ok(entries)
    }
}
