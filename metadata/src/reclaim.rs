//! Reclaiming space: what trims, retention, `delete_on_empty` and deletes make
//! unreadable is removed from the index, and segment objects nothing references any more
//! are deleted.
//!
//! One pass, every `gc_interval`:
//! 1. **Streams**: the streams whose reclaim agenda key fell due are visited (`agenda`:
//!    trims, retention deadlines and `delete_on_empty` deadlines schedule them; streams
//!    with nothing due are not read), then rescheduled. Index entries that
//!    lie wholly below the trim point, or that were appended longer ago than the
//!    stream's `retention_policy.age` (by when the append happened, as S2 counts it; a
//!    client's timestamps in the past do not age records), are removed; retention moves
//!    the trim point past them, so reads start at the first retained record. Records expire a
//!    whole append at a time: an append expires when its last record does. A stream
//!    with `delete_on_empty` that holds no readable record and saw no record or creation
//!    for `min_age` is deleted.
//! 2. **Deleted streams** (`d/` markers left by stream and basin deletes): their index
//!    entries are removed, then the marker.
//! 3. **Released segments** (`z/`): once `delete_grace` has passed since their last block
//!    was released, the object is deleted, then the marker. Only durable markers are
//!    acted on, so a fenced instance never deletes what the new writer still references.
//!
//! Every removal of index entries decrements the segments' references in the same write
//! batch (`refs`), a page of entries at a time, read without the writer lock (which
//! appends wait for) and applied under it. Steps 1 and 2 apply their batches one after
//! another and wait for durability once, at the end. The space gauges are refreshed from
//! every `o/` and `z/` key only after a pass in which segments changed.

use std::sync::atomic::Ordering;

use futures::StreamExt;

use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt};
use slatedb::config::DurabilityLevel;
use slatedb::WriteBatch;

use crate::agenda::{appended_at, delete_on_empty_deadline, retention_age_ms};
use crate::refs::{Released, Releases, SegmentRefs};
use crate::{keys, Metadata, MetadataError, Result, RetentionPolicy, Stored, StreamRecord};

/// Stream records read per page of step 1.
const STREAM_PAGE: usize = 1_000;
/// Index entries removed per write batch.
const ENTRY_PAGE: usize = 512;
/// Object deletions in flight at once: at store latency a pass waits about one round
/// trip per this many released segments.
const DELETE_CONCURRENCY: usize = 16;
/// Released segments looked at per pass.
const RELEASED_PAGE: usize = 10_000;

/// A page of one stream's expired entries, read without the writer lock.
pub(crate) struct ExpiryPage {
    pub stream_id: u64,
    /// The retention it was read under: a change before it is applied means reading again.
    pub retention: Option<RetentionPolicy>,
    pub batch: WriteBatch,
    pub entries: u64,
    /// Segments that lose their last reference.
    pub released: u64,
    /// The trim point past the removed entries.
    pub trim_to: u64,
    /// A full page: more may follow.
    pub more: bool,
}

impl ExpiryPage {
    /// Whether the page still applies to the stream's latest record: the same stream under
    /// the same retention (a trim since only moves the trim point further).
    pub fn applies_to(&self, record: &StreamRecord) -> bool {
        self.stream_id == record.id && self.retention == record.config.retention_policy
    }
}

/// A page of a deleted stream's entries, read without the writer lock.
pub(crate) struct PurgePage {
    pub batch: WriteBatch,
    pub entries: u64,
    /// Segments that lose their last reference.
    pub released: u64,
    /// The last page: the stream's other keys and marker are in the batch too.
    pub done: bool,
}

/// What one reclaim pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReclaimReport {
    /// Streams whose reclaim agenda key fell due.
    pub streams_visited: u64,
    pub entries_removed: u64,
    pub streams_deleted_on_empty: u64,
    pub streams_purged: u64,
    pub segments_released: u64,
    pub segments_deleted: u64,
    pub bytes_deleted: u64,
}

impl Metadata {
    /// One reclaim pass (see the module docs); `store` holds the segment objects.
    pub async fn reclaim(&self, store: &dyn ObjectStore) -> Result<ReclaimReport> {
        self.check_usable()?;
        let started = tokio::time::Instant::now();
        let mut report = ReclaimReport::default();
        self.seed_agenda().await?;
        self.expire_streams(&mut report).await?;
        self.purge_deleted_streams(&mut report).await?;
        // Steps 1 and 2 applied their batches without waiting for each: one WAL flush
        // makes them all durable (a crash before it loses only work the next pass redoes).
        self.settle(self.writer.lock().await).await?;
        self.delete_released(store, &mut report).await?;
        if self.segments_changed.swap(false, Ordering::Relaxed) {
            self.survey_segments().await?;
        }
        self.flush_if_idle().await?;
        let stats = &self.gc_stats;
        stats.reclaim_pass_ms.fetch_add(started.elapsed().as_millis() as u64, Ordering::Relaxed);
        stats.reclaim_runs.fetch_add(1, Ordering::Relaxed);
        stats.streams_visited.fetch_add(report.streams_visited, Ordering::Relaxed);
        stats.entries_removed.fetch_add(report.entries_removed, Ordering::Relaxed);
        stats.streams_deleted_on_empty.fetch_add(report.streams_deleted_on_empty, Ordering::Relaxed);
        stats.streams_purged.fetch_add(report.streams_purged, Ordering::Relaxed);
        stats.segments_released.fetch_add(report.segments_released, Ordering::Relaxed);
        stats.segments_deleted.fetch_add(report.segments_deleted, Ordering::Relaxed);
        stats.bytes_deleted.fetch_add(report.bytes_deleted, Ordering::Relaxed);
        Ok(report)
    }

    /// Step 1: trims, retention and `delete_on_empty`, for the streams the reclaim agenda
    /// holds due by now (`agenda`): streams with nothing due are not read.
    async fn expire_streams(&self, report: &mut ReclaimReport) -> Result<()> {
        let now_ms = self.clock.now_ms();
        let mut after = Vec::new();
        loop {
            let due = self.due_agenda(&after, now_ms, STREAM_PAGE).await?;
            for item in &due {
                report.streams_visited += 1;
                self.expire_stream(&item.basin, &item.stream, report).await?;
                self.reschedule(item).await?;
            }
            match due.last() {
                Some(item) if due.len() == STREAM_PAGE => after = item.key.clone(),
                _ => return Ok(()),
            }
        }
    }

    /// Removes one stream's trimmed and expired entries, a page at a time, then deletes
    /// the stream if `delete_on_empty` says so. Each page is read without the writer lock
    /// and applied under it ([`Metadata::prepare_removal`]).
    async fn expire_stream(&self, basin: &str, stream: &str, report: &mut ReclaimReport) -> Result<()> {
        loop {
            let (mut writer, page) = self.prepare_removal(|| self.expiry_page(basin, stream)).await?;
            let Some(mut record) = self.latest_stream(&writer, basin, stream).await? else {
                return Ok(());
            };
            if delete_on_empty_due(&record, self.clock.now_ms()) {
                let mut batch = WriteBatch::new();
                batch.delete(keys::stream(basin, stream));
                batch.put(keys::deleted_stream(record.id), []);
                writer.streams.invalidate(&(basin.to_string(), stream.to_string()));
                tracing::info!(basin, stream, "stream deleted: empty past delete_on_empty.min_age");
                report.streams_deleted_on_empty += 1;
                return self.apply(batch).await;
            }
            let Some(mut page) = page else { return Ok(()) };
            if !page.applies_to(&record) {
                tracing::debug!(basin, stream, "stream re-created or reconfigured while its expiry was read: again");
                continue;
            }
            record.trim_point = record.trim_point.max(page.trim_to);
            page.batch.put(keys::stream(basin, stream), record.to_stored());
            writer.streams.insert((basin.to_string(), stream.to_string()), record);
            writer.removals += 1;
            report.entries_removed += page.entries;
            report.segments_released += page.released;
            self.apply(page.batch).await?;
            if !page.more {
                return Ok(());
            }
        }
    }

    /// The first page of a stream's entries below its trim point or past its retention
    /// age, as a batch removing them and decrementing their segments' references; `None`
    /// when there are none.
    pub(crate) async fn expiry_page(&self, basin: &str, stream: &str) -> Result<Option<ExpiryPage>> {
        let Some(record) = self.get_latest::<StreamRecord>(&keys::stream(basin, stream)).await? else {
            return Ok(None);
        };
        let cutoff = retention_cutoff(&record, self.clock.now_ms());
        let entries = self.first_entries(record.id, ENTRY_PAGE).await?;
        let mut batch = WriteBatch::new();
        let mut releases = Releases::default();
        let mut trim_to = record.trim_point;
        for entry in &entries {
            let expired = cutoff.is_some_and(|cutoff| appended_at(entry) < cutoff);
            if entry.last_seq() >= record.trim_point && !expired {
                break;
            }
            self.remove_entry(&mut batch, &mut releases, record.id, entry);
            trim_to = trim_to.max(entry.end_seq());
        }
        if releases.is_empty() {
            return Ok(None);
        }
        let released = self.decrement_refs(&mut batch, &releases).await?;
        Ok(Some(ExpiryPage {
            stream_id: record.id,
            retention: record.config.retention_policy,
            batch,
            entries: releases.entries,
            released,
            trim_to,
            more: releases.entries as usize == ENTRY_PAGE,
        }))
    }

    /// Step 2: the index entries of deleted streams, then their markers, a page at a
    /// time, each read without the writer lock and applied under it
    /// ([`Metadata::prepare_removal`]).
    async fn purge_deleted_streams(&self, report: &mut ReclaimReport) -> Result<()> {
        let deleted = self
            .scan_page(keys::DELETED_STREAM_PREFIX, &[], STREAM_PAGE, DurabilityLevel::Memory, |key, _| {
                keys::deleted_stream_id_of(key).ok_or_else(|| MetadataError::Corrupt {
                    key: String::from_utf8_lossy(key).into_owned(),
                    reason: "not a deleted-stream key".into(),
                })
            })
            .await?;
        for stream_id in deleted.items {
            loop {
                let (mut writer, page) = self.prepare_removal(|| self.purge_page(stream_id)).await?;
                writer.removals += 1;
                report.entries_removed += page.entries;
                report.segments_released += page.released;
                report.streams_purged += u64::from(page.done);
                self.apply(page.batch).await?;
                if page.done {
                    break;
                }
            }
        }
        Ok(())
    }

    /// A batch removing the first page of a deleted stream's index entries and
    /// decrementing their segments' references; on its last page, the stream's other
    /// keys and its marker too.
    pub(crate) async fn purge_page(&self, stream_id: u64) -> Result<PurgePage> {
        let entries = self.first_entries(stream_id, ENTRY_PAGE).await?;
        let mut batch = WriteBatch::new();
        let mut releases = Releases::default();
        for entry in &entries {
            self.remove_entry(&mut batch, &mut releases, stream_id, entry);
        }
        let done = entries.len() < ENTRY_PAGE;
        if done {
            for key in self.named_keys_of(stream_id).await? {
                batch.delete(key);
            }
            batch.delete(keys::deleted_stream(stream_id));
            batch.delete(keys::compaction_cursor(stream_id));
            batch.delete(keys::uncompacted(stream_id));
        }
        let released = self.decrement_refs(&mut batch, &releases).await?;
        Ok(PurgePage { batch, entries: releases.entries, released, done })
    }

    /// Step 3: deletes segment objects released at least `delete_grace` ago. Only
    /// durable markers count: a release still in memory may never become durable.
    async fn delete_released(&self, store: &dyn ObjectStore, report: &mut ReclaimReport) -> Result<()> {
        let now_ms = self.clock.now_ms();
        let grace_ms = self.config.delete_grace.as_millis() as u64;
        let released =
            self.scan_page(keys::RELEASED_PREFIX, &[], RELEASED_PAGE, DurabilityLevel::Remote, released_of).await?;
        let due = released.items.into_iter().filter(|(_, released)| now_ms.saturating_sub(released.at_ms) >= grace_ms);
        let deletions = futures::stream::iter(due).map(|(segment_id, released)| async move {
            let path = Path::from(shale_proto::segment::object_path(segment_id));
            match store.delete(&path).await {
                Ok(()) | Err(shale_storage::object_store::Error::NotFound { .. }) => {
                    tracing::debug!(object = %path, bytes = released.bytes, "deleted released segment");
                    Some((segment_id, released.bytes))
                }
                Err(e) => {
                    tracing::warn!(object = %path, error = %e, "cannot delete released segment");
                    None
                }
            }
        });
        let deleted: Vec<(u128, u64)> =
            deletions.buffer_unordered(DELETE_CONCURRENCY).filter_map(|done| async move { done }).collect().await;
        report.segments_deleted += deleted.len() as u64;
        report.bytes_deleted += deleted.iter().map(|(_, bytes)| bytes).sum::<u64>();
        if deleted.is_empty() {
            return Ok(());
        }
        let writer = self.writer.lock().await;
        self.segments_changed.store(true, Ordering::Relaxed);
        let mut batch = WriteBatch::new();
        for (segment_id, _) in deleted {
            batch.delete(keys::released(segment_id));
            self.forget_object_streams(&mut batch, segment_id).await?;
        }
        self.write_durably(writer, batch).await
    }

    /// Refreshes the space gauges from the `o/` and `z/` keys.
    async fn survey_segments(&self) -> Result<()> {
        let (mut segments, mut live, mut dead) = (0u64, 0u64, 0u64);
        let mut after = Vec::new();
        loop {
            let page = self
                .scan_page(keys::SEGMENT_PREFIX, &after, RELEASED_PAGE, DurabilityLevel::Memory, |key, value| {
                    Ok((key.to_vec(), SegmentRefs::decode(key, value)?))
                })
                .await?;
            for (_, refs) in &page.items {
                segments += 1;
                live += refs.live_bytes;
                dead += refs.committed_bytes.saturating_sub(refs.live_bytes);
            }
            match page.items.last() {
                Some((key, _)) if page.has_more => after = key.clone(),
                _ => break,
            }
        }
        let released =
            self.scan_page(keys::RELEASED_PREFIX, &[], usize::MAX, DurabilityLevel::Memory, released_of).await?;
        let stats = &self.gc_stats;
        stats.live_segments.store(segments, Ordering::Relaxed);
        stats.live_bytes.store(live, Ordering::Relaxed);
        stats.dead_bytes_in_live_segments.store(dead, Ordering::Relaxed);
        stats.released_segments.store(released.items.len() as u64, Ordering::Relaxed);
        stats.released_bytes.store(released.items.iter().map(|(_, r)| r.bytes).sum(), Ordering::Relaxed);
        Ok(())
    }

    /// A deleted stream's producer states and consumer positions.
    async fn named_keys_of(&self, stream_id: u64) -> Result<Vec<Vec<u8>>> {
        let mut found = Vec::new();
        for family in keys::STREAM_NAMED_FAMILIES {
            let prefix = keys::of_stream(family, stream_id);
            let page = self.scan_page(&prefix, &[], usize::MAX, DurabilityLevel::Memory, |key, _| Ok(key.to_vec()));
            found.extend(page.await?.items);
        }
        Ok(found)
    }

    /// The first `limit` index entries of a stream, latest view (the writer's).
    pub(crate) async fn first_entries(&self, stream_id: u64, limit: usize) -> Result<Vec<crate::IndexEntry>> {
        let (start, end) = (keys::index(stream_id, 0), keys::end_of_stream(b"i/", stream_id));
        self.scan_entries(start, end, limit, DurabilityLevel::Memory).await
    }
}

fn released_of(key: &[u8], value: &[u8]) -> Result<(u128, Released)> {
    let segment_id = keys::segment_id_of(key).ok_or_else(|| MetadataError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: "not a segment key".into(),
    })?;
    Ok((segment_id, Released::decode(key, value)?))
}

/// Appends made before this (by [`appended_at`]) have outlived the stream's retention age.
fn retention_cutoff(record: &StreamRecord, now_ms: u64) -> Option<u64> {
    retention_age_ms(record).map(|age| now_ms.saturating_sub(age))
}

/// Whether a stream with `delete_on_empty` has no readable record and has seen neither
/// a record nor its creation for `min_age`.
fn delete_on_empty_due(record: &StreamRecord, now_ms: u64) -> bool {
    delete_on_empty_deadline(record).is_some_and(|deadline| now_ms >= deadline)
}
