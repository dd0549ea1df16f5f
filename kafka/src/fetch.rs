//! Fetch: each partition read from its offset through the reader, up to the partition's
//! and the request's byte bounds, answered as uncompressed record batches v2. With
//! nothing to answer and `max_wait_ms` given, the fetch waits on the live tails of every
//! partition it asked for and answers as soon as one has records (a long poll). Fetch
//! sessions (KIP-227) are not kept: every answer has session id 0, so clients send full
//! fetches.
//!
//! A connection keeps a read cursor per partition it fetches ([`Cursors`]), so a
//! consumer's next fetch goes on from what the last one learned: index entries scanned
//! far ahead and blocks fetched ahead, as an S2 read session does. Each fetch looks its
//! partitions up once (not once per read, as a cursor per read would), so a trim, a
//! config change or a topic deleted and created again is seen by the next fetch.

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

/// One connection's read cursors, by topic and partition. Fetches on a connection run
/// one at a time: each takes its partitions' cursors and puts them back when answered.
#[derive(Default)]
pub struct Cursors {
    open: Mutex<HashMap<(String, i32), ReadCursor>>,
}

impl Cursors {
    /// The partition's cursor, set to look the stream up again on its first read (its
    /// entries ahead and read-ahead are kept while the stream is the same one).
    fn take_refreshed(&self, topic: &str, partition: i32) -> ReadCursor {
        let mut open = self.open.lock().expect("no panic while holding the cursors");
        let mut cursor = open.remove(&(topic.to_string(), partition)).unwrap_or_default();
        cursor.refresh();
        cursor
    }

    fn put_back(&self, topic: String, partition: i32, cursor: ReadCursor) {
        let mut open = self.open.lock().expect("no panic while holding the cursors");
        if open.len() >= MAX_CURSORS {
            open.clear();
        }
        open.insert((topic, partition), cursor);
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
}

pub async fn fetch(kafka: &Kafka, request: FetchRequest, cursors: &Cursors) -> FetchResponse {
    let budget = AtomicU64::new(u64::try_from(request.max_bytes).unwrap_or(0).max(1));
    let mut names: Vec<TopicName> = Vec::new();
    let mut wanted = Vec::new();
    for topic in request.topics {
        for p in topic.partitions {
            let max_bytes = u64::try_from(p.partition_max_bytes).unwrap_or(0).max(1);
            wanted.push(PartitionFetch {
                topic: names.len(),
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes,
                answer: PartitionData::default().with_partition_index(p.partition),
                bytes: 0,
                cursor: cursors.take_refreshed(&topic.topic.0, p.partition),
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
            async move { read_partition(kafka, &topic, fetch, budget, Duration::ZERO).await }
        })
        .await;
    let found: usize = wanted.iter().map(|f| f.bytes).sum();
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)).min(MAX_WAIT);
    if found == 0 && request.min_bytes > 0 && !wait.is_zero() {
        long_poll(kafka, &names, &mut wanted, &budget, wait).await;
    }
    let mut topics: Vec<FetchableTopicResponse> =
        names.into_iter().map(|name| FetchableTopicResponse::default().with_topic(name)).collect();
    for fetch in wanted {
        let topic = &mut topics[fetch.topic];
        cursors.put_back(topic.topic.0.to_string(), fetch.partition, fetch.cursor);
        topic.partitions.push(fetch.answer);
    }
    FetchResponse::default().with_responses(topics)
}

/// Waits up to `wait` for any waiting partition to get records, then answers it.
async fn long_poll(
    kafka: &Kafka,
    names: &[TopicName],
    wanted: &mut [PartitionFetch],
    budget: &AtomicU64,
    wait: Duration,
) {
    let mut waiting: FuturesUnordered<_> = wanted
        .iter_mut()
        .filter(|f| f.answer.error_code == 0)
        .map(|fetch| async move {
            let topic = names[fetch.topic].0.to_string();
            read_partition(kafka, &topic, fetch, budget, wait).await;
            fetch.bytes
        })
        .collect();
    let first = async {
        while let Some(bytes) = waiting.next().await {
            if bytes > 0 {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(wait, first).await;
}

/// Reads `fetch`'s partition into its answer, within its bound and `budget`. The
/// partition's reads run on a task of their own, a read or two ahead of this one, which
/// encodes what they found: reading (block decoding) and encoding take about as long
/// each, and so one fetch keeps two cores busy rather than one.
async fn read_partition(kafka: &Kafka, topic: &str, fetch: &mut PartitionFetch, budget: &AtomicU64, wait: Duration) {
    let Ok(start) = u64::try_from(fetch.offset) else {
        fetch.answer.error_code = kafka_protocol::ResponseError::OffsetOutOfRange.code();
        return;
    };
    let reserved = reserve(budget, fetch.max_bytes);
    let request = ReadRequest {
        basin: kafka.config.basin.clone(),
        stream: stream_of(topic, fetch.partition),
        start: ReadStart::SeqNum(start),
        limits: ReadLimits { count: None, bytes: Some(reserved.max(1)) },
        until: None,
        clamp: false,
        wait,
    };
    let (found, mut outputs) = mpsc::channel(READS_AHEAD);
    let cursor = std::mem::take(&mut fetch.cursor);
    let reads = AbortOnDropHandle::new(tokio::spawn(read_ahead(kafka.service.clone(), request, cursor, found)));
    let mut out = BytesMut::new();
    while let Some(read) = outputs.recv().await {
        let output = match read {
            Ok(output) => output,
            Err(e) => {
                if out.is_empty() {
                    fail(&mut fetch.answer, &e);
                }
                break;
            }
        };
        let tail = i64::try_from(output.tail.seq_num).unwrap_or(i64::MAX);
        fetch.answer.high_watermark = tail;
        fetch.answer.last_stable_offset = tail;
        if out.capacity() == 0 && !output.records.is_empty() {
            // Sized once for what this partition may answer, so the batches are copied
            // in once rather than again at every doubling of a growing buffer.
            let read_bytes: u64 = output.records.iter().map(|r| r.metered_bytes()).sum();
            out.reserve(encoded_bound(reserved.max(read_bytes)));
        }
        encode_batch(&output.records, &mut out);
    }
    // A read task that panicked leaves a fresh cursor, which looks the stream up again.
    fetch.cursor = reads.await.unwrap_or_default();
    let used = out.len() as u64;
    if used < reserved {
        budget.fetch_add(reserved - used, Ordering::Relaxed);
    } else {
        let over = used - reserved;
        let _ = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| Some(left.saturating_sub(over)));
    }
    fetch.bytes = out.len();
    if !out.is_empty() {
        fetch.answer.records = Some(out.freeze());
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

/// Takes up to `wanted` bytes from what is left of the request's bound.
fn reserve(budget: &AtomicU64, wanted: u64) -> u64 {
    let mut taken = 0;
    let _ = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
        taken = left.min(wanted);
        Some(left - taken)
    });
    taken
}

fn fail(answer: &mut PartitionData, error: &ServiceError) {
    answer.error_code = crate::error::code(error);
    answer.high_watermark = -1;
    answer.last_stable_offset = -1;
}
