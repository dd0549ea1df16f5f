//! Rewriting fragmented compacted objects. A compacted object holds the blocks of many
//! streams; trims, retention, deletes and key compaction remove some of them, and the
//! object stays until the last one goes. So once less than half of an object's bytes are
//! still named, its remaining entries are offered for rewriting, and the object is
//! released when they have moved.
//!
//! - `f/<segment>`: the object is fragmented. Written in the batch whose reference
//!   decrement makes it so (`refs`), deleted with its last reference, or by a plan that
//!   finds it stale.
//! - `r/<segment><stream id>` -> the stream's key: written with each compaction swap for
//!   the streams the new object holds, so a plan finds the object's entries without
//!   reading the object; deleted with the object (`reclaim`).
//!
//! A plan answers, for the streams of the compactor's shard, their entries in fragmented
//! objects as runs of consecutive entries, which the compactor rewrites and swaps in
//! like any compaction's.

use slatedb::config::{DurabilityLevel, ReadOptions};
use slatedb::WriteBatch;

use crate::{keys, CompactionPlan, CompactionRun, IndexEntry, Metadata, MetadataError, Result, StreamRecord};

/// Fragmented objects looked at per plan.
const MARK_PAGE: usize = 1_000;
/// Index entries of a stream read per scan while finding an object's entries.
const ENTRY_PAGE: usize = 10_000;

impl Metadata {
    /// Runs of the shard's entries in fragmented compacted objects, up to about `max_bytes`.
    pub(crate) async fn plan_defragment(&self, shard: u32, shards: u32, max_bytes: u64) -> Result<CompactionPlan> {
        self.check_usable()?;
        crate::compaction::shard_of(shard, shards)?;
        let corrupt = |key: &[u8], what: &str| MetadataError::Corrupt {
            key: String::from_utf8_lossy(key).into_owned(),
            reason: format!("not {what}"),
        };
        let marks = self
            .scan_page(keys::FRAGMENTED_PREFIX, &[], MARK_PAGE, DurabilityLevel::Remote, |key, _| {
                keys::segment_id_of(key).ok_or_else(|| corrupt(key, "a fragmented mark"))
            })
            .await?;
        let mut plan = CompactionPlan::default();
        let mut stale = Vec::new();
        for segment_id in marks.items {
            if plan.pending_bytes >= max_bytes {
                break;
            }
            let refs = self.segment_refs(segment_id, &Self::durable_read()).await?;
            if !refs.is_some_and(|refs| refs.fragmented()) {
                stale.push(segment_id);
                continue;
            }
            let prefix = keys::compacted_streams_of(segment_id);
            let streams = self
                .scan_page(&prefix, &[], usize::MAX, DurabilityLevel::Remote, |key, value| {
                    let id = key.get(prefix.len()..).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes);
                    Ok((id.ok_or_else(|| corrupt(key, "an object's stream"))?, value.to_vec()))
                })
                .await?;
            for (stream_id, stream_key) in streams.items {
                if stream_id % u64::from(shards) != u64::from(shard) {
                    continue;
                }
                let record = self.get_durable::<StreamRecord>(&stream_key).await?;
                let Some(record) = record.filter(|record| record.id == stream_id) else { continue };
                let Some((basin, stream)) = keys::stream_names_of(&stream_key) else { continue };
                for run in self.runs_in_object(stream_id, record.trim_point, segment_id).await? {
                    plan.pending_bytes += run.iter().map(|e| u64::from(e.len)).sum::<u64>();
                    let (basin, stream) = (basin.clone(), stream.clone());
                    plan.runs.push(CompactionRun { basin, stream, stream_id, entries: run });
                }
            }
            let sealed = ulid::Ulid(segment_id).timestamp_ms();
            plan.oldest_sealed_ms = if plan.oldest_sealed_ms == 0 { sealed } else { plan.oldest_sealed_ms.min(sealed) };
        }
        if !stale.is_empty() {
            self.forget_stale_marks(&stale).await?;
        }
        Ok(plan)
    }

    /// Deletes the marks of objects released or no longer fragmented, checked again
    /// under the writer lock.
    async fn forget_stale_marks(&self, segment_ids: &[u128]) -> Result<()> {
        let writer = self.writer.lock().await;
        let mut batch = WriteBatch::new();
        for &segment_id in segment_ids {
            let refs = self.segment_refs(segment_id, &ReadOptions::default()).await?;
            if !refs.is_some_and(|refs| refs.fragmented()) {
                batch.delete(keys::fragmented(segment_id));
            }
        }
        self.apply(batch).await?;
        self.settle(writer).await
    }

    /// The stream's entries from `from_seq` that lie in object `segment_id`, as maximal
    /// runs of consecutive entries, read a page at a time.
    async fn runs_in_object(&self, stream_id: u64, from_seq: u64, segment_id: u128) -> Result<Vec<Vec<IndexEntry>>> {
        let end = keys::end_of_stream(b"i/", stream_id);
        let mut from = keys::index(stream_id, from_seq);
        let (mut runs, mut run) = (Vec::new(), Vec::new());
        loop {
            let page = self.scan_entries(from, end.clone(), ENTRY_PAGE, DurabilityLevel::Remote).await?;
            for entry in &page {
                if entry.segment_id == segment_id {
                    run.push(*entry);
                } else if !run.is_empty() {
                    runs.push(std::mem::take(&mut run));
                }
            }
            match page.last() {
                Some(last) if page.len() == ENTRY_PAGE => from = keys::index(stream_id, last.end_seq()),
                _ => break,
            }
        }
        if !run.is_empty() {
            runs.push(run);
        }
        Ok(runs)
    }

    /// Adds to `batch` the deletion of what `r/` keeps of a deleted object.
    pub(crate) async fn forget_object_streams(&self, batch: &mut WriteBatch, segment_id: u128) -> Result<()> {
        let prefix = keys::compacted_streams_of(segment_id);
        let keys = self.scan_page(&prefix, &[], usize::MAX, DurabilityLevel::Memory, |key, _| Ok(key.to_vec())).await?;
        for key in keys.items {
            batch.delete(key);
        }
        Ok(())
    }
}
