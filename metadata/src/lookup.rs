//! Index lookups for readers.

use slatedb::config::{DurabilityLevel, ScanOptions};

use crate::{keys, IndexEntry, Metadata, MetadataError, Result};

impl Metadata {
    /// Up to `limit` index entries of the stream, starting with the one that holds
    /// `seq` (or the first after it), in sequence order.
    pub async fn entries_from(&self, stream_id: u64, seq: u64, limit: usize) -> Result<Vec<IndexEntry>> {
        self.check_usable()?;
        self.scan_entries(keys::index(stream_id, seq), keys::end_of_stream(b"i/", stream_id), limit).await
    }

    /// The first index entry of the stream whose last record has a timestamp at or
    /// after `timestamp`.
    pub async fn entry_at_time(&self, stream_id: u64, timestamp: u64) -> Result<Option<IndexEntry>> {
        self.check_usable()?;
        let entries =
            self.scan_entries(keys::by_time(stream_id, timestamp, 0), keys::end_of_stream(b"t/", stream_id), 1).await?;
        Ok(entries.into_iter().next())
    }

    async fn scan_entries(&self, start: Vec<u8>, end: Vec<u8>, limit: usize) -> Result<Vec<IndexEntry>> {
        let options = ScanOptions { durability_filter: DurabilityLevel::Remote, ..ScanOptions::default() };
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
