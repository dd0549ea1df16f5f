//! Fetch: each partition read from its offset through the reader, up to the partition's
//! and the request's byte bounds, answered as uncompressed record batches v2. With
//! fewer than `min_bytes` to answer and `max_wait_ms` given, the fetch waits on the live
//! tails of every partition it asked for and reads on as records arrive, until its
//! answers hold `min_bytes` or the wait is over (a long poll); a partition's error is
//! answered at once. Incremental fetch sessions (KIP-227) are `fetch_session`'s: it
//! hands this module full fetches.
//!
//! A connection keeps a read cursor per partition it fetches ([`Cursors`]), so a
//! consumer's next fetch goes on from what the last one learned: index entries scanned
//! far ahead and blocks fetched ahead, as an S2 read session does. Each fetch looks its
//! partitions up once (not once per read, as a cursor per read would), so a trim, a
//! config change or a topic deleted and created again is seen by the next fetch.
//!
//! A consumer behind the tail gets its next answer read ahead: once a fetch is answered,
//! each partition that answered records and is not at its tail starts reading what
//! follows, within the bytes its answer just used, while the client takes in the answer
//! (a client keeps one fetch in flight per broker, so otherwise the server waits for the
//! client and the client for the server). The next fetch from that offset is answered
//! from it, cut at a batch to that fetch's bound, if the partition, looked up again then,
//! is the same stream with the offset not below its trim point (as a fetch reading then
//! would find); anything else drops it and reads. At most [`MAX_AHEAD_BYTES`] per
//! connection and `fetch_budget::MAX_AHEAD_BYTES_ALL` per listener are read ahead at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use bytes::BytesMut;
use futures::stream::{FuturesUnordered, StreamExt};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use shale_reader::{ReadCursor, ReadLimits, ReadOutput, ReadRequest, ReadStart};
use shale_service::{Service, ServiceError};
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use crate::fetch_budget::{reserve, settle, AheadGrant, Reservation};
use crate::records::encode_batch;
use crate::topics::stream_of;
use crate::Kafka;

/// Reads one partition may take per fetch: past this the client fetches again.
const MAX_READS_PER_PARTITION: usize = 16;
/// The longest long poll served (a client asking more waits this long).
const MAX_WAIT: Duration = Duration::from_secs(30);
/// Partitions of one fetch read at once.
const CONCURRENT_PARTITIONS: usize = 16;
/// Reads a partition's read task may be ahead of its encoding.
const READS_AHEAD: usize = 2;

/// Partitions one connection keeps a cursor for; past it they are all dropped and
/// looked up again as fetched (a consumer rarely fetches this many from one broker).
const MAX_CURSORS: usize = 4096;

/// Partition bytes one connection reads ahead at once, summed over its partitions.
const MAX_AHEAD_BYTES: u64 = 64 << 20;
/// One connection's read cursors, by topic and partition. Fetches on a connection run
/// one at a time: each takes its partitions' cursors and puts them back when answered.
#[derive(Default)]
pub struct Cursors {
    open: Mutex<HashMap<(String, i32), Slot>>,
}

/// What a connection keeps of a partition between fetches.
enum Slot {
    Idle(Box<ReadCursor>),
    Ahead(Ahead),
}

/// A partition's next answer, being read (or read) from `offset` within `bound`.
struct Ahead {
    offset: i64,
    bound: u64,
    read: AbortOnDropHandle<PartitionFetch>,
    _grant: AheadGrant,
}

impl Cursors {
    /// The partition's answer read ahead from `offset`, or its cursor set to look the
    /// stream up again on its first read (its entries ahead and read-ahead are kept
    /// while the stream is the same one).
    fn take(&self, topic: &str, partition: i32, offset: i64) -> (ReadCursor, Option<Ahead>) {
        let mut open = self.open.lock().expect("no panic while holding the cursors");
        match open.remove(&(topic.to_string(), partition)) {
            Some(Slot::Ahead(ahead)) if ahead.offset == offset => (ReadCursor::default(), Some(ahead)),
            Some(Slot::Idle(mut cursor)) => {
                cursor.refresh();
                (*cursor, None)
            }
            _ => (ReadCursor::default(), None),
        }
    }

    fn put_back(&self, topic: String, partition: i32, slot: Slot) {
        let mut open = self.open.lock().expect("no panic while holding the cursors");
        if open.len() >= MAX_CURSORS {
            open.clear();
        }
        open.insert((topic, partition), slot);
    }

    /// Partition bytes being read ahead now.
    fn ahead_bytes(&self) -> u64 {
        let open = self.open.lock().expect("no panic while holding the cursors");
        open.values().map(|slot| if let Slot::Ahead(ahead) = slot { ahead.bound } else { 0 }).sum()
    }
}

/// One partition of a fetch: what was asked and what was found.
struct PartitionFetch {
    topic: usize,
    partition: i32,
    offset: i64,
    max_bytes: u64,
    answer: PartitionData,
    bytes: usize,
    cursor: ReadCursor,
    /// The offset after the last record answered.
    next: Option<i64>,
    /// Where each batch of the answer ends, and the offset after it.
    batches: Vec<(usize, i64)>,
    /// The part of the request's byte bound the partition read within.
    reserved: u64,
    /// The partition's answer read ahead from `offset`, if any.
    ahead: Option<Ahead>,
}

impl PartitionFetch {
    /// Bytes the partition's answer may still take under its own bound.
    fn room(&self) -> u64 {
        self.max_bytes.saturating_sub(self.bytes as u64)
    }
}

pub async fn fetch(kafka: &Kafka, request: FetchRequest, cursors: &Cursors) -> FetchResponse {
    let budget = AtomicU64::new(u64::try_from(request.max_bytes).unwrap_or(0).max(1));
    let mut names: Vec<TopicName> = Vec::new();
    let mut wanted = Vec::new();
    for topic in request.topics {
        for p in topic.partitions {
            let max_bytes = u64::try_from(p.partition_max_bytes).unwrap_or(0).max(1);
            let (cursor, ahead) = cursors.take(&topic.topic.0, p.partition, p.fetch_offset);
            wanted.push(PartitionFetch {
                topic: names.len(),
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes,
                answer: PartitionData::default().with_partition_index(p.partition),
                bytes: 0,
                cursor,
                next: None,
                batches: Vec::new(),
                reserved: 0,
                ahead,
            });
        }
        names.push(topic.topic);
    }
    // The request's byte bound is shared: each partition reserves its part of what is
    // left before it reads and gives back what it did not use, so the partitions read at
    // once never add up past the bound (a client refuses an answer past its
    // `receive.message.max.bytes`). A partition that finds nothing left still reads one
    // record, as Kafka answers at least one batch.
    futures::stream::iter(wanted.iter_mut())
        .for_each_concurrent(CONCURRENT_PARTITIONS, |fetch| {
            let topic = names[fetch.topic].0.to_string();
            let budget = &budget;
            async move {
                if !answer_from_ahead(kafka, &topic, fetch, budget).await {
                    read_partition(kafka, &topic, fetch, budget, u64::MAX, Duration::ZERO).await
                }
            }
        })
        .await;
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)).min(MAX_WAIT);
    if let Ok(min_bytes @ 1..) = usize::try_from(request.min_bytes) {
        if !wait.is_zero() {
            wait_for_min_bytes(kafka, &names, &mut wanted, &budget, min_bytes, wait).await;
        }
    }
    let mut topics: Vec<FetchableTopicResponse> =
        names.into_iter().map(|name| FetchableTopicResponse::default().with_topic(name)).collect();
    for mut fetch in wanted {
        let topic = &mut topics[fetch.topic];
        let mut answer = std::mem::take(&mut fetch.answer);
        if answer.error_code != 0 {
            answer.log_start_offset = -1;
        }
        let grant = fetch
            .next
            .filter(|&next| reads_on(&fetch, &answer, next, cursors))
            .and_then(|next| kafka.read_ahead.grant(fetch.reserved.max(1)).map(|grant| (next, grant)));
        let slot = match grant {
            Some((next, grant)) => Slot::Ahead(read_ahead_from(kafka, &topic.topic.0, fetch, next, grant)),
            None => Slot::Idle(Box::new(fetch.cursor)),
        };
        cursors.put_back(topic.topic.0.to_string(), answer.partition_index, slot);
        topic.partitions.push(answer);
    }
    FetchResponse::default().with_responses(topics)
}

/// Answers `fetch` from what was read ahead for it, when the partition, looked up again,
/// is the stream it was read from with the offset at or above its trim point: as many
/// of its batches as the partition's share of the request's bound takes (the first one
/// past it only if it was read within no more than that share, as a read would pass
/// it). Otherwise its cursor (if any) goes on to a read, and false.
async fn answer_from_ahead(kafka: &Kafka, topic: &str, fetch: &mut PartitionFetch, budget: &AtomicU64) -> bool {
    let Some(ahead) = fetch.ahead.take() else { return false };
    let Ok(mut done) = ahead.read.await else { return false };
    let read_from = done.cursor.stream().map(|info| info.record.id);
    let offset = u64::try_from(fetch.offset).unwrap_or(0);
    let request = read_request(kafka, topic, fetch.partition, offset, (1, false), Duration::ZERO);
    let looked_up = kafka.service.look_up_for_read(&request, &mut done.cursor).await.is_ok();
    fetch.cursor = std::mem::take(&mut done.cursor);
    let Some(now) = fetch.cursor.stream().filter(|_| looked_up) else { return false };
    let current =
        Some(now.record.id) == read_from && u64::try_from(fetch.offset).is_ok_and(|o| o >= now.record.trim_point);
    let tail = i64::try_from(now.record.tail().seq_num).unwrap_or(i64::MAX);
    let (Some(records), Some(&first)) = (done.answer.records.take(), done.batches.first()) else { return false };
    if !current || done.answer.error_code != 0 {
        return false;
    }
    let reserved = reserve(budget, fetch.max_bytes);
    let fits = done.batches.iter().take_while(|(end, _)| *end as u64 <= reserved).last().copied();
    let Some((end, next)) = fits.or(Some(first).filter(|_| reserved >= done.reserved)) else {
        // Not even the first batch fits what this fetch may take (a smaller bound than
        // the last fetch's): a read takes what does.
        settle(budget, reserved, 0);
        return false;
    };
    settle(budget, reserved, end as u64);
    fetch.answer = done.answer;
    note_log_start(fetch);
    fetch.answer.records = Some(records.slice(..end));
    fetch.answer.high_watermark = fetch.answer.high_watermark.max(tail);
    fetch.answer.last_stable_offset = fetch.answer.high_watermark;
    fetch.bytes = end;
    fetch.reserved = reserved;
    fetch.next = Some(next);
    true
}

/// Whether `fetch`'s partition is read ahead from `next` after its `answer`: it
/// answered records, the partition has more, and the connection reads ahead less than
/// [`MAX_AHEAD_BYTES`] with it.
fn reads_on(fetch: &PartitionFetch, answer: &PartitionData, next: i64, cursors: &Cursors) -> bool {
    answer.error_code == 0
        && fetch.bytes > 0
        && next < answer.high_watermark
        && cursors.ahead_bytes() + fetch.reserved <= MAX_AHEAD_BYTES
}

/// Reads `fetch`'s partition on from `next`, within the bound it just read within, on a
/// task of its own (the stream as this fetch found it: the answer's use looks it up
/// again).
fn read_ahead_from(kafka: &Kafka, topic: &str, fetch: PartitionFetch, next: i64, grant: AheadGrant) -> Ahead {
    let (kafka, topic) = (kafka.clone(), topic.to_string());
    let bound = fetch.reserved.max(1);
    let cursor = fetch.cursor;
    let mut ahead = PartitionFetch {
        topic: fetch.topic,
        partition: fetch.partition,
        offset: next,
        max_bytes: bound,
        answer: PartitionData::default().with_partition_index(fetch.partition),
        bytes: 0,
        cursor,
        next: None,
        batches: Vec::new(),
        reserved: 0,
        ahead: None,
    };
    let read = tokio::spawn(async move {
        let budget = AtomicU64::new(bound);
        read_partition(&kafka, &topic, &mut ahead, &budget, u64::MAX, Duration::ZERO).await;
        ahead
    });
    Ahead { offset: next, bound, read: AbortOnDropHandle::new(read), _grant: grant }
}

/// Waits up to `wait` until the partitions' answers hold `min_bytes` in all (Kafka's
/// `fetch.min.bytes`): every partition waits on its live tail at once, and one that gets
/// records waits again from where its answer now ends while the others go on waiting.
/// Answers at once when a partition fails, and stops early when no partition has room
/// left under its bound or the request's (a partition that had records and finds the
/// request's bound spent stops waiting). The reads still waiting at the end are
/// dropped: nothing of a dropped read is in its answer, its reservation is given back.
///
/// Each waiting read holds at most an equal share of what is left of the request's
/// bound (and its partition's own bound): the reservation is taken before the wait, so
/// a consumer long-polling more partitions than the bound holds at their own bounds
/// (51 partitions of 1 MiB under 50 MiB) would otherwise leave the later ones nothing
/// but a record each when they wake.
async fn wait_for_min_bytes(
    kafka: &Kafka,
    names: &[TopicName],
    wanted: &mut [PartitionFetch],
    budget: &AtomicU64,
    min_bytes: usize,
    wait: Duration,
) {
    let mut found: usize = wanted.iter().map(|f| f.bytes).sum();
    // A partition's error is answered at once, as Kafka answers it.
    if found >= min_bytes || wanted.iter().any(|f| f.answer.error_code != 0) {
        return;
    }
    let deadline = tokio::time::Instant::now() + wait;
    let waiters = wanted.iter().filter(|f| f.room() > 0).count() as u64;
    let share = (budget.load(Ordering::Relaxed) / waiters.max(1)).max(1);
    let read_on = |fetch| read_on_until(kafka, names, fetch, budget, share, deadline);
    let mut waiting: FuturesUnordered<_> = wanted.iter_mut().filter(|f| f.room() > 0).map(read_on).collect();
    let gathered = async {
        while let Some((added, fetch)) = waiting.next().await {
            found += added;
            if fetch.answer.error_code != 0 || found >= min_bytes {
                return;
            }
            if added > 0 && fetch.room() > 0 {
                waiting.push(read_on(fetch));
            }
        }
    };
    let _ = tokio::time::timeout_at(deadline, gathered).await;
}

/// [`read_partition`] from where `fetch`'s answer ends, within `share` of `budget`,
/// waiting for records until `deadline`: the bytes it added, and the partition back for
/// its next wait.
async fn read_on_until<'a>(
    kafka: &Kafka,
    names: &[TopicName],
    fetch: &'a mut PartitionFetch,
    budget: &AtomicU64,
    share: u64,
    deadline: tokio::time::Instant,
) -> (usize, &'a mut PartitionFetch) {
    let before = fetch.bytes;
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    read_partition(kafka, &names[fetch.topic].0, fetch, budget, share, left).await;
    (fetch.bytes - before, fetch)
}

/// Reads `fetch`'s partition on from where its answer ends (its offset, if it has
/// none yet), adding batches to the answer within its bound and at most `share` of
/// `budget`. The
/// partition's reads run on a task of their own, a read or two ahead of this one, which
/// encodes what they found: reading (block decoding) and encoding take about as long
/// each, and so one fetch keeps two cores busy rather than one. `fetch` changes only
/// once the reads are done, so a read dropped half way (a long poll another partition
/// answered) leaves its answer as it was, but for a fresh cursor.
async fn read_partition(
    kafka: &Kafka,
    topic: &str,
    fetch: &mut PartitionFetch,
    budget: &AtomicU64,
    share: u64,
    wait: Duration,
) {
    let Ok(start) = u64::try_from(fetch.next.unwrap_or(fetch.offset)) else {
        fetch.answer.error_code = kafka_protocol::ResponseError::OffsetOutOfRange.code();
        return;
    };
    let reserved = Reservation::take(budget, fetch.room().min(share));
    if fetch.bytes > 0 && reserved.bytes == 0 {
        // Only a partition with nothing to answer yet reads a record past the bounds.
        return;
    }
    // Its first record whatever the bounds while it has nothing to answer: Kafka answers
    // a batch larger than the bounds rather than none, so a consumer moves past it.
    let request = read_request(kafka, topic, fetch.partition, start, (reserved.bytes, fetch.bytes == 0), wait);
    let (found, mut outputs) = mpsc::channel(READS_AHEAD);
    let cursor = std::mem::take(&mut fetch.cursor);
    let reads = AbortOnDropHandle::new(tokio::spawn(read_ahead(kafka.service.clone(), request, cursor, found)));
    let earlier = fetch.answer.records.clone().unwrap_or_default();
    let (mut out, mut batches, mut tail, mut failed) = (BytesMut::new(), Vec::new(), None, None);
    while let Some(read) = outputs.recv().await {
        let output = match read {
            Ok(output) => output,
            Err(e) => {
                failed = Some(e);
                break;
            }
        };
        tail = Some(i64::try_from(output.tail.seq_num).unwrap_or(i64::MAX));
        if out.capacity() == 0 && !output.records.is_empty() {
            // Sized once for what this partition may answer, so the batches are copied
            // in once rather than again at every doubling of a growing buffer; an
            // earlier answer (a long poll for `min_bytes`) is at most that.
            let read_bytes: u64 = output.records.iter().map(|r| r.metered_bytes()).sum();
            out.reserve(earlier.len() + encoded_bound(reserved.bytes.max(read_bytes)));
            out.extend_from_slice(&earlier);
        }
        let before = out.len();
        encode_batch(&output.records, &mut out);
        if let Some(last) = output.records.last().filter(|_| out.len() > before) {
            batches.push((out.len(), i64::try_from(last.seq_num + 1).unwrap_or(i64::MAX)));
        }
    }
    // A read task that panicked leaves a fresh cursor, which looks the stream up again.
    fetch.cursor = reads.await.unwrap_or_default();
    note_log_start(fetch);
    let added = out.len().saturating_sub(earlier.len());
    // The part of the bound this partition's answer was read within, all its reads
    // together: what it held before this read and what this read might add.
    fetch.reserved = fetch.reserved.max(earlier.len() as u64 + reserved.bytes);
    reserved.settle(added as u64);
    if let Some(tail) = tail {
        fetch.answer.high_watermark = tail;
        fetch.answer.last_stable_offset = tail;
    }
    if let Some(e) = failed.filter(|_| fetch.bytes == 0 && added == 0) {
        fail(&mut fetch.answer, &e);
    }
    if added > 0 {
        fetch.next = batches.last().map(|&(_, next)| next);
        fetch.batches.extend(batches);
        fetch.bytes = out.len();
        fetch.answer.records = Some(out.freeze());
    }
}

/// A read of `topic`'s `partition` from `start`, up to `bytes`, its first record past
/// them when `at_least_one`.
fn read_request(
    kafka: &Kafka,
    topic: &str,
    partition: i32,
    start: u64,
    (bytes, at_least_one): (u64, bool),
    wait: Duration,
) -> ReadRequest {
    ReadRequest {
        basin: kafka.config.basin.clone(),
        stream: stream_of(topic, partition),
        start: ReadStart::SeqNum(start),
        limits: ReadLimits { count: None, bytes: Some(bytes.max(1)), at_least_one },
        until: None,
        clamp: false,
        wait,
    }
}

/// A partition's reads for one fetch, from `request.start` until its byte bound is read,
/// the tail is reached or [`MAX_READS_PER_PARTITION`] reads are made; each read's output
/// is sent as it comes (the first may wait `request.wait` for records). The cursor comes
/// back for the connection's next fetch; after an error it is a fresh one.
async fn read_ahead(
    service: Service,
    mut request: ReadRequest,
    mut cursor: ReadCursor,
    found: mpsc::Sender<Result<ReadOutput, ServiceError>>,
) -> ReadCursor {
    let mut left = request.limits.bytes.unwrap_or(1);
    for _ in 0..MAX_READS_PER_PARTITION {
        let output = match service.read_with(&request, &mut cursor).await {
            Ok(output) => output,
            Err(e) => {
                let _ = found.send(Err(e)).await;
                return ReadCursor::default();
            }
        };
        let Some(last) = output.records.last() else {
            let _ = found.send(Ok(output)).await;
            break;
        };
        let next = last.seq_num + 1;
        let read_bytes: u64 = output.records.iter().map(|r| r.metered_bytes()).sum();
        let at_tail = next >= output.tail.seq_num;
        if found.send(Ok(output)).await.is_err() {
            break;
        }
        left = left.saturating_sub(read_bytes);
        if left == 0 || at_tail {
            break;
        }
        request.start = ReadStart::SeqNum(next);
        request.limits.bytes = Some(left);
        // Only the first read may pass the bound.
        request.limits.at_least_one = false;
        request.wait = Duration::ZERO;
    }
    cursor
}

/// Room for batches of up to `metered` bytes of records: a record batch's header, and
/// per record a few bytes of varints beyond what metering counts (usually less: the key
/// header's name is not sent), for records of a few hundred bytes or more.
fn encoded_bound(metered: u64) -> usize {
    let metered = usize::try_from(metered).unwrap_or(usize::MAX).min(64 << 20);
    metered + metered / 16 + 4096
}

/// The partition's trim point as its cursor last looked it up, as Kafka's log start in
/// its answer: set when a read completes, so a wait dropped half way (its cursor fresh)
/// leaves the one the fetch found.
fn note_log_start(fetch: &mut PartitionFetch) {
    if let Some(stream) = fetch.cursor.stream() {
        fetch.answer.log_start_offset = i64::try_from(stream.record.trim_point).unwrap_or(i64::MAX);
    }
}

fn fail(answer: &mut PartitionData, error: &ServiceError) {
    answer.error_code = crate::error::code(error);
    answer.high_watermark = -1;
    answer.last_stable_offset = -1;
}
