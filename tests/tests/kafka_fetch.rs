//! Kafka fetches over a real socket. How long one waits: until its answers hold
//! `min_bytes` (Kafka's `fetch.min.bytes`) or `max_wait_ms` is over, gathering records
//! from every partition it asked for as they arrive, and not at all once a partition has
//! an error. And each partition's log start offset in the answer, a trim moving it.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use kafka_protocol::ResponseError;
use shale_tests::kafka_client::KafkaConn;
use shale_tests::TestServer;
use tokio::time::Instant;

/// Each record's value: 1 KiB, so a few records pass a `min_bytes` of a few KiB.
fn value(i: usize) -> String {
    format!("{i:04}").repeat(256)
}

async fn server_with_topic(topic: &str, partitions: i32) -> (TestServer, KafkaConn) {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic(topic, partitions).await.unwrap(), 0);
    (server, conn)
}

/// What one fetch answered: per partition asked for, its error code and its records'
/// values in offset order; the answer's record bytes in all; each partition's log start.
struct Answer {
    partitions: Vec<(i16, Vec<String>)>,
    bytes: usize,
    log_starts: Vec<i64>,
}

/// One fetch of `partitions` of `topic`, each from offset 0.
async fn fetch(conn: &mut KafkaConn, topic: &str, partitions: &[i32], min_bytes: i32, max_wait_ms: i32) -> Answer {
    fetch_from(conn, topic, partitions, 0, (4 << 20, min_bytes), max_wait_ms).await
}

/// One fetch of `partitions` of `topic`, each from `offset` up to 1 MiB, the whole
/// answer up to `max_bytes` and waiting for `min_bytes`.
async fn fetch_from(
    conn: &mut KafkaConn,
    topic: &str,
    partitions: &[i32],
    offset: i64,
    (max_bytes, min_bytes): (i32, i32),
    max_wait_ms: i32,
) -> Answer {
    let wanted = partitions
        .iter()
        .map(|&p| {
            FetchPartition::default().with_partition(p).with_fetch_offset(offset).with_partition_max_bytes(1 << 20)
        })
        .collect();
    let topic =
        FetchTopic::default().with_topic(TopicName(StrBytes::from_string(topic.into()))).with_partitions(wanted);
    let request = FetchRequest::default()
        .with_max_bytes(max_bytes)
        .with_min_bytes(min_bytes)
        .with_max_wait_ms(max_wait_ms)
        .with_topics(vec![topic]);
    let response: FetchResponse = conn.call(ApiKey::Fetch, 12, &request).await.unwrap();
    let mut answer = Answer { partitions: Vec::new(), bytes: 0, log_starts: Vec::new() };
    for partition in &response.responses[0].partitions {
        answer.log_starts.push(partition.log_start_offset);
        let mut values = Vec::new();
        if let Some(mut records) = partition.records.clone() {
            answer.bytes += records.len();
            for set in RecordBatchDecoder::decode_all(&mut records).unwrap() {
                values.extend(set.records.into_iter().map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap()));
            }
        }
        answer.partitions.push((partition.error_code, values));
    }
    answer
}

/// A fetch whose `min_bytes` the partition does not hold waits its whole `max_wait_ms`,
/// then answers what there is; with `min_bytes` met it answers at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_below_its_min_bytes_waits_its_max_wait_then_answers_what_there_is() {
    let (server, mut conn) = server_with_topic("short", 1).await;
    assert_eq!(conn.produce("short", 0, &[value(0)]).await.unwrap(), (0, 0));

    let started = Instant::now();
    let answer = fetch(&mut conn, "short", &[0], 64 << 10, 700).await;
    let waited = started.elapsed();
    assert_eq!(answer.partitions, vec![(0, vec![value(0)])]);
    assert!(waited >= Duration::from_millis(700), "answered after {waited:?}, before its max_wait");

    // The same fetch asking no more than the partition holds is answered without the wait.
    let answer = fetch(&mut conn, "short", &[0], 1024, 60_000).await;
    assert_eq!(answer.partitions, vec![(0, vec![value(0)])]);
    server.stop().await;
}

/// A fetch waiting for `min_bytes` gathers records from every partition it asked for as
/// they are produced, one at a time on another connection, and answers once they reach
/// it: every record in one answer, not the first alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_fetch_gathers_records_across_partitions_until_min_bytes() {
    let (server, mut conn) = server_with_topic("gather", 2).await;
    let mut producer = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    let min_bytes = 3 * 1024;
    let waiting = tokio::spawn(async move { fetch(&mut conn, "gather", &[0, 1], min_bytes, 60_000).await });
    for (i, partition) in [(0, 0), (1, 1), (2, 0)] {
        let (error, _) = producer.produce("gather", partition, &[value(i)]).await.unwrap();
        assert_eq!(error, 0);
    }
    let answer = tokio::time::timeout(Duration::from_secs(30), waiting).await.expect("answered once it had 3 KiB");
    let answer = answer.unwrap();
    assert!(answer.bytes >= min_bytes as usize, "{} bytes answered", answer.bytes);
    assert_eq!(answer.partitions, vec![(0, vec![value(0), value(2)]), (0, vec![value(1)])]);
    server.stop().await;
}

/// A fetch long-polling more partitions than its bound holds at their own bounds (24 of
/// 1 MiB under 16 MiB, as 51 under a consumer's default 50 MiB) answers the last one's
/// records in full when they arrive, not one record of them: each waiting partition holds
/// an equal share of the bound while it waits, not the first ones all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_over_many_partitions_answers_a_late_partitions_records_in_full() {
    let (server, mut conn) = server_with_topic("wide", 24).await;
    let mut producer = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    let partitions: Vec<i32> = (0..24).collect();
    // Four records in two produces, so the fetch wakes with one and must wait on for
    // the rest: 4 KiB is only met by all four.
    let bounds = (16 << 20, 4 * 1024);
    let waiting = tokio::spawn(async move { fetch_from(&mut conn, "wide", &partitions, 0, bounds, 20_000).await });
    assert_eq!(producer.produce("wide", 23, &[value(0)]).await.unwrap(), (0, 0));
    let rest: Vec<String> = (1..4).map(value).collect();
    assert_eq!(producer.produce("wide", 23, &rest).await.unwrap(), (0, 1));

    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(30), waiting).await.unwrap().unwrap();
    assert_eq!(answer.partitions[23], (0, (0..4).map(value).collect::<Vec<_>>()));
    assert!(started.elapsed() < Duration::from_secs(15), "waited out its max_wait: {:?}", started.elapsed());
    server.stop().await;
}

/// A partition's error is answered at once, without waiting for the others' records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_with_a_failed_partition_answers_at_once() {
    let (server, mut conn) = server_with_topic("lonely", 1).await;
    let started = Instant::now();
    let answer = fetch(&mut conn, "lonely", &[0, 7], 1, 20_000).await;
    let waited = started.elapsed();
    assert_eq!(answer.partitions, vec![(0, vec![]), (ResponseError::UnknownTopicOrPartition.code(), vec![])]);
    assert!(waited < Duration::from_secs(10), "answered after {waited:?}: waited for records");
    server.stop().await;
}

/// Each partition's answer carries its log start offset: 0 until a trim (DeleteRecords)
/// moves it, then the trim point, as Kafka answers (clients read it for lag and cached
/// watermarks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_answers_each_partitions_log_start_offset() {
    let (server, mut conn) = server_with_topic("starts", 2).await;
    let values: Vec<String> = (0..10).map(value).collect();
    for partition in [0, 1] {
        assert_eq!(conn.produce("starts", partition, &values).await.unwrap(), (0, 0));
    }
    assert_eq!(fetch(&mut conn, "starts", &[0, 1], 1, 0).await.log_starts, vec![0, 0]);

    assert_eq!(conn.delete_records("starts", 1, 4).await.unwrap(), 0);

    let answer = fetch_from(&mut conn, "starts", &[0, 1], 5, (4 << 20, 1), 0).await;
    assert_eq!(answer.log_starts, vec![0, 4]);
    assert_eq!(answer.partitions[1], (0, values[5..].to_vec()));
    server.stop().await;
}

/// A record larger than a fetch's bounds (Kafka takes up to `max.message.bytes`, 8 MiB
/// here, where consumers fetch 1 MiB a partition) is answered alone, as Kafka answers
/// the first batch whatever the bounds, so a consumer moves past it; the records after
/// it come with the next fetch. ListOffsets finds it as the earliest record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_larger_than_the_fetch_bounds_is_answered_alone() {
    let (server, mut conn) = server_with_topic("large", 1).await;
    let large = "L".repeat(3 << 20);
    assert_eq!(conn.produce("large", 0, std::slice::from_ref(&large)).await.unwrap(), (0, 0));
    let small: Vec<String> = (0..2).map(value).collect();
    assert_eq!(conn.produce("large", 0, &small).await.unwrap(), (0, 1));

    let first = fetch_from(&mut conn, "large", &[0], 0, (1 << 20, 1), 0).await;
    assert_eq!(first.partitions, vec![(0, vec![large])], "the large record alone");
    let next = fetch_from(&mut conn, "large", &[0], 1, (1 << 20, 1), 0).await;
    assert_eq!(next.partitions, vec![(0, small)]);
    assert_eq!(conn.list_offsets("large", 0, -2, 5).await.unwrap(), (0, 0), "earliest is the large record");
    server.stop().await;
}
