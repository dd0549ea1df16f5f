//! Compaction bookkeeping: what a compactor should rewrite, and the atomic swap of
//! rewritten entries. The rewriting itself (reading blocks, writing the large object)
//! is the compactor's (`shale-compactor`), which calls these through [`crate::MetadataApi`]
//! like any other role, so compactors can run anywhere and split the streams by shard.
//!
//! Each stream has a compaction cursor (`k/<stream id>`): entries below it are already
//! in compacted objects and are never rewritten again. A plan looks only at the streams
//! marked uncompacted (`u/`, see `agenda`) and offers, per stream in the shard, the
//! consecutive durable entries from the cursor (or the trim point) whose
//! segments were sealed at least `min_age` ago. A commit replaces each stream's old
//! entries with one new entry only if every old entry is still in the index exactly as
//! planned (a trim, retention or delete in between drops that replacement), in one
//! write batch that also moves the cursor, writes the new object's references and
//! releases the old objects' (`refs`), and unmarks each stream whose cursor reached its
//! tail.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use slatedb::config::{DurabilityLevel, ReadOptions};
use slatedb::WriteBatch;

use crate::refs::{Releases, SegmentRefs};
use crate::{
    keys, CompactionPlan, CompactionRun, IndexEntry, Metadata, MetadataError, Replacement, Result, StreamRecord,
    WriterState,
};

/// A compactor's plan call: its shard, what it takes (`min_age_ms`, `max_bytes`,
/// `remerge_below`) and how long it waits for enough (`min_bytes`, `max_wait_ms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlanSettings {
    pub shard: u32,
    pub shards: u32,
    pub min_age_ms: u64,
    pub max_bytes: u64,
    pub remerge_below: u64,
    pub min_bytes: u64,
    pub max_wait_ms: u64,
}

/// Refuses a compactor shard that is not one of `shards` (compaction, key compaction and
/// defragmenting plans alike).
pub(crate) fn shard_of(shard: u32, shards: u32) -> Result<()> {
    if shards == 0 || shard >= shards {
        return Err(MetadataError::InvalidArgument(format!("compaction shard {shard} of {shards}")));
    }
    Ok(())
}

/// What one walk over the marked streams saw, eligible or not yet.
#[derive(Debug, Default)]
struct Walk {
    bytes: u64,
    oldest_sealed_ms: Option<u64>,
    /// A stream had more entries than one plan reads: its bytes were not all counted.
    truncated: bool,
}

impl Walk {
    fn saw(&mut self, entries: &[IndexEntry]) {
        self.bytes += entries.iter().map(|e| u64::from(e.len)).sum::<u64>();
        self.truncated |= entries.len() >= MAX_RUN_ENTRIES;
        if let Some(sealed) = entries.iter().map(|e| ulid::Ulid(e.segment_id).timestamp_ms()).min() {
            self.oldest_sealed_ms = Some(self.oldest_sealed_ms.map_or(sealed, |o| o.min(sealed)));
        }
    }
}

/// The last walk of each shard's plan while its compactor waits: what it answered, the
/// bytes of every uncompacted entry it saw and the index bytes committed before it
/// (`Metadata::indexed_bytes`). Eligible bytes can only grow by commits after the walk
/// (compactions, trims and deletes shrink them), so while the walk's bytes plus those
/// commits stay under `min_bytes` and the oldest entry seen has not waited `min_age` +
/// `max_wait`, another walk would make the compactor wait too. In memory: a new
/// metadata instance walks at its first plan.
#[derive(Debug, Default)]
pub(crate) struct WaitingPlans(std::sync::Mutex<HashMap<(u32, u32), WaitingPlan>>);

#[derive(Debug)]
struct WaitingPlan {
    settings: PlanSettings,
    indexed_before: u64,
    seen_bytes: u64,
    wait_ends_ms: u64,
    answer: CompactionPlan,
}

impl WaitingPlans {
    fn answer(&self, settings: &PlanSettings, indexed_now: u64, now_ms: u64) -> Option<CompactionPlan> {
        let plans = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let waiting = plans.get(&(settings.shard, settings.shards))?;
        let could_have = waiting.seen_bytes + indexed_now.saturating_sub(waiting.indexed_before);
        let still_waiting =
            waiting.settings == *settings && could_have < settings.min_bytes && now_ms < waiting.wait_ends_ms;
        still_waiting.then(|| CompactionPlan {
            runs: Vec::new(),
            uncompacted_bytes: could_have,
            ..waiting.answer.clone()
        })
    }

    fn remember(&self, settings: PlanSettings, walk: Walk, indexed_before: u64, answer: &CompactionPlan) {
        let mut plans = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (settings.shard, settings.shards);
        if walk.truncated || walk.bytes >= settings.min_bytes {
            plans.remove(&key);
            return;
        }
        let wait_ends_ms = walk
            .oldest_sealed_ms
            .map_or(u64::MAX, |sealed| sealed.saturating_add(settings.min_age_ms).saturating_add(settings.max_wait_ms));
        let answer = CompactionPlan { runs: Vec::new(), ..answer.clone() };
        plans.insert(key, WaitingPlan { settings, indexed_before, seen_bytes: walk.bytes, wait_ends_ms, answer });
    }
}

/// Stream records read per page while planning.
const STREAM_PAGE: usize = 1_000;
/// Swapped streams checked per hold of the writer lock when unmarking them.
const UNMARK_PAGE: usize = 512;
/// Entries of one stream offered per plan at most.
const MAX_RUN_ENTRIES: usize = 4_096;

impl Metadata {
    /// The next runs to compact in the settings' shard (stream id modulo `shards`), up to
    /// about `max_bytes` of entries, and how much is eligible in all.
    ///
    /// While the compactor waits for more to be eligible, the answer comes from the last
    /// walk as long as that walk plus every byte indexed since cannot have reached
    /// `min_bytes` and its oldest entry cannot have waited `max_wait_ms` (see
    /// [`WaitingPlans`]): an idle or slowly written store is not read stream by stream
    /// every compactor interval.
    pub(crate) async fn plan_compaction(&self, settings: PlanSettings) -> Result<CompactionPlan> {
        self.check_usable()?;
        let PlanSettings { shard, shards, min_age_ms, max_bytes, remerge_below, .. } = settings;
        shard_of(shard, shards)?;
        let indexed_before = {
            let writer = self.writer.lock().await;
            let indexed = self.indexed_bytes.load(Ordering::Relaxed);
            if let Some(plan) = self.waiting_plans.answer(&settings, indexed, self.clock.now_ms()) {
                self.gc_stats.plans_from_last_walk.fetch_add(1, Ordering::Relaxed);
                return Ok(plan);
            }
            self.gc_stats.plan_walks.fetch_add(1, Ordering::Relaxed);
            // Everything indexed so far is durable before the walk, which reads only
            // durable entries: the walk sees every byte counted in `indexed`.
            self.settle(writer).await?;
            indexed
        };
        let sealed_before = self.clock.now_ms().saturating_sub(min_age_ms);
        let mut plan = CompactionPlan::default();
        let mut planned_bytes = 0u64;
        let mut walk = Walk::default();
        let mut after = Vec::new();
        loop {
            let page = self
                .scan_page(keys::UNCOMPACTED_PREFIX, &after, STREAM_PAGE, DurabilityLevel::Remote, |key, value| {
                    let corrupt = || MetadataError::Corrupt {
                        key: String::from_utf8_lossy(key).into_owned(),
                        reason: "not an uncompacted mark".into(),
                    };
                    let stream_id = keys::uncompacted_stream_id_of(key).ok_or_else(corrupt)?;
                    Ok((key.to_vec(), stream_id, value.to_vec()))
                })
                .await?;
            for (_, stream_id, key) in &page.items {
                if stream_id % u64::from(shards) != u64::from(shard) {
                    continue;
                }
                let Some(record) = self.get_durable::<StreamRecord>(key).await? else { continue };
                if record.id != *stream_id {
                    continue;
                }
                // A stream with nothing past its trim point costs no cursor read.
                if record.trim_point >= record.next_seq {
                    continue;
                }
                let cursor = self.compaction_cursor(record.id, &Self::durable_read()).await?;
                let start = cursor.max(record.trim_point);
                if start >= record.next_seq {
                    continue;
                }
                let (end_key, from_key) = (keys::end_of_stream(b"i/", record.id), keys::index(record.id, start));
                let entries = self.scan_entries(from_key, end_key, MAX_RUN_ENTRIES, DurabilityLevel::Remote).await?;
                walk.saw(&entries);
                let eligible: Vec<IndexEntry> = entries
                    .into_iter()
                    .take_while(|entry| ulid::Ulid(entry.segment_id).timestamp_ms() <= sealed_before)
                    .collect();
                let Some(first) = eligible.first() else { continue };
                let sealed = ulid::Ulid(first.segment_id).timestamp_ms();
                plan.oldest_sealed_ms =
                    if plan.oldest_sealed_ms == 0 { sealed } else { plan.oldest_sealed_ms.min(sealed) };
                plan.pending_bytes += eligible.iter().map(|e| u64::from(e.len)).sum::<u64>();
                let mut taken = Vec::new();
                for entry in eligible {
                    if planned_bytes >= max_bytes {
                        break;
                    }
                    planned_bytes += u64::from(entry.len);
                    taken.push(entry);
                }
                if taken.is_empty() {
                    continue;
                }
                // Only with new entries: a run of the re-merged entry alone would rewrite
                // it for nothing.
                let remerged = self.remerged_entry(&record, cursor, remerge_below).await?;
                planned_bytes += remerged.iter().map(|e| u64::from(e.len)).sum::<u64>();
                taken.splice(0..0, remerged);
                let (basin, stream) = keys::stream_names_of(key).ok_or_else(|| MetadataError::Corrupt {
                    key: format!("u/{stream_id}"),
                    reason: "names no stream key".into(),
                })?;
                plan.runs.push(CompactionRun { basin, stream, stream_id: record.id, entries: taken });
            }
            match page.items.last() {
                Some((key, _, _)) if page.has_more => after = key.clone(),
                _ => break,
            }
        }
        plan.uncompacted_bytes = walk.bytes;
        self.waiting_plans.remember(settings, walk, indexed_before, &plan);
        Ok(plan)
    }

    /// The stream's last compacted entry, when it is smaller than `remerge_below` and
    /// wholly above the trim point: merged again with the entries that follow it.
    async fn remerged_entry(&self, record: &StreamRecord, cursor: u64, remerge_below: u64) -> Result<Vec<IndexEntry>> {
        if cursor == 0 || cursor <= record.trim_point {
            return Ok(Vec::new());
        }
        let (from, end) = (keys::index(record.id, cursor - 1), keys::end_of_stream(b"i/", record.id));
        let last = self.scan_entries(from, end, 1, DurabilityLevel::Remote).await?;
        Ok(last
            .into_iter()
            .filter(|entry| entry.end_seq() == cursor && u64::from(entry.len) < remerge_below)
            .filter(|entry| entry.first_seq >= record.trim_point)
            .collect())
    }

    /// Swaps each replacement's old entries for its new entry in compacted object
    /// `segment_id`; returns how many replacements were applied. Applied again (a retry),
    /// it changes nothing and answers with the object's referenced blocks.
    ///
    /// Checking a large object's replacements and reading the references they release
    /// takes many reads: done without the writer lock, which appends need
    /// ([`Metadata::prepare_removal`]).
    pub(crate) async fn commit_compaction(&self, segment_id: u128, replacements: Vec<Replacement>) -> Result<u32> {
        self.check_usable()?;
        let (writer, swap) = self.prepare_removal(|| self.prepare_swap(segment_id, &replacements)).await?;
        self.apply_swap(writer, segment_id, swap).await
    }

    /// The write batch of a swap, from the latest state: entries still indexed as planned
    /// are replaced, the rest dropped.
    pub(crate) async fn prepare_swap(&self, segment_id: u128, replacements: &[Replacement]) -> Result<PreparedSwap> {
        let mut batch = WriteBatch::new();
        let mut releases = Releases::default();
        let mut accepted = Vec::new();
        let mut cursors = Vec::new();
        for replacement in replacements {
            if !self.still_indexed(replacement).await? {
                tracing::info!(
                    stream_id = replacement.stream_id,
                    "compaction replacement dropped: its entries changed"
                );
                continue;
            }
            let id = replacement.stream_id;
            for old in &replacement.old {
                self.remove_entry(&mut batch, &mut releases, id, old);
            }
            let new = &replacement.new;
            let value = new.encode();
            batch.put(keys::index(id, new.last_seq()), &value);
            batch.put(keys::by_time(id, new.last_timestamp, new.last_seq()), &value);
            let cursor = self.compaction_cursor(id, &ReadOptions::default()).await?.max(new.end_seq());
            batch.put(keys::compaction_cursor(id), cursor.to_be_bytes());
            accepted.push(*new);
            cursors.push((id, cursor));
            // Which streams the object holds, for its rewrite once fragmented (`defragment`).
            let stream_key = keys::stream(&replacement.basin, &replacement.stream);
            batch.put(keys::compacted_stream(segment_id, id), stream_key);
        }
        let refs = SegmentRefs { compacted: true, ..SegmentRefs::committed(accepted.iter()) };
        batch.put(keys::segment(segment_id), refs.encode());

        self.decrement_refs(&mut batch, &releases).await?;
        Ok(PreparedSwap { batch, accepted: accepted.len(), cursors })
    }

    /// Applies a prepared swap under the writer lock, unless the object is too old to
    /// commit or was committed before.
    async fn apply_swap(
        &self,
        mut writer: tokio::sync::MutexGuard<'_, WriterState>,
        segment_id: u128,
        swap: PreparedSwap,
    ) -> Result<u32> {
        if let Some(error) = self.refuse_by_age(segment_id) {
            self.settle(writer).await?;
            return Err(error);
        }
        if self.segment_committed(segment_id).await? {
            // Applied before (its references may since have gone to zero): nothing again.
            let refs = self.segment_refs(segment_id, &ReadOptions::default()).await?;
            let blocks = refs.map_or(0, |refs| refs.blocks);
            self.settle(writer).await?;
            return Ok(u32::try_from(blocks).unwrap_or(u32::MAX));
        }
        if swap.accepted == 0 {
            self.settle(writer).await?;
            return Ok(0);
        }
        writer.removals += 1;
        self.write_durably(writer, swap.batch).await?;
        self.unmark_compacted(&swap.cursors).await?;
        Ok(u32::try_from(swap.accepted).unwrap_or(u32::MAX))
    }

    /// Unmarks each swapped stream whose new cursor reached its tail, checked against the
    /// latest record under the writer lock: a page of streams per hold, so a swap of a
    /// million streams does not hold appends back while every record is read.
    async fn unmark_compacted(&self, cursors: &[(u64, u64)]) -> Result<()> {
        for page in cursors.chunks(UNMARK_PAGE) {
            let writer = self.writer.lock().await;
            let mut batch = WriteBatch::new();
            for &(stream_id, cursor) in page {
                if self.compacted_to_tail(&writer, stream_id, cursor).await? {
                    writer.scheduled.unmark_uncompacted(&mut batch, stream_id);
                }
            }
            self.apply(batch).await?;
        }
        self.settle(self.writer.lock().await).await
    }

    /// Whether a cursor at `cursor` leaves the stream nothing to compact: at or past its
    /// latest tail (under the writer lock, so no commit lands in between).
    async fn compacted_to_tail(&self, writer: &WriterState, stream_id: u64, cursor: u64) -> Result<bool> {
        let key = keys::uncompacted(stream_id);
        let Some(stream_key) = self.db.get(&key).await.map_err(|e| self.storage_error(e))? else {
            return Ok(false);
        };
        let Some((basin, stream)) = keys::stream_names_of(&stream_key) else { return Ok(false) };
        let record = self.latest_stream(writer, &basin, &stream).await?;
        Ok(record.is_none_or(|record| record.id != stream_id || cursor >= record.next_seq))
    }

    /// Whether a replacement still applies: its old entries are in the index exactly as
    /// planned, and the new entry covers exactly their records.
    async fn still_indexed(&self, replacement: &Replacement) -> Result<bool> {
        let (Some(first), Some(last)) = (replacement.old.first(), replacement.old.last()) else {
            return Ok(false);
        };
        let new = &replacement.new;
        let contiguous = replacement.old.windows(2).all(|pair| pair[0].end_seq() == pair[1].first_seq);
        if !contiguous || new.first_seq != first.first_seq || new.end_seq() != last.end_seq() {
            return Err(MetadataError::InvalidArgument(
                "a compaction replacement must cover its old entries exactly".into(),
            ));
        }
        for old in &replacement.old {
            let key = keys::index(replacement.stream_id, old.last_seq());
            let current = self.db.get(&key).await.map_err(|e| self.storage_error(e))?;
            if current.as_deref() != Some(old.encode().as_slice()) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The stream's compaction cursor, as plans see it: its records below it are in
    /// compacted objects.
    pub(crate) async fn compacted_through(&self, basin: &str, stream: &str) -> Result<u64> {
        let record = self.get_stream(basin, stream).await?.record;
        self.compaction_cursor(record.id, &Self::durable_read()).await
    }

    /// The stream's compaction cursor: durable for plans, latest for the writer.
    pub(crate) async fn compaction_cursor(&self, stream_id: u64, options: &ReadOptions) -> Result<u64> {
        let key = keys::compaction_cursor(stream_id);
        let value = self.db.get_with_options(&key, options).await.map_err(|e| self.storage_error(e))?;
        value.map_or(Ok(0), |bytes| crate::decode_u64(&key, &bytes))
    }
}

/// A compaction swap read from the latest state, to apply if that state still holds.
pub(crate) struct PreparedSwap {
    batch: WriteBatch,
    /// Replacements the batch applies.
    pub accepted: usize,
    /// Each swapped stream's cursor after the swap.
    cursors: Vec<(u64, u64)>,
}
