//! What the background passes look at: the streams that changed or fall due, never every
//! stream, so an idle stream costs no pass anything.
//!
//! Two key families, written in the same batch as the change that calls for them:
//! - **Reclaim agenda** `w/<due ms><stream id>` -> the stream's key: reclaim visits the
//!   keys due by its pass. A commit schedules its stream when the commit trims (due now) or
//!   the stream has a retention age (due when the appended records expire); creating a
//!   stream with `delete_on_empty` schedules it for `min_age`, and reconfiguring schedules
//!   it now. A visit deletes its key and schedules the next time the stream needs one
//!   (its first remaining append's expiry, or its `delete_on_empty` deadline).
//! - **Uncompacted** `u/<stream id>` -> the stream's key: streams with entries above their
//!   compaction cursor. A commit marks its stream; the compaction swap that moves the
//!   cursor to the tail unmarks it, and so does the reclaim visit that finds it empty.
//!
//! Both are hints: a key whose stream is gone or re-created is deleted when visited, and
//! a stream may hold more than one agenda key (a new leader does not know which exist).
//! What the writer knows it wrote is kept in [`Scheduled`], so the busy path writes a key
//! only when a stream first needs one. A database written before these families existed
//! is seeded once, by its first reclaim pass ([`Metadata::seed_agenda`]).

use std::sync::atomic::Ordering;

use slatedb::config::DurabilityLevel;
use slatedb::WriteBatch;

use crate::{keys, IndexEntry, Metadata, MetadataError, Result, RetentionPolicy, Stored, StreamRecord, WriterState};

/// Stream records seeded per write batch.
const SEED_PAGE: usize = 1_000;

/// What the writer wrote of both families, per stream id, bounded like its stream cache:
/// an entry lost to eviction only costs writing the key again.
pub(crate) struct Scheduled {
    /// The earliest reclaim agenda key known to exist for the stream.
    reclaim_due: moka::sync::Cache<u64, u64>,
    /// Streams whose uncompacted mark is known to exist.
    uncompacted: moka::sync::Cache<u64, ()>,
}

impl Scheduled {
    pub fn new(capacity: u64) -> Self {
        Self { reclaim_due: moka::sync::Cache::new(capacity), uncompacted: moka::sync::Cache::new(capacity) }
    }

    /// Adds to `batch` a reclaim visit of `record` at `due`, unless one at or before it
    /// is known to exist.
    pub fn reclaim_at(&self, batch: &mut WriteBatch, stream_key: &[u8], record: &StreamRecord, due: u64) {
        if self.reclaim_due.get(&record.id).is_some_and(|known| known <= due) {
            return;
        }
        batch.put(keys::reclaim_agenda(due, record.id), stream_key);
        self.reclaim_due.insert(record.id, due);
    }

    /// Adds to `batch` the uncompacted mark of `record`, unless it is known to exist.
    pub fn mark_uncompacted(&self, batch: &mut WriteBatch, stream_key: &[u8], record: &StreamRecord) {
        if self.uncompacted.contains_key(&record.id) {
            return;
        }
        batch.put(keys::uncompacted(record.id), stream_key);
        self.uncompacted.insert(record.id, ());
    }

    pub fn unmark_uncompacted(&self, batch: &mut WriteBatch, stream_id: u64) {
        batch.delete(keys::uncompacted(stream_id));
        self.uncompacted.invalidate(&stream_id);
    }

    /// After a visit of `stream_id` deleted its key: `next` is the key it left, if any.
    fn visited(&self, stream_id: u64, next: Option<u64>) {
        match next {
            Some(due) => self.reclaim_due.insert(stream_id, due),
            None => self.reclaim_due.invalidate(&stream_id),
        }
    }
}

/// When a commit that left `record` so needs a reclaim visit: now when it trimmed, when
/// its records expire under a retention age, never otherwise.
pub(crate) fn reclaim_due_after_commit(record: &StreamRecord, trimmed: bool, now_ms: u64) -> Option<u64> {
    if trimmed {
        return Some(now_ms);
    }
    // An append expires once its age passes `age` (strictly): one millisecond later.
    retention_age_ms(record).map(|age| now_ms.saturating_add(age).saturating_add(1))
}

/// When a new, empty stream needs its first visit: at its `delete_on_empty` deadline.
pub(crate) fn reclaim_due_at_creation(record: &StreamRecord) -> Option<u64> {
    delete_on_empty_deadline(record)
}

pub(crate) fn retention_age_ms(record: &StreamRecord) -> Option<u64> {
    match record.config.retention_policy {
        Some(RetentionPolicy::Age(secs)) => Some(secs.saturating_mul(1000)),
        Some(RetentionPolicy::Infinite) | None => None,
    }
}

/// When an empty stream with `delete_on_empty` may be deleted; `None` when it is not
/// empty or has no such rule.
pub(crate) fn delete_on_empty_deadline(record: &StreamRecord) -> Option<u64> {
    let rule = record.config.delete_on_empty?;
    if rule.min_age_secs == 0 || record.trim_point < record.next_seq {
        return None;
    }
    let last_activity = record.created_at_ms.max(record.last_timestamp);
    Some(last_activity.saturating_add(rule.min_age_secs.saturating_mul(1000)))
}

/// One reclaim agenda key: when, which stream, and the stream's key.
pub(crate) struct AgendaItem {
    pub key: Vec<u8>,
    pub stream_id: u64,
    pub basin: String,
    pub stream: String,
}

impl Metadata {
    /// Agenda items due at or before `now_ms`, after `after` (a key), up to `limit`.
    pub(crate) async fn due_agenda(&self, after: &[u8], now_ms: u64, limit: usize) -> Result<Vec<AgendaItem>> {
        let end = keys::reclaim_agenda(now_ms.saturating_add(1), 0);
        let page = self
            .scan_page(keys::RECLAIM_AGENDA_PREFIX, after, limit, DurabilityLevel::Memory, |key, value| {
                Ok((key.to_vec(), value.to_vec()))
            })
            .await?;
        let mut items = Vec::with_capacity(page.items.len());
        for (key, stream_key) in page.items {
            if key >= end {
                break;
            }
            let corrupt = || MetadataError::Corrupt {
                key: String::from_utf8_lossy(&key).into_owned(),
                reason: "not a reclaim agenda key".into(),
            };
            let stream_id = keys::agenda_stream_id_of(&key).ok_or_else(corrupt)?;
            let (basin, stream) = keys::stream_names_of(&stream_key).ok_or_else(corrupt)?;
            items.push(AgendaItem { key, stream_id, basin, stream });
        }
        Ok(items)
    }

    /// Deletes a visited agenda key and schedules the stream's next visit, from its latest
    /// state under the writer lock (so a trim committed during the visit is not missed);
    /// unmarks a stream left empty as uncompacted.
    pub(crate) async fn reschedule(&self, item: &AgendaItem) -> Result<()> {
        let writer = self.writer.lock().await;
        let mut batch = WriteBatch::new();
        let record = self.latest_stream(&writer, &item.basin, &item.stream).await?;
        let mut next_key = None;
        match record.filter(|record| record.id == item.stream_id) {
            Some(record) => {
                let next = self.next_reclaim_due(&record).await?;
                if let Some(due) = next {
                    let key = keys::reclaim_agenda(due, record.id);
                    batch.put(&key, keys::stream(&item.basin, &item.stream));
                    next_key = Some(key);
                }
                if record.trim_point >= record.next_seq {
                    writer.scheduled.unmark_uncompacted(&mut batch, record.id);
                }
                writer.scheduled.visited(record.id, next);
            }
            None => tracing::debug!(stream_id = item.stream_id, "reclaim agenda key of a deleted stream dropped"),
        }
        if next_key.as_deref() != Some(item.key.as_slice()) {
            batch.delete(&item.key);
        }
        self.apply(batch).await
    }

    /// The next time `record` needs a reclaim visit: now when entries below its trim
    /// point remain, when its first append expires, or its `delete_on_empty` deadline.
    async fn next_reclaim_due(&self, record: &StreamRecord) -> Result<Option<u64>> {
        let now_ms = self.clock.now_ms();
        let first = self.first_entries(record.id, 1).await?;
        let by_entry = first.first().and_then(|entry| {
            if entry.last_seq() < record.trim_point {
                return Some(now_ms);
            }
            retention_age_ms(record).map(|age| appended_at(entry).saturating_add(age).saturating_add(1))
        });
        Ok([by_entry, delete_on_empty_deadline(record)].into_iter().flatten().min())
    }

    /// Writes both families for every stream of a database written before they existed,
    /// once: every stream that could need reclaim is due now, every stream with entries
    /// above its compaction cursor is uncompacted. Safe to repeat after a crash.
    pub(crate) async fn seed_agenda(&self) -> Result<()> {
        if self.db.get(keys::AGENDA_SEEDED).await.map_err(|e| self.storage_error(e))?.is_some() {
            return Ok(());
        }
        if !self.fresh.load(Ordering::Relaxed) {
            self.seed_every_stream().await?;
        }
        let writer = self.writer.lock().await;
        let mut batch = WriteBatch::new();
        batch.put(keys::AGENDA_SEEDED, []);
        self.write_durably(writer, batch).await
    }

    async fn seed_every_stream(&self) -> Result<()> {
        let mut after = Vec::new();
        let mut seeded = 0u64;
        loop {
            let page = self
                .scan_page(keys::STREAM_PREFIX, &after, SEED_PAGE, DurabilityLevel::Memory, |key, value| {
                    Ok((key.to_vec(), StreamRecord::from_stored(key, value)?))
                })
                .await?;
            let writer = self.writer.lock().await;
            let mut batch = WriteBatch::new();
            let now_ms = self.clock.now_ms();
            for (key, record) in &page.items {
                let needs_reclaim = record.trim_point > 0
                    || retention_age_ms(record).is_some()
                    || record.config.delete_on_empty.is_some();
                if needs_reclaim {
                    writer.scheduled.reclaim_at(&mut batch, key, record, now_ms);
                }
                let cursor = self.compaction_cursor(record.id, &slatedb::config::ReadOptions::default()).await?;
                if cursor.max(record.trim_point) < record.next_seq {
                    writer.scheduled.mark_uncompacted(&mut batch, key, record);
                }
                seeded += 1;
            }
            self.apply(batch).await?;
            drop(writer);
            match page.items.last() {
                Some((key, _)) if page.has_more => after = key.clone(),
                _ => break,
            }
        }
        tracing::info!(streams = seeded, "reclaim agenda and uncompacted marks seeded");
        Ok(())
    }
}

/// Adds to `writer`'s batch what a change of one stream calls for: used by commits.
pub(crate) fn note_commit(
    writer: &WriterState,
    batch: &mut WriteBatch,
    stream_key: &[u8],
    record: &StreamRecord,
    trimmed: bool,
    now_ms: u64,
) {
    writer.scheduled.mark_uncompacted(batch, stream_key, record);
    if let Some(due) = reclaim_due_after_commit(record, trimmed, now_ms) {
        writer.scheduled.reclaim_at(batch, stream_key, record, due);
    }
}

/// When an append happened, as retention ages it (S2 counts a record's age from its
/// append, not from a timestamp its client may have set in the past): its segment's
/// seal time, or its last record's timestamp when that is later. A compacted entry's
/// object is newer than its records, which keeps them at most one compaction delay
/// longer, never shorter.
pub(crate) fn appended_at(entry: &IndexEntry) -> u64 {
    entry.last_timestamp.max(ulid::Ulid(entry.segment_id).timestamp_ms())
}
