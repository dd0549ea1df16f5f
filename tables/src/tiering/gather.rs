//! What a pass tiers: the basin's streams listed, and each stream's records past its
//! position that are in compacted objects or old enough, read from the log.

use std::collections::BTreeMap;

use shale_metadata_contract::{BasinRecord, MetadataError, StreamSummary};
use shale_proto::record::SequencedRecord;
use shale_reader::{ReadLimits, ReadRequest, ReadStart, ReaderError};

use super::{StreamPosition, TableState, Tierer, MAX_PASS_BYTES};
use crate::{TableRow, TablesError};

/// Records read per call.
const READ_RECORDS: u64 = 1000;

/// Streams of a basin read at once during a pass: at store latency a pass waits on
/// reads, not on the CPU.
const CONCURRENT_STREAMS: usize = 16;

impl Tierer {
    /// The records of the basin's streams that are below `cutoff` and not yet tiered,
    /// up to [`MAX_PASS_BYTES`], and the positions after them.
    pub(super) async fn gather(
        &self,
        basin: &BasinRecord,
        state: &TableState,
        cutoff: u64,
    ) -> Result<(Vec<TableRow>, BTreeMap<String, StreamPosition>), TablesError> {
        let mut positions = state.positions.clone();
        let mut rows = Vec::new();
        let mut bytes = 0;
        let mut start_after = String::new();
        let mut listed = std::collections::BTreeSet::new();
        'streams: loop {
            let page = self.metadata.list_streams(&basin.name, "", &start_after, 1000).await?;
            listed.extend(page.items.iter().map(|s| s.name.clone()));
            // Streams are read several at a time, each up to its share of what the pass
            // may still take.
            // A stream whose tail is where tiering goes on from has nothing to read.
            let start = |stream: &StreamSummary| match positions.get(&stream.name) {
                Some(position) if position.created_at_ms == stream.created_at_ms => position.next_seq,
                _ => 0,
            };
            let pending: Vec<(&StreamSummary, u64)> =
                page.items.iter().map(|s| (s, start(s))).filter(|(s, start)| s.tail > *start).collect();
            for chunk in pending.chunks(CONCURRENT_STREAMS) {
                if bytes >= MAX_PASS_BYTES {
                    break 'streams;
                }
                let share = (MAX_PASS_BYTES - bytes) / chunk.len() as u64;
                let reads = chunk
                    .iter()
                    .map(|&(stream, start)| self.read_eligible(&basin.name, &stream.name, start, cutoff, share));
                let read = futures::future::join_all(reads).await;
                for (&(stream, _), records) in chunk.iter().zip(read) {
                    let records = records?;
                    let Some(last) = records.last() else { continue };
                    let position = StreamPosition { created_at_ms: stream.created_at_ms, next_seq: last.seq_num + 1 };
                    positions.insert(stream.name.clone(), position);
                    bytes += records.iter().map(|r| r.metered_bytes()).sum::<u64>();
                    let created_at_ms = stream.created_at_ms;
                    let name = &stream.name;
                    rows.extend(records.into_iter().map(|record| TableRow {
                        stream: name.clone(),
                        created_at_ms,
                        record,
                    }));
                }
            }
            match page.items.last() {
                Some(last) if page.has_more => start_after = last.name.clone(),
                _ => {
                    // Every stream was listed: positions of deleted ones go.
                    positions.retain(|name, _| listed.contains(name));
                    break;
                }
            }
        }
        Ok((rows, positions))
    }

    /// A stream's records from `start` that are in compacted objects or have timestamps
    /// below `cutoff`, up to about `share` metered bytes; none when the stream was
    /// deleted since it was listed.
    async fn read_eligible(
        &self,
        basin: &str,
        stream: &str,
        start: u64,
        cutoff: u64,
        share: u64,
    ) -> Result<Vec<SequencedRecord>, TablesError> {
        let compacted = match self.metadata.compacted_through(basin, stream).await {
            Ok(compacted) => compacted,
            Err(MetadataError::StreamNotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let (mut records, mut next, mut bytes) = (Vec::new(), start, 0);
        while bytes < share {
            // Records in compacted objects are tiered whatever their age, the rest once
            // they are old enough.
            let (count, until) = match next < compacted {
                true => ((compacted - next).min(READ_RECORDS), None),
                false => (READ_RECORDS, Some(cutoff)),
            };
            let request = ReadRequest {
                basin: basin.into(),
                stream: stream.into(),
                start: ReadStart::SeqNum(next),
                limits: ReadLimits { count: Some(count), ..ReadLimits::default() },
                until,
                clamp: false,
                wait: std::time::Duration::ZERO,
            };
            let read = match self.reader.read(&request).await {
                Ok(output) => output.records,
                Err(ReaderError::Metadata(MetadataError::StreamNotFound { .. })) => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            let Some(last) = read.last() else { break };
            next = last.seq_num + 1;
            bytes += read.iter().map(|r| r.metered_bytes()).sum::<u64>();
            records.extend(read);
        }
        Ok(records)
    }
}
