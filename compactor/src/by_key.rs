//! Key compaction (Kafka's `cleanup.policy=compact`): a stream keeps at least the last
//! record of each key. Offsets never change: what is dropped leaves a gap (sparse blocks,
//! see `shale_proto::segment`), so readers and consumers step over it.
//!
//! A pass asks metadata for the streams of this shard with key compaction on and records
//! past their key cursor (or tombstones due), and for each one whose dirty part (entries
//! from the cursor) is at least half its clean part (Kafka's `min.cleanable.dirty.ratio`),
//! rewrites its records from the trim point up to its horizon:
//! - the horizon is the first entry with a record younger than `min_lag_ms` (by its last
//!   timestamp), at most [`MAX_STREAM_BYTES`] of entries, and, in a basin with the table
//!   tier on, no further than what the table already holds: history stays whole there;
//! - a record is dropped when a later record of the range has its key, or when it is a
//!   tombstone (a null value) whose timestamp is `delete_retention_ms` past: everything
//!   older of its key goes in the same rewrite, so no older value can come back;
//! - records without a key (S2 appends, command records) are kept, and so is the
//!   stream's last record (Kafka never cleans its active segment): a consumer at the tail
//!   always finds the record before it, and its lag reaches 0.
//!
//! The rewritten entries are swapped in like any compaction's (all or nothing per
//! replacement, checked against the index as planned), and the key cursor moves to the
//! horizon with the time the first kept tombstone falls due.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use shale_metadata_contract::{
    CatalogCall, CompactionRun, IndexEntry, KeyCompactionPolicy, KeyCompactionTarget, KeyCursor, MetadataError,
};
use shale_proto::record::{is_tombstone, kafka_key};
use shale_proto::SegmentBuilder;

use crate::merge::{decode_entries, lay_out, merge_kept, DecodedEntry, MergedBlock};
use crate::{Compactor, CompactorError};

/// The most entry bytes one stream's key compaction reads at once (held in memory while
/// it is rewritten): a longer stream is compacted up to here, the rest by later passes.
pub const MAX_STREAM_BYTES: u64 = 256 * 1024 * 1024;

/// Index entries read per lookup while finding a stream's horizon.
const ENTRIES_PER_LOOKUP: usize = 1_000;

/// What one key compaction pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyPassReport {
    /// Streams whose range was read.
    pub streams: u64,
    /// Records dropped (superseded, or tombstones past their retention).
    pub records_dropped: u64,
    pub bytes_written: u64,
}

impl Compactor {
    /// One key compaction pass over the streams of this compactor's shard.
    pub async fn run_key_pass(&self) -> Result<KeyPassReport, CompactorError> {
        let call = CatalogCall::PlanKeyCompaction { shard: self.config.shard, shards: self.config.shards };
        let targets = self.metadata.catalog(call).await?.into_key_compaction_targets()?;
        let mut report = KeyPassReport::default();
        for target in targets {
            let Some(policy) = target.record.config.key_compaction_policy() else { continue };
            let (basin, stream) = (target.basin.clone(), target.stream.clone());
            match self.compact_by_key(target, policy, &mut report).await {
                Ok(()) => {}
                Err(error @ CompactorError::Metadata(MetadataError::Fenced | MetadataError::Stopped)) => {
                    return Err(error)
                }
                // One stream's failure (a store error, an unreadable block) does not hold
                // the others back; it is tried again next pass.
                Err(error) => tracing::warn!(%basin, %stream, %error, "key compaction of a stream failed"),
            }
        }
        Ok(report)
    }

    async fn compact_by_key(
        &self,
        target: KeyCompactionTarget,
        policy: KeyCompactionPolicy,
        report: &mut KeyPassReport,
    ) -> Result<(), CompactorError> {
        let now_ms = self.clock.now_ms();
        let tiered = match &self.tiered_through {
            Some(tiered_through) => tiered_through(target.clone()).await?,
            None => None,
        };
        let entries = self.range_to_compact(&target, policy, tiered, now_ms).await?;
        let Some(horizon) = entries.last().map(IndexEntry::end_seq) else { return Ok(()) };
        let cursor = target.cursor;
        let tombstones_due = cursor.tombstones_due_ms != 0 && now_ms >= cursor.tombstones_due_ms;
        let (clean, dirty): (Vec<&IndexEntry>, Vec<&IndexEntry>) =
            entries.iter().partition(|entry| entry.end_seq() <= cursor.through);
        let bytes = |entries: &[&IndexEntry]| entries.iter().map(|e| u64::from(e.len)).sum::<u64>();
        if !tombstones_due && (dirty.is_empty() || 2 * bytes(&dirty) < bytes(&clean)) {
            return Ok(());
        }
        report.streams += 1;
        let run = CompactionRun {
            basin: target.basin.clone(),
            stream: target.stream.clone(),
            stream_id: target.record.id,
            entries,
        };
        let blocks = self.fetch(std::slice::from_ref(&run)).await?;
        let Some(inputs) =
            run.entries.iter().map(|e| blocks.get(&(e.segment_id, e.offset)).map(|b| (*e, b.clone()))).collect()
        else {
            // Rewritten or trimmed since the lookup: the next pass looks again.
            return Ok(());
        };
        let block_bytes = self.config.block_bytes;
        let last = target.record.next_seq.saturating_sub(1);
        let rewrite =
            tokio::task::spawn_blocking(move || rewrite_by_key(&run, inputs, policy, last, now_ms, block_bytes))
                .await
                .map_err(|e| CompactorError::Merge(e.to_string()))??;
        let mut moved = KeyCursor { through: horizon, tombstones_due_ms: rewrite.tombstones_due_ms };
        if rewrite.dropped > 0 {
            let Some(swapped) = self.upload_and_swap(rewrite.parts, rewrite.replacements).await? else { return Ok(()) };
            if swapped.dropped > 0 {
                // A trim, delete or other compaction changed the stream meanwhile; what
                // was swapped stands, and the next pass compacts the rest.
                moved = cursor;
            }
            report.bytes_written += swapped.bytes;
            report.records_dropped += rewrite.dropped;
            self.stats.key_records_dropped.fetch_add(rewrite.dropped, Ordering::Relaxed);
        }
        self.stats.key_passes.fetch_add(1, Ordering::Relaxed);
        if moved != cursor {
            let call = CatalogCall::KeyCompacted { stream_id: target.record.id, cursor: moved };
            self.metadata.catalog(call).await?.into_done()?;
        }
        tracing::info!(
            basin = %target.basin,
            stream = %target.stream,
            through = horizon,
            dropped = rewrite.dropped,
            "compacted by key"
        );
        Ok(())
    }

    /// The stream's entries from its trim point to its horizon (see the module docs).
    async fn range_to_compact(
        &self,
        target: &KeyCompactionTarget,
        policy: KeyCompactionPolicy,
        tiered: Option<u64>,
        now_ms: u64,
    ) -> Result<Vec<IndexEntry>, CompactorError> {
        let record = &target.record;
        let limit = tiered.unwrap_or(u64::MAX).min(record.next_seq);
        let old_enough = |entry: &IndexEntry| entry.last_timestamp.saturating_add(policy.min_lag_ms) <= now_ms;
        let mut taken: Vec<IndexEntry> = Vec::new();
        let mut bytes = 0u64;
        let mut seq = record.trim_point;
        while seq < limit {
            let entries = self.metadata.entries_from(record.id, seq, ENTRIES_PER_LOOKUP).await?;
            let Some(last) = entries.last().map(IndexEntry::end_seq) else { break };
            for entry in entries {
                // The entry holding the trim point starts below it: it is rewritten whole
                // or not at all, so it is left until retention removes it.
                if entry.first_seq < record.trim_point {
                    continue;
                }
                if entry.end_seq() > limit || !old_enough(&entry) || bytes + u64::from(entry.len) > MAX_STREAM_BYTES {
                    return Ok(taken);
                }
                bytes += u64::from(entry.len);
                taken.push(entry);
            }
            if last <= seq {
                break;
            }
            seq = last;
        }
        Ok(taken)
    }
}

/// A stream's range rewritten by key, before its upload.
struct KeyRewrite {
    parts: Vec<Bytes>,
    replacements: Vec<shale_metadata_contract::Replacement>,
    dropped: u64,
    /// When the first tombstone kept may go (0: none kept).
    tombstones_due_ms: u64,
}

/// Keeps the last record of each key (and each record without one, and the stream's
/// `last`), drops tombstones past their retention, and lays what is kept out as one
/// object.
fn rewrite_by_key(
    run: &CompactionRun,
    inputs: Vec<(IndexEntry, Bytes)>,
    policy: KeyCompactionPolicy,
    last: u64,
    now_ms: u64,
    block_bytes: u64,
) -> Result<KeyRewrite, CompactorError> {
    let decoded = decode_entries(&inputs)?;
    let latest = latest_offsets(&decoded);
    let mut dropped = 0u64;
    let mut tombstones_due_ms = 0u64;
    let merged: Vec<MergedBlock> = merge_kept(decoded, block_bytes, |offset, record| {
        let keep = match kafka_key(&record.headers) {
            _ if offset == last => true,
            None => true,
            Some(key) if latest.get(key) != Some(&offset) => false,
            Some(_) if is_tombstone(&record.headers) => {
                let due = record.timestamp.unwrap_or(0).saturating_add(policy.delete_retention_ms);
                let keep = due > now_ms;
                if keep {
                    tombstones_due_ms = if tombstones_due_ms == 0 { due } else { tombstones_due_ms.min(due) };
                }
                keep
            }
            Some(_) => true,
        };
        dropped += u64::from(!keep);
        keep
    });
    let mut builder = SegmentBuilder::new();
    let mut replacements = Vec::new();
    if dropped > 0 {
        lay_out(&mut builder, &mut replacements, run, merged);
    }
    Ok(KeyRewrite { parts: builder.finish_parts(), replacements, dropped, tombstones_due_ms })
}

/// Each key's last offset in the range.
fn latest_offsets(decoded: &[DecodedEntry]) -> HashMap<Bytes, u64> {
    let mut latest = HashMap::new();
    for (entry, block) in decoded {
        for (i, record) in block.records.iter().enumerate() {
            if let Some(key) = kafka_key(&record.headers) {
                latest.insert(key.clone(), entry.first_seq + block.position(i));
            }
        }
    }
    latest
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_proto::record::{KEY_HEADER, NULL_VALUE_HEADER};
    use shale_proto::segment::{decode_block, encode_block};
    use shale_proto::{Header, Record, TimestampPolicy, TimestampingMode};

    fn keyed(key: &str, value: Option<&str>, timestamp: u64) -> Record {
        let mut headers = vec![Header { name: Bytes::from_static(KEY_HEADER), value: Bytes::from(key.to_string()) }];
        if value.is_none() {
            headers.push(Header { name: Bytes::from_static(NULL_VALUE_HEADER), value: Bytes::new() });
        }
        Record {
            timestamp: Some(timestamp),
            headers: headers.into(),
            body: Bytes::from(value.unwrap_or_default().to_string()),
        }
    }

    fn input(first_seq: u64, records: &[Record]) -> (IndexEntry, Bytes) {
        let block = encode_block(0, records);
        let entry = IndexEntry {
            segment_id: 1,
            offset: 0,
            len: u32::try_from(block.len()).unwrap_or(u32::MAX),
            first_seq,
            record_count: u32::try_from(records.len()).unwrap_or(u32::MAX),
            first_timestamp: 0,
            last_timestamp: 0,
            timestamp_floor: 0,
            timestamp_policy: TimestampPolicy { mode: TimestampingMode::ClientRequire, uncapped: true },
            arrival_cap: None,
            metered_end: None,
        };
        (entry, block)
    }

    /// The last value of each key stays at its offset; superseded values and a tombstone
    /// past its retention go; a younger tombstone and a keyless record stay, and the
    /// cursor learns when that tombstone falls due.
    #[test]
    fn the_last_record_of_each_key_stays_at_its_offset() {
        let keyless = Record { timestamp: Some(1), headers: Default::default(), body: Bytes::from_static(b"s2") };
        let inputs = vec![
            input(0, &[keyed("a", Some("a0"), 1), keyed("b", Some("b0"), 1), keyless]),
            input(3, &[keyed("a", Some("a1"), 2), keyed("c", Some("c0"), 2), keyed("b", None, 2)]),
            input(6, &[keyed("c", None, 90), keyed("d", Some("d0"), 95)]),
        ];
        let run = CompactionRun { basin: "b".into(), stream: "s".into(), stream_id: 7, entries: vec![] };
        let policy = KeyCompactionPolicy { delete_retention_ms: 50, min_lag_ms: 0 };
        let rewrite = rewrite_by_key(&run, inputs, policy, u64::MAX, 100, u64::MAX).unwrap();
        // Dropped: a0, b0 (superseded), c0 (superseded by its tombstone), b's tombstone
        // (2 + 50 <= 100). Kept: the keyless record, a1, c's tombstone (due 140), d0.
        assert_eq!(rewrite.dropped, 4);
        assert_eq!(rewrite.tombstones_due_ms, 140);
        let [replacement] = rewrite.replacements.as_slice() else { panic!("one replacement") };
        assert_eq!((replacement.new.first_seq, replacement.new.end_seq()), (0, 8), "offsets spanned unchanged");
        assert_eq!(replacement.old.len(), 3);
        let object: Vec<u8> = rewrite.parts.concat();
        let at = replacement.new.offset as usize;
        let block = decode_block("o", &Bytes::from(object[at..at + replacement.new.len as usize].to_vec())).unwrap();
        let kept: Vec<(u64, &[u8])> =
            (0..block.records.len()).map(|i| (block.position(i), block.records[i].body.as_ref())).collect();
        assert_eq!(kept, vec![(2, &b"s2"[..]), (3, b"a1"), (6, b""), (7, b"d0")]);
    }

    #[test]
    fn nothing_superseded_rewrites_nothing() {
        let inputs = vec![input(0, &[keyed("a", Some("a0"), 1), keyed("b", Some("b0"), 1)])];
        let run = CompactionRun { basin: "b".into(), stream: "s".into(), stream_id: 7, entries: vec![] };
        let policy = KeyCompactionPolicy { delete_retention_ms: 50, min_lag_ms: 0 };
        let rewrite = rewrite_by_key(&run, inputs, policy, u64::MAX, 100, u64::MAX).unwrap();
        assert_eq!((rewrite.dropped, rewrite.replacements.len(), rewrite.tombstones_due_ms), (0, 0, 0));
    }

    /// The stream's last record stays, even a tombstone past its retention: a consumer at
    /// the tail finds the record before it.
    #[test]
    fn the_streams_last_record_stays_even_as_an_expired_tombstone() {
        let inputs = vec![input(0, &[keyed("a", Some("a0"), 1), keyed("a", None, 1)])];
        let run = CompactionRun { basin: "b".into(), stream: "s".into(), stream_id: 7, entries: vec![] };
        let policy = KeyCompactionPolicy { delete_retention_ms: 50, min_lag_ms: 0 };
        let kept_last = rewrite_by_key(&run, inputs.clone(), policy, 1, 100, u64::MAX).unwrap();
        assert_eq!(kept_last.dropped, 1, "only a0");
        let past = rewrite_by_key(&run, inputs, policy, 2, 100, u64::MAX).unwrap();
        assert_eq!(past.dropped, 2, "not the last record: the expired tombstone goes too");
    }
}
