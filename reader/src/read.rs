//! Reads: resolving the start, walking index entries, applying limits, waiting.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use shale_metadata_contract::{IndexEntry, MetadataApi, Position, StreamInfo};
use shale_proto::record::{MAX_BATCH_METERED_BYTES, MAX_BATCH_RECORDS};
use shale_proto::SequencedRecord;
use shale_storage::object_store::ObjectStore;
use tokio::sync::watch;

use crate::cache::{CacheStats, Caches};
use crate::{History, HistoryRead, ReaderConfig, ReaderError};

/// Where a read starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadStart {
    /// At this sequence number.
    SeqNum(u64),
    /// At the first record whose timestamp is at or after this (ms).
    Timestamp(u64),
    /// This many records before the tail.
    TailOffset(u64),
}

/// A read that names no start begins at the tail (it waits for new records), as in S2.
impl Default for ReadStart {
    fn default() -> Self {
        ReadStart::TailOffset(0)
    }
}

/// Bounds on one read; unset means S2's maximum (1000 records, 1 MiB).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadLimits {
    pub count: Option<u64>,
    pub bytes: Option<u64>,
    /// The read's first record is returned even when it alone is over `bytes`. Without
    /// it a read stops before such a record, as S2 bounds a read by bytes; Kafka answers
    /// a fetch's first batch whatever the fetch's bounds. A read without `bytes` always
    /// returns its first record: its bound is S2's 1 MiB, which only a record produced
    /// through Kafka (up to 8 MiB) passes, and such a record must not stop every reader.
    /// A read below the trim point served from the table tier ([`History`]) always
    /// returns its first record too: an empty answer from the table means it holds
    /// nothing there, and the read moves on to the trim point.
    pub at_least_one: bool,
}

/// One read of one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    pub basin: String,
    pub stream: String,
    pub start: ReadStart,
    pub limits: ReadLimits,
    /// Only records with timestamps below this (ms).
    pub until: Option<u64>,
    /// Start at the tail instead of failing when the start lies past it.
    pub clamp: bool,
    /// How long to wait for records when none are available yet.
    pub wait: Duration,
}

/// Records read and the stream's tail when they were read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOutput {
    pub records: Vec<SequencedRecord>,
    pub tail: Position,
    /// The read stopped at `until`: later reads from here return nothing new.
    pub reached_until: bool,
}

/// Index entries fetched per metadata scan by a one-off read.
const ENTRIES_PER_SCAN: usize = 32;

/// Times one read looks the stream up again after finding an entry's object gone.
const MAX_GONE_RETRIES: u32 = 8;

/// Blocks fetched at once, at the least: a read fetches its batch's blocks, in order,
/// this many or more at a time (so a catch-up over small entries waits one store round
/// trip per group, not per block), and a session continuing starts fetching as many past
/// its batch, for its next one.
const BLOCKS_AT_ONCE: usize = 8;

/// Bytes of blocks fetched at once past [`BLOCKS_AT_ONCE`] blocks, whatever their count (up
/// to [`MAX_BLOCKS_AT_ONCE`]): a catch-up at a store round trip of 30 ms needs about this
/// much in flight for 200 MiB/s. Eight small blocks (a partition's share of a small
/// segment, 7-100 KiB) were one or two segment reads at a time, and a Kafka catch-up
/// over segments written at 20 MiB/s read 38-54 MiB/s.
const BYTES_AT_ONCE: u64 = 8 << 20;
/// The most blocks fetched at once.
const MAX_BLOCKS_AT_ONCE: usize = 64;

/// How many of `entries` (a batch's, or those after it) are fetched at once: at least
/// [`BLOCKS_AT_ONCE`] blocks, else up to [`BYTES_AT_ONCE`] bytes or [`MAX_BLOCKS_AT_ONCE`]
/// blocks, none at or past the tail.
fn fetched_at_once(entries: &[IndexEntry], tail_seq: u64) -> usize {
    let mut bytes = 0u64;
    entries
        .iter()
        .take(MAX_BLOCKS_AT_ONCE)
        .take_while(|entry| entry.first_seq < tail_seq)
        .enumerate()
        .take_while(|(i, entry)| {
            let within = *i < BLOCKS_AT_ONCE || bytes < BYTES_AT_ONCE;
            bytes += u64::from(entry.len);
            within
        })
        .count()
}

/// How many of `entries` (from the one holding `seq`) a batch with `count` records and
/// `bytes` left can use before the tail: their blocks are fetched together, and none
/// past them, so a small read costs no extra GETs. At least one.
fn entries_needed(entries: &[IndexEntry], seq: u64, tail_seq: u64, count: u64, bytes: u64) -> usize {
    let (mut records, mut len) = (0u64, 0u64);
    let mut needed = 0;
    for entry in entries {
        if entry.first_seq >= tail_seq || records >= count || len >= bytes {
            break;
        }
        records += entry.end_seq().saturating_sub(entry.first_seq.max(seq));
        len += u64::from(entry.len);
        needed += 1;
    }
    needed.max(1)
}

/// Index entries fetched per scan by a session past its first read: a catch-up session
/// asks metadata once per this many appends (about 65 bytes each on the wire).
const SESSION_ENTRIES_PER_SCAN: usize = 1024;

/// What a sequence of reads of one stream (a session, a live follow) has learned, so
/// later reads skip metadata: the stream record as last looked up or as the tail
/// notifications moved it since, the index entries ahead, and the subscription to the
/// stream's tail notifications taken before the first lookup (so no commit after it
/// goes unseen).
#[derive(Default)]
pub struct ReadCursor {
    info: Option<StreamInfo>,
    tail_moved: Option<watch::Receiver<Option<Position>>>,
    /// Index entries fetched ahead, and the stream id they belong to (a stream deleted
    /// and created again under the same name has a new id). Kept per cursor although the
    /// shared cache remembers each stream's last scan: other readers of the stream
    /// replace that one.
    ahead: Vec<IndexEntry>,
    ahead_of: u64,
    /// Reads made with this cursor: past the first, it scans entries further ahead.
    reads: u64,
}

impl ReadCursor {
    /// Forgets the stream record, so the next read looks it up again (config, trim
    /// point, deletion). Sessions do this whenever they wait without news.
    pub fn refresh(&mut self) {
        self.info = None;
    }

    /// Whether the cursor has looked its stream up (a new or refreshed one has not).
    pub fn is_open(&self) -> bool {
        self.info.is_some()
    }

    /// The stream as the cursor last looked it up (or as tail notifications moved it).
    pub fn stream(&self) -> Option<&StreamInfo> {
        self.info.as_ref()
    }
}

/// The read path. Cheap to share behind an `Arc`.
pub struct Reader {
    metadata: Arc<dyn MetadataApi>,
    caches: Caches,
    consumer_lag_top: usize,
    /// Where reads starting below a stream's trim point look first.
    history: Option<Arc<dyn History>>,
}

impl Reader {
    /// How many tracked consumers `/metrics` shows lag for.
    pub fn consumer_lag_top(&self) -> usize {
        self.consumer_lag_top
    }

    pub fn new(config: &ReaderConfig, store: Arc<dyn ObjectStore>, metadata: Arc<dyn MetadataApi>) -> Self {
        Self { metadata, caches: Caches::new(config, store), consumer_lag_top: config.consumer_lag_top, history: None }
    }

    /// The same reader, serving reads that start below a stream's trim point from
    /// `history` where it has the records.
    pub fn with_history(self, history: Arc<dyn History>) -> Self {
        Self { history: Some(history), ..self }
    }

    pub fn cache_stats(&self) -> Arc<CacheStats> {
        self.caches.stats.clone()
    }

    /// The stream's tail: the next sequence number and the last timestamp.
    pub async fn check_tail(&self, basin: &str, stream: &str) -> Result<Position, ReaderError> {
        Ok(self.metadata.stream(basin, stream).await?.record.tail())
    }

    /// Opens a cursor on a stream: subscribes to its tail notifications, then looks the
    /// stream up. This is the one metadata call a read open costs; reads with the cursor
    /// start from what it learned.
    pub async fn open(&self, basin: &str, stream: &str) -> Result<ReadCursor, ReaderError> {
        let mut cursor = ReadCursor::default();
        self.look_up(basin, stream, &mut cursor).await?;
        Ok(cursor)
    }

    /// Looks the stream up into `cursor` (subscribing first if it has not yet), keeping
    /// the index entries it scanned ahead while they are the same stream's.
    pub async fn look_up(&self, basin: &str, stream: &str, cursor: &mut ReadCursor) -> Result<(), ReaderError> {
        self.stream_info(basin, stream, cursor, true, false).await?;
        Ok(())
    }

    /// The stream's tail as `cursor` knows it (looked up when it knows nothing).
    pub async fn tail_with(&self, basin: &str, stream: &str, cursor: &mut ReadCursor) -> Result<Position, ReaderError> {
        Ok(self.stream_info(basin, stream, cursor, false, false).await?.record.tail())
    }

    /// Reads records. Waits up to `request.wait` when none are available yet.
    pub async fn read(&self, request: &ReadRequest) -> Result<ReadOutput, ReaderError> {
        self.read_with(request, &mut ReadCursor::default()).await
    }

    /// [`Self::read`], continuing from what earlier reads of the same stream with this
    /// cursor learned: a session asks metadata once when it opens, then about once per
    /// [`SESSION_ENTRIES_PER_SCAN`] appends it catches up on, and not at all per live
    /// commit.
    pub async fn read_with(&self, request: &ReadRequest, cursor: &mut ReadCursor) -> Result<ReadOutput, ReaderError> {
        let count = request.limits.count.unwrap_or(MAX_BATCH_RECORDS as u64).min(MAX_BATCH_RECORDS as u64);
        let bytes = request.limits.bytes.unwrap_or(MAX_BATCH_METERED_BYTES).min(MAX_BATCH_METERED_BYTES);
        let at_least_one = request.limits.at_least_one || request.limits.bytes.is_none();
        let deadline = tokio::time::Instant::now() + request.wait;
        let mut start: Option<(u64, Option<u64>)> = None;
        cursor.reads += 1;
        let mut woken = false;
        let mut gone_retries = 0;
        loop {
            let info = self.stream_info(&request.basin, &request.stream, cursor, false, woken).await?;
            let tail = info.record.tail();
            let (seq, min_timestamp) = match start {
                Some(resolved) => resolved,
                None => self.resolve_start(&info, request).await?,
            };
            if seq < info.record.trim_point {
                if let Some(history) = &self.history {
                    let read = HistoryRead {
                        basin: request.basin.clone(),
                        stream: request.stream.clone(),
                        created_at_ms: info.record.created_at_ms,
                        from_seq: seq,
                        before_seq: info.record.trim_point,
                        count,
                        bytes,
                        until: request.until,
                    };
                    let found = history.read(&read).await?;
                    if !found.records.is_empty() || found.reached_until {
                        return Ok(ReadOutput { records: found.records, tail, reached_until: found.reached_until });
                    }
                }
            }
            let seq = seq.max(info.record.trim_point);
            start = Some((seq, min_timestamp));
            let (records, reached_until) = match self
                .collect(&info, seq, min_timestamp, count, bytes, at_least_one, request.until, cursor)
                .await
            {
                Err(ReaderError::Gone { object }) if gone_retries < MAX_GONE_RETRIES => {
                    gone_retries += 1;
                    tracing::debug!(%object, seq, "segment gone under a read; looking the stream up again");
                    continue;
                }
                other => other?,
            };
            if !records.is_empty() || reached_until || count == 0 || request.wait.is_zero() {
                return Ok(ReadOutput { records, tail, reached_until });
            }
            // Nothing new since the tail this read knows, and the subscription taken before
            // the first look reports every commit after it: wait on it.
            let Some(tail_moved) = cursor.tail_moved.as_mut() else { continue };
            match tokio::time::timeout_at(deadline, tail_moved.changed()).await {
                Ok(Ok(())) => woken = true,
                Ok(Err(_)) | Err(_) => return Ok(ReadOutput { records, tail, reached_until }),
            }
        }
    }

    /// The stream record: looked up when `look` or when nothing is known yet, else as
    /// known, moved to the tail the notifications carried since (looked up when one was
    /// missed). `woken`: the caller just saw the notification change.
    async fn stream_info(
        &self,
        basin: &str,
        stream: &str,
        cursor: &mut ReadCursor,
        look: bool,
        woken: bool,
    ) -> Result<StreamInfo, ReaderError> {
        // Subscribe before the first look, so a commit after it is always seen.
        let tail_moved = cursor.tail_moved.get_or_insert_with(|| self.metadata.subscribe_tail(basin, stream));
        let changed = woken || tail_moved.has_changed().unwrap_or(true);
        let pushed = if changed { Some(*tail_moved.borrow_and_update()) } else { None };
        match (cursor.info.as_mut(), pushed) {
            (Some(info), None) if !look => return Ok(info.clone()),
            (Some(info), Some(Some(tail))) if !look => {
                if tail.seq_num >= info.record.next_seq {
                    info.record.next_seq = tail.seq_num;
                    info.record.last_timestamp = tail.timestamp;
                }
                return Ok(info.clone());
            }
            _ => {}
        }
        let info = self.metadata.stream(basin, stream).await?;
        cursor.info = Some(info.clone());
        Ok(info)
    }

    /// The first sequence number to read, and for timestamp starts the smallest
    /// timestamp to return.
    async fn resolve_start(&self, info: &StreamInfo, request: &ReadRequest) -> Result<(u64, Option<u64>), ReaderError> {
        let tail = info.record.tail();
        match request.start {
            ReadStart::SeqNum(seq) if seq > tail.seq_num => {
                if request.clamp {
                    Ok((tail.seq_num, None))
                } else {
                    Err(ReaderError::PastTail { tail })
                }
            }
            ReadStart::SeqNum(seq) => Ok((seq, None)),
            ReadStart::TailOffset(offset) => Ok((tail.seq_num.saturating_sub(offset), None)),
            ReadStart::Timestamp(ts) => match self.metadata.entry_at_time(info.record.id, ts).await? {
                Some(entry) => Ok((entry.first_seq, Some(ts))),
                None => Ok((tail.seq_num, None)),
            },
        }
    }

    /// Reads from `seq` up to the tail in `info`, within the limits.
    #[allow(clippy::too_many_arguments)]
    async fn collect(
        &self,
        info: &StreamInfo,
        mut seq: u64,
        min_timestamp: Option<u64>,
        count: u64,
        bytes: u64,
        at_least_one: bool,
        until: Option<u64>,
        cursor: &mut ReadCursor,
    ) -> Result<(Vec<SequencedRecord>, bool), ReaderError> {
        let stream_id = info.record.id;
        let tail_seq = info.record.next_seq;
        let mut records = Vec::new();
        let mut used_bytes = 0u64;
        while seq < tail_seq && (records.len() as u64) < count {
            let entries = self.entries(stream_id, seq, cursor).await?;
            if entries.is_empty() {
                break;
            }
            let (count_left, bytes_left) =
                (count.saturating_sub(records.len() as u64), bytes.saturating_sub(used_bytes));
            let needed = entries_needed(&entries, seq, tail_seq, count_left, bytes_left);
            let reach = self.caches.reach(&entries[0], seq, tail_seq);
            if cursor.reads > 1 {
                // A session continuing: its next batch will want the blocks after these.
                let ahead = fetched_at_once(&entries[needed..], tail_seq);
                self.caches.warm(&entries[needed..needed + ahead], reach);
            }
            // The batch's own blocks, as many at once as those ahead.
            let at_once = fetched_at_once(&entries[..needed], tail_seq).max(1);
            let caches = &self.caches;
            let mut blocks = futures::stream::iter(entries[..needed].to_vec())
                .map(move |entry| async move { caches.block(&entry, reach).await })
                .buffered(at_once);
            for &entry in &entries[..needed] {
                // Full, or past the tail: the next block is not used.
                if entry.first_seq >= tail_seq || records.len() as u64 >= count || used_bytes >= bytes {
                    return Ok((records, false));
                }
                let Some(fetched) = blocks.next().await else { break };
                let block = match fetched {
                    Ok(block) => block,
                    // What was read is delivered; the next read starts at this block and
                    // reports its error.
                    Err(error) if !records.is_empty() => {
                        tracing::warn!(%error, seq = entry.first_seq, "stopping a read before an unreadable block");
                        return Ok((records, false));
                    }
                    Err(ReaderError::Gone { object }) => {
                        // Trimmed, expired or rewritten since the entry was looked up:
                        // look the stream and its entries up again.
                        self.caches.forget(stream_id, entry.first_seq).await;
                        self.metadata.forget_entry(stream_id, entry.first_seq);
                        cursor.ahead.clear();
                        cursor.refresh();
                        return Err(ReaderError::Gone { object });
                    }
                    Err(error) => return Err(error),
                };
                let mut resolver = entry.resolver(block.arrival);
                for (i, record) in block.records.iter().enumerate() {
                    let timestamp = resolver.next(record.timestamp);
                    let seq_num = entry.first_seq + block.position(i);
                    if seq_num < seq || min_timestamp.is_some_and(|min| timestamp < min) {
                        continue;
                    }
                    if until.is_some_and(|until| timestamp >= until) {
                        return Ok((records, true));
                    }
                    let size = record.metered_bytes();
                    let over_bytes = used_bytes + size > bytes && !(at_least_one && records.is_empty());
                    if records.len() as u64 >= count || over_bytes {
                        return Ok((records, false));
                    }
                    used_bytes += size;
                    records.push(SequencedRecord {
                        seq_num,
                        timestamp,
                        headers: record.headers.clone(),
                        body: record.body.clone(),
                    });
                }
                self.caches.passed(&entry, reach).await;
                seq = entry.end_seq();
            }
        }
        Ok((records, false))
    }

    /// Index entries from the one holding `seq`: those the cursor fetched ahead, else
    /// from cache when a previous read ended exactly there or inside the stream's last
    /// scan, else from metadata.
    async fn entries(&self, stream_id: u64, seq: u64, cursor: &mut ReadCursor) -> Result<Vec<IndexEntry>, ReaderError> {
        if cursor.ahead_of != stream_id {
            cursor.ahead.clear();
        }
        cursor.ahead.retain(|entry| entry.end_seq() > seq);
        if cursor.ahead.first().is_some_and(|entry| entry.first_seq <= seq) {
            return Ok(cursor.ahead.clone());
        }
        if let Some(entry) = self.caches.entry(stream_id, seq).await {
            return Ok(vec![entry]);
        }
        if let Some(entries) = self.caches.scanned(stream_id, seq).await {
            return Ok(entries);
        }
        let scan = if cursor.reads > 1 { SESSION_ENTRIES_PER_SCAN } else { ENTRIES_PER_SCAN };
        let entries = self.metadata.entries_from(stream_id, seq, scan).await?;
        self.caches.remember(stream_id, &entries).await;
        cursor.ahead = entries.clone();
        cursor.ahead_of = stream_id;
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use shale_proto::{TimestampPolicy, TimestampingMode};

    use super::*;

    /// Ten entries of 100 records and 100 KiB each, from sequence number 0.
    fn entries() -> Vec<IndexEntry> {
        entries_of(10, 100 * 1024)
    }

    /// `n` entries of 100 records and `len` bytes each, from sequence number 0.
    fn entries_of(n: u64, len: u32) -> Vec<IndexEntry> {
        (0..n)
            .map(|i| IndexEntry {
                segment_id: u128::from(i),
                offset: 0,
                len,
                first_seq: i * 100,
                record_count: 100,
                first_timestamp: 0,
                last_timestamp: 0,
                timestamp_floor: 0,
                timestamp_policy: TimestampPolicy { mode: TimestampingMode::Arrival, uncapped: false },
                arrival_cap: None,
                metered_end: None,
            })
            .collect()
    }

    /// A batch fetches together the blocks it can use and none past them: not past its
    /// record or byte limit, not past the tail, and never none.
    #[test]
    fn a_batch_fetches_only_the_blocks_its_limits_can_use() {
        let entries = entries();
        let (tail, plenty) = (1_000, u64::MAX);
        assert_eq!(entries_needed(&entries, 0, tail, 1, plenty), 1, "one record: one block");
        assert_eq!(entries_needed(&entries, 0, tail, 1_000, plenty), 10, "a whole catch-up batch: all at once");
        assert_eq!(entries_needed(&entries, 0, tail, 250, plenty), 3);
        assert_eq!(entries_needed(&entries, 50, tail, 100, plenty), 2, "the first entry counts from `seq`");
        assert_eq!(entries_needed(&entries, 0, tail, 1_000, 300 * 1024), 3, "the byte limit");
        assert_eq!(entries_needed(&entries, 0, 400, 1_000, plenty), 4, "nothing at or past the tail");
        assert_eq!(entries_needed(&entries, 0, tail, 0, plenty), 1, "at least one");
    }

    /// Blocks are fetched at once by bytes: many small ones, a few large ones, never
    /// fewer than eight, never past the tail.
    #[test]
    fn blocks_are_fetched_about_eight_mib_at_a_time() {
        let (tail, plenty) = (1_000_000, 1_000);
        assert_eq!(fetched_at_once(&entries_of(plenty, 200 * 1024), tail), 41, "8 MiB of 200 KiB blocks, and one");
        assert_eq!(fetched_at_once(&entries_of(plenty, 10 * 1024), tail), MAX_BLOCKS_AT_ONCE, "tiny blocks: a count");
        assert_eq!(fetched_at_once(&entries_of(plenty, 4 << 20), tail), BLOCKS_AT_ONCE, "large blocks: at least eight");
        assert_eq!(fetched_at_once(&entries_of(plenty, 100 * 1024), 500), 5, "nothing at or past the tail");
        assert_eq!(fetched_at_once(&[], tail), 0);
    }
}
