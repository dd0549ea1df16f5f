//! Merging a stream's consecutive blocks into larger blocks whose records carry their
//! final timestamps, so the new index entry replays them as they are.

use bytes::Bytes;
use shale_metadata_contract::IndexEntry;
use shale_proto::segment::{decode_block, encode_block, object_path};
use shale_proto::{Record, SegmentError, TimestampPolicy, TimestampingMode};

use crate::CompactorError;

/// The policy of a merged entry: every record carries its final timestamp, kept as is.
pub(crate) const MERGED_POLICY: TimestampPolicy =
    TimestampPolicy { mode: TimestampingMode::ClientRequire, uncapped: true };

/// One merged block and the entries it replaces.
#[derive(Debug)]
pub(crate) struct MergedBlock {
    pub old: Vec<IndexEntry>,
    pub block: Bytes,
    pub record_count: u32,
    pub first_timestamp: u64,
    pub last_timestamp: u64,
    /// The first old entry's floor: where the stream's timestamps stood before it.
    pub timestamp_floor: u64,
}

#[derive(Default)]
struct Pending {
    old: Vec<IndexEntry>,
    records: Vec<Record>,
    bytes: u64,
}

/// Merges consecutive entries of one stream (each with its block's bytes) into blocks of
/// about `block_bytes`, never splitting an entry; a remainder under half a block joins the
/// block before it, so a run is read with as few GETs as its size allows.
pub(crate) fn merge_run(entries: &[(IndexEntry, Bytes)], block_bytes: u64) -> Result<Vec<MergedBlock>, CompactorError> {
    let mut merged = Vec::new();
    let mut pending = Pending::default();
    let mut remaining: u64 = entries.iter().map(|(entry, _)| u64::from(entry.len)).sum();
    for (entry, raw) in entries {
        let object = object_path(entry.segment_id);
        let decoded = decode_block(&object, raw).map_err(|e| shale_proto::segment::at_offset(e, entry.offset))?;
        if decoded.records.len() != entry.record_count as usize {
            return Err(SegmentError::Malformed {
                object,
                offset: entry.offset,
                detail: "record count differs from index entry",
            }
            .into());
        }
        let mut resolver = entry.resolver(decoded.arrival);
        pending.records.extend(decoded.records.into_iter().map(|mut record| {
            record.timestamp = Some(resolver.next(record.timestamp));
            record
        }));
        pending.old.push(*entry);
        pending.bytes += u64::from(entry.len);
        remaining -= u64::from(entry.len);
        if pending.bytes >= block_bytes && remaining >= block_bytes / 2 {
            merged.push(finish(std::mem::take(&mut pending)));
        }
    }
    if !pending.old.is_empty() {
        merged.push(finish(pending));
    }
    Ok(merged)
}

fn finish(pending: Pending) -> MergedBlock {
    let first_timestamp = pending.records.first().and_then(|r| r.timestamp).unwrap_or_default();
    let last_timestamp = pending.records.last().and_then(|r| r.timestamp).unwrap_or_default();
    let timestamp_floor = pending.old.first().map_or(0, |entry| entry.timestamp_floor);
    MergedBlock {
        block: encode_block(last_timestamp, &pending.records),
        record_count: u32::try_from(pending.records.len()).unwrap_or(u32::MAX),
        old: pending.old,
        first_timestamp,
        last_timestamp,
        timestamp_floor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_proto::Header;

    fn entry(first_seq: u64, count: u32, len: u32, policy: TimestampPolicy, floor: u64) -> IndexEntry {
        IndexEntry {
            segment_id: 1,
            offset: 0,
            len,
            first_seq,
            record_count: count,
            first_timestamp: 0,
            last_timestamp: 0,
            timestamp_floor: floor,
            timestamp_policy: policy,
            arrival_cap: None,
            metered_end: None,
        }
    }

    /// Replaying a merged block gives the records and timestamps the old entries gave.
    #[test]
    fn merged_blocks_replay_the_same_records_and_timestamps() {
        let arrival = TimestampPolicy { mode: TimestampingMode::Arrival, uncapped: false };
        let prefer = TimestampPolicy { mode: TimestampingMode::ClientPrefer, uncapped: false };
        let record = |ts: Option<u64>, body: &'static str| Record {
            timestamp: ts,
            headers: vec![Header { name: Bytes::from_static(b"h"), value: Bytes::from_static(b"v") }],
            body: Bytes::from_static(body.as_bytes()),
        };
        let blocks = [
            (entry(0, 2, 0, arrival, 50), encode_block(100, &[record(Some(5), "a"), record(None, "b")])),
            (entry(2, 2, 0, prefer, 100), encode_block(200, &[record(Some(150), "c"), record(Some(900), "d")])),
            (entry(4, 1, 0, prefer, 200), encode_block(300, &[record(None, "e")])),
        ];
        let inputs: Vec<(IndexEntry, Bytes)> = blocks
            .iter()
            .map(|(e, b)| (IndexEntry { len: u32::try_from(b.len()).unwrap(), ..*e }, b.clone()))
            .collect();
        let mut expected = Vec::new();
        for (entry, raw) in &inputs {
            let decoded = decode_block("x", raw).unwrap();
            let mut resolver = entry.resolver(decoded.arrival);
            expected.extend(decoded.records.iter().map(|r| (resolver.next(r.timestamp), r.body.clone())));
        }
        // Blocks of about two entries: [0, 2) closes with more than half a block left,
        // then [2, 4) + [4, 5): the small remainder joins the block before it.
        let two_entries = u64::from(inputs[0].0.len) + 1;
        let merged = merge_run(&inputs, two_entries).unwrap();
        assert_eq!(merged.iter().map(|m| m.old.len()).collect::<Vec<_>>(), vec![2, 1]);

        let mut replayed = Vec::new();
        for block in &merged {
            let new = IndexEntry {
                timestamp_floor: block.timestamp_floor,
                timestamp_policy: MERGED_POLICY,
                record_count: block.record_count,
                ..block.old[0]
            };
            let decoded = decode_block("x", &block.block).unwrap();
            let mut resolver = new.resolver(decoded.arrival);
            replayed.extend(decoded.records.iter().map(|r| (resolver.next(r.timestamp), r.body.clone())));
            assert_eq!(decoded.records[0].headers.len(), 1, "headers survive");
        }
        assert_eq!(replayed, expected);
        assert_eq!(expected.iter().map(|(ts, _)| *ts).collect::<Vec<_>>(), vec![100, 100, 150, 200, 300]);
        assert_eq!((merged[0].first_timestamp, merged[0].last_timestamp, merged[0].timestamp_floor), (100, 200, 50));
    }

    /// Four equal entries in blocks of three: the fourth, under half a block, joins the
    /// block before it instead of costing a GET of its own.
    #[test]
    fn a_small_remainder_joins_the_block_before_it() {
        let policy = TimestampPolicy { mode: TimestampingMode::Arrival, uncapped: false };
        let block = encode_block(100, &[Record { timestamp: None, headers: vec![], body: Bytes::from_static(b"x") }]);
        let len = u32::try_from(block.len()).unwrap();
        let inputs: Vec<(IndexEntry, Bytes)> =
            (0..4).map(|i| (IndexEntry { len, ..entry(i, 1, len, policy, 0) }, block.clone())).collect();
        let sizes = |block_bytes| -> Vec<usize> {
            merge_run(&inputs, block_bytes).unwrap().iter().map(|m| m.old.len()).collect()
        };
        assert_eq!(sizes(3 * u64::from(len)), vec![4]);
        assert_eq!(sizes(2 * u64::from(len)), vec![2, 2]);
    }
}
