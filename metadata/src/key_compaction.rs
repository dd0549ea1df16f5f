//! Key compaction bookkeeping (Kafka's `cleanup.policy=compact`): which streams have it
//! and how far each was compacted. The rewriting is the compactor's; its result is
//! swapped in by `compaction`'s `commit_compaction` like any compaction's.
//!
//! `q/<stream id>` -> `through u64 | tombstones due ms u64 | stream key`: written when a
//! stream is created or reconfigured with key compaction on (kept if it exists), moved by
//! `KeyCompacted`. A plan reads only these marks, so streams without key compaction cost
//! it nothing: it answers the streams of its shard that still have key compaction on and
//! have records past `through` or tombstones due, and deletes the marks of streams gone
//! or turned off.

use slatedb::config::DurabilityLevel;
use slatedb::WriteBatch;

use crate::{keys, KeyCompactionTarget, KeyCursor, Metadata, MetadataError, Result, StreamRecord};

/// Marks read per page while planning.
const MARK_PAGE: usize = 1_000;

/// A stream's mark: its cursor and its stream key.
struct Mark {
    stream_id: u64,
    cursor: KeyCursor,
    stream_key: Vec<u8>,
}

impl Mark {
    fn encode(cursor: KeyCursor, stream_key: &[u8]) -> Vec<u8> {
        [&cursor.through.to_be_bytes()[..], &cursor.tombstones_due_ms.to_be_bytes(), stream_key].concat()
    }

    fn decode(key: &[u8], value: &[u8]) -> Result<Mark> {
        let corrupt = || MetadataError::Corrupt {
            key: String::from_utf8_lossy(key).into_owned(),
            reason: "not a key compaction mark".into(),
        };
        let stream_id = keys::key_compaction_stream_id_of(key).ok_or_else(corrupt)?;
        let (through, rest) = value.split_first_chunk::<8>().ok_or_else(corrupt)?;
        let (due, stream_key) = rest.split_first_chunk::<8>().ok_or_else(corrupt)?;
        let cursor = KeyCursor { through: u64::from_be_bytes(*through), tombstones_due_ms: u64::from_be_bytes(*due) };
        Ok(Mark { stream_id, cursor, stream_key: stream_key.to_vec() })
    }
}

impl Metadata {
    /// Adds to `batch` the key compaction mark of `record` (stored at `stream_key`) when
    /// its config turns key compaction on and it has none yet. Under the writer lock.
    pub(crate) async fn mark_key_compaction(
        &self,
        batch: &mut WriteBatch,
        stream_key: &[u8],
        record: &StreamRecord,
    ) -> Result<()> {
        if record.config.key_compaction_policy().is_none() {
            return Ok(());
        }
        let key = keys::key_compaction(record.id);
        if self.db.get(&key).await.map_err(|e| self.storage_error(e))?.is_none() {
            batch.put(&key, Mark::encode(KeyCursor::default(), stream_key));
        }
        Ok(())
    }

    /// The streams of the shard whose key compaction may be due.
    pub(crate) async fn plan_key_compaction(&self, shard: u32, shards: u32) -> Result<Vec<KeyCompactionTarget>> {
        self.check_usable()?;
        crate::compaction::shard_of(shard, shards)?;
        let now_ms = self.clock.now_ms();
        let mut targets = Vec::new();
        let mut stale = Vec::new();
        let mut after = Vec::new();
        loop {
            let page = self
                .scan_page(keys::KEY_COMPACTION_PREFIX, &after, MARK_PAGE, DurabilityLevel::Remote, |key, value| {
                    Ok((key.to_vec(), Mark::decode(key, value)?))
                })
                .await?;
            for (_, mark) in &page.items {
                if mark.stream_id % u64::from(shards) != u64::from(shard) {
                    continue;
                }
                let record = self.get_durable::<StreamRecord>(&mark.stream_key).await?;
                let Some(record) =
                    record.filter(|r| r.id == mark.stream_id && r.config.key_compaction_policy().is_some())
                else {
                    stale.push(mark.stream_id);
                    continue;
                };
                let cursor = mark.cursor;
                let tombstones_due = cursor.tombstones_due_ms != 0 && now_ms >= cursor.tombstones_due_ms;
                if record.next_seq <= cursor.through.max(record.trim_point) && !tombstones_due {
                    continue;
                }
                let Some((basin, stream)) = keys::stream_names_of(&mark.stream_key) else {
                    stale.push(mark.stream_id);
                    continue;
                };
                targets.push(KeyCompactionTarget { basin, stream, record, cursor });
            }
            match page.items.last() {
                Some((key, _)) if page.has_more => after = key.clone(),
                _ => break,
            }
        }
        if !stale.is_empty() {
            self.unmark_key_compaction(&stale).await?;
        }
        Ok(targets)
    }

    /// Deletes the marks of streams gone or no longer key-compacted, checked again under
    /// the writer lock (a stream may have been re-configured since the plan read it).
    async fn unmark_key_compaction(&self, stream_ids: &[u64]) -> Result<()> {
        let writer = self.writer.lock().await;
        let mut batch = WriteBatch::new();
        for &stream_id in stream_ids {
            let key = keys::key_compaction(stream_id);
            let Some(value) = self.db.get(&key).await.map_err(|e| self.storage_error(e))? else { continue };
            let mark = Mark::decode(&key, &value)?;
            let Some((basin, stream)) = keys::stream_names_of(&mark.stream_key) else {
                batch.delete(&key);
                continue;
            };
            let record = self.latest_stream(&writer, &basin, &stream).await?;
            if record.is_none_or(|r| r.id != stream_id || r.config.key_compaction_policy().is_none()) {
                batch.delete(&key);
            }
        }
        self.apply(batch).await?;
        self.settle(writer).await
    }

    /// Moves a stream's key cursor; nothing when its mark is gone (the stream with it).
    pub(crate) async fn key_compacted(&self, stream_id: u64, cursor: KeyCursor) -> Result<()> {
        self.check_usable()?;
        let writer = self.writer.lock().await;
        let key = keys::key_compaction(stream_id);
        let Some(value) = self.db.get(&key).await.map_err(|e| self.storage_error(e))? else {
            return self.settle(writer).await;
        };
        let mark = Mark::decode(&key, &value)?;
        let mut batch = WriteBatch::new();
        batch.put(&key, Mark::encode(cursor, &mark.stream_key));
        self.write_durably(writer, batch).await
    }
}
