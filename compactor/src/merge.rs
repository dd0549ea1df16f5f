//! Merging a stream's consecutive blocks into larger blocks whose records carry their
//! final timestamps, so the new index entry replays them as they are.

use bytes::Bytes;
use shale_metadata_contract::{CompactionRun, IndexEntry, Replacement};
use shale_proto::segment::{decode_block, encode_block, encode_sparse_block, object_path, DecodedBlock};
use shale_proto::{Record, SegmentBuilder, SegmentError, TimestampPolicy, TimestampingMode};

use crate::CompactorError;

/// The policy of a merged entry: every record carries its final timestamp, kept as is.
pub(crate) const MERGED_POLICY: TimestampPolicy =
    TimestampPolicy { mode: TimestampingMode::ClientRequire, uncapped: true };

/// One merged block and the entries it replaces.
#[derive(Debug)]
pub(crate) struct MergedBlock {
    pub old: Vec<IndexEntry>,
    pub block: Bytes,
    /// Records in the block (fewer than the offsets it spans when some were dropped).
    pub records: u32,
    /// Offsets the old entries span: the new entry's `record_count`.
    pub span: u32,
    pub first_timestamp: u64,
    pub last_timestamp: u64,
    /// The first old entry's floor: where the stream's timestamps stood before it.
    pub timestamp_floor: u64,
}

/// A stream's block, decoded, with its entry.
pub(crate) type DecodedEntry = (IndexEntry, DecodedBlock);

#[derive(Default)]
struct Pending {
    old: Vec<IndexEntry>,
    records: Vec<Record>,
    /// Each record's offset minus the first old entry's first.
    positions: Vec<u32>,
    bytes: u64,
}

/// Decodes each entry's block, checking it fits its entry.
pub(crate) fn decode_entries(entries: &[(IndexEntry, Bytes)]) -> Result<Vec<DecodedEntry>, CompactorError> {
    entries
        .iter()
        .map(|(entry, raw)| {
            let object = object_path(entry.segment_id);
            let decoded = decode_block(&object, raw).map_err(|e| shale_proto::segment::at_offset(e, entry.offset))?;
            if !entry.fits(&decoded) {
                return Err(SegmentError::Malformed {
                    object,
                    offset: entry.offset,
                    detail: "record count differs from index entry",
                }
                .into());
            }
            Ok((*entry, decoded))
        })
        .collect()
}

/// Merges consecutive entries of one stream (each with its block's bytes) into blocks of
/// about `block_bytes`, never splitting an entry; a remainder under half a block joins the
/// block before it, so a run is read with as few GETs as its size allows.
pub(crate) fn merge_run(entries: &[(IndexEntry, Bytes)], block_bytes: u64) -> Result<Vec<MergedBlock>, CompactorError> {
    Ok(merge_kept(decode_entries(entries)?, block_bytes, |_, _| true))
}

/// [`merge_run`] over decoded entries, keeping only the records `keep` accepts (given
/// each record's offset and its final timestamp): the blocks of what is dropped keep
/// their offsets as gaps, so the new entries span exactly the old ones.
pub(crate) fn merge_kept(
    entries: Vec<DecodedEntry>,
    block_bytes: u64,
    mut keep: impl FnMut(u64, &Record) -> bool,
) -> Vec<MergedBlock> {
    let mut kept_entries = Vec::with_capacity(entries.len());
    for (entry, decoded) in entries {
        let total = decoded.records.len().max(1) as u64;
        let mut resolver = entry.resolver(decoded.arrival);
        let mut kept = Vec::new();
        for (i, mut record) in decoded.records.into_iter().enumerate() {
            record.timestamp = Some(resolver.next(record.timestamp));
            let offset = entry.first_seq + decoded.positions.get(i).map_or(i as u64, |&p| u64::from(p));
            if keep(offset, &record) {
                kept.push((offset, record));
            }
        }
        // An entry's share of a block: its bytes, scaled by what of it is kept.
        let bytes = (u64::from(entry.len) * kept.len() as u64).div_ceil(total);
        kept_entries.push((entry, kept, bytes));
    }
    let mut merged = Vec::new();
    let mut pending = Pending::default();
    let mut remaining: u64 = kept_entries.iter().map(|(_, _, bytes)| bytes).sum();
    for (entry, kept, bytes) in kept_entries {
        let base = pending.old.first().map_or(entry.first_seq, |first| first.first_seq);
        for (offset, record) in kept {
            pending.positions.push(u32::try_from(offset - base).unwrap_or(u32::MAX));
            pending.records.push(record);
        }
        pending.old.push(entry);
        pending.bytes += bytes;
        remaining -= bytes;
        if pending.bytes >= block_bytes && remaining >= block_bytes / 2 {
            merged.push(finish(std::mem::take(&mut pending)));
        }
    }
    if !pending.old.is_empty() {
        merged.push(finish(pending));
    }
    merged
}

fn finish(pending: Pending) -> MergedBlock {
    let first = pending.old.first().copied();
    let last = pending.old.last().copied();
    let span = match (first, last) {
        (Some(first), Some(last)) => u32::try_from(last.end_seq() - first.first_seq).unwrap_or(u32::MAX),
        _ => 0,
    };
    // A block that dropped nothing stays dense; an empty one keeps the old entries'
    // timestamps, so the stream's time index stays in order.
    let first_timestamp =
        pending.records.first().and_then(|r| r.timestamp).or(first.map(|e| e.first_timestamp)).unwrap_or_default();
    let last_timestamp =
        pending.records.last().and_then(|r| r.timestamp).or(last.map(|e| e.last_timestamp)).unwrap_or_default();
    let timestamp_floor = first.map_or(0, |entry| entry.timestamp_floor);
    let records = u32::try_from(pending.records.len()).unwrap_or(u32::MAX);
    let block = if records == span {
        encode_block(last_timestamp, &pending.records)
    } else {
        encode_sparse_block(last_timestamp, &pending.records, &pending.positions)
    };
    MergedBlock { block, records, span, old: pending.old, first_timestamp, last_timestamp, timestamp_floor }
}

/// Adds a run's merged blocks to `builder`, and the replacement naming each.
pub(crate) fn lay_out(
    builder: &mut SegmentBuilder,
    replacements: &mut Vec<Replacement>,
    run: &CompactionRun,
    merged: Vec<MergedBlock>,
) {
    let stream_key = Bytes::from(format!("{}/{}", run.basin, run.stream));
    for merged in merged {
        let info = builder.push_block(stream_key.clone(), merged.records, merged.block);
        let first = merged.old[0];
        let new = IndexEntry {
            segment_id: 0,
            offset: info.offset,
            len: info.len,
            first_seq: first.first_seq,
            record_count: merged.span,
            first_timestamp: merged.first_timestamp,
            last_timestamp: merged.last_timestamp,
            timestamp_floor: merged.timestamp_floor,
            timestamp_policy: MERGED_POLICY,
            arrival_cap: None,
            metered_end: merged.old.last().and_then(|last| last.metered_end),
        };
        let (basin, stream) = (run.basin.clone(), run.stream.clone());
        replacements.push(Replacement { stream_id: run.stream_id, basin, stream, old: merged.old, new });
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
            headers: vec![Header { name: Bytes::from_static(b"h"), value: Bytes::from_static(b"v") }].into(),
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
                record_count: block.span,
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
        let block = encode_block(
            100,
            &[Record { timestamp: None, headers: Default::default(), body: Bytes::from_static(b"x") }],
        );
        let len = u32::try_from(block.len()).unwrap();
        let inputs: Vec<(IndexEntry, Bytes)> =
            (0..4).map(|i| (IndexEntry { len, ..entry(i, 1, len, policy, 0) }, block.clone())).collect();
        let sizes = |block_bytes| -> Vec<usize> {
            merge_run(&inputs, block_bytes).unwrap().iter().map(|m| m.old.len()).collect()
        };
        assert_eq!(sizes(3 * u64::from(len)), vec![4]);
        assert_eq!(sizes(2 * u64::from(len)), vec![2, 2]);
    }
    /// Records dropped by `keep` leave gaps: the kept ones keep their offsets, the new
    /// entries span the old ones exactly, and a fully kept block stays dense.
    #[test]
    fn dropped_records_leave_gaps_and_kept_ones_keep_their_offsets() {
        let policy = TimestampPolicy { mode: TimestampingMode::Arrival, uncapped: false };
        let record = |body: &'static str| Record {
            timestamp: None,
            headers: Default::default(),
            body: Bytes::from_static(body.as_bytes()),
        };
        let a = encode_block(100, &[record("a0"), record("a1"), record("a2")]);
        let b = encode_block(200, &[record("b0"), record("b1")]);
        let inputs = vec![
            (IndexEntry { len: u32::try_from(a.len()).unwrap(), ..entry(10, 3, 0, policy, 0) }, a),
            (IndexEntry { len: u32::try_from(b.len()).unwrap(), ..entry(13, 2, 0, policy, 0) }, b),
        ];
        let decoded = decode_entries(&inputs).unwrap();
        let [merged] = merge_kept(decoded, u64::MAX, |offset, _| offset % 2 == 0).try_into().unwrap();
        assert_eq!((merged.records, merged.span, merged.old.len()), (3, 5, 2));
        let block = decode_block("x", &merged.block).unwrap();
        let offsets: Vec<u64> = (0..block.records.len()).map(|i| 10 + block.position(i)).collect();
        assert_eq!(offsets, vec![10, 12, 14]);
        let bodies: Vec<&[u8]> = block.records.iter().map(|r| r.body.as_ref()).collect();
        assert_eq!(bodies, vec![&b"a0"[..], b"a2", b"b1"]);
        assert_eq!((merged.first_timestamp, merged.last_timestamp), (100, 200));

        let decoded = decode_entries(&inputs).unwrap();
        let [whole] = merge_kept(decoded, u64::MAX, |_, _| true).try_into().unwrap();
        assert!(decode_block("x", &whole.block).unwrap().positions.is_empty(), "nothing dropped: dense");
    }
}
