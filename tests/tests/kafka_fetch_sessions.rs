//! Incremental fetch sessions (KIP-227) over a real socket: a full fetch at epoch 0
//! opens a session; later fetches name only partitions whose offsets moved (or are
//! forgotten) and are answered with only partitions that have something new, while the
//! fetch covers them all (a long poll wakes for a partition the fetch did not name); a
//! wrong epoch, an unknown session and a closed one are refused as Kafka refuses them.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use kafka_protocol::ResponseError;
use shale_tests::kafka_client::KafkaConn;
use shale_tests::TestServer;

const TOPIC: &str = "sessions";

fn name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

/// One session fetch's answer: its error code, session id, and each partition answered
/// with its error code, high watermark and record values.
#[derive(Debug, PartialEq)]
struct Answer {
    error: i16,
    session: i32,
    partitions: Vec<(i32, i16, i64, Vec<String>)>,
}

/// A fetch in session `(session, epoch)` naming `asked` (partition, fetch offset) and
/// forgetting `forgotten`, waiting up to `max_wait_ms` for a byte.
async fn fetch(
    conn: &mut KafkaConn,
    (session, epoch): (i32, i32),
    asked: &[(i32, i64)],
    forgotten: &[i32],
    max_wait_ms: i32,
) -> Answer {
    let partitions = asked
        .iter()
        .map(|&(p, offset)| {
            FetchPartition::default().with_partition(p).with_fetch_offset(offset).with_partition_max_bytes(1 << 20)
        })
        .collect();
    let topics = if asked.is_empty() {
        vec![]
    } else {
        vec![FetchTopic::default().with_topic(name()).with_partitions(partitions)]
    };
    let forgotten = if forgotten.is_empty() {
        vec![]
    } else {
        vec![ForgottenTopic::default().with_topic(name()).with_partitions(forgotten.to_vec())]
    };
    let request = FetchRequest::default()
        .with_max_bytes(4 << 20)
        .with_min_bytes(1)
        .with_max_wait_ms(max_wait_ms)
        .with_session_id(session)
        .with_session_epoch(epoch)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten);
    let response: FetchResponse = conn.call(ApiKey::Fetch, 12, &request).await.unwrap();
    let mut answer = Answer { error: response.error_code, session: response.session_id, partitions: Vec::new() };
    for topic in &response.responses {
        for p in &topic.partitions {
            let mut values = Vec::new();
            if let Some(mut records) = p.records.clone() {
                for set in RecordBatchDecoder::decode_all(&mut records).unwrap() {
                    values
                        .extend(set.records.into_iter().map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap()));
                }
            }
            answer.partitions.push((p.partition_index, p.error_code, p.high_watermark, values));
        }
    }
    answer.partitions.sort();
    answer
}

fn values(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_fetch_answers_only_what_changed() {
    let server = TestServer::start_with_kafka().await;
    let kafka = server.kafka.clone().unwrap();
    let mut conn = KafkaConn::connect(&kafka, Duration::from_secs(60)).await.unwrap();
    let mut producer = KafkaConn::connect(&kafka, Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic(TOPIC, 3).await.unwrap(), 0);
    assert_eq!(producer.produce(TOPIC, 0, &values(&["a", "b"])).await.unwrap(), (0, 0));

    // A full fetch at epoch 0 opens a session and answers every partition.
    let opened = fetch(&mut conn, (0, 0), &[(0, 0), (1, 0), (2, 0)], &[], 0).await;
    let session = opened.session;
    assert!(session > 0, "{opened:?}");
    assert_eq!(opened.partitions, vec![(0, 0, 2, values(&["a", "b"])), (1, 0, 0, vec![]), (2, 0, 0, vec![])]);

    // Partition 0 moved on; nothing new anywhere: nothing answered.
    let quiet = fetch(&mut conn, (session, 1), &[(0, 2)], &[], 0).await;
    assert_eq!(quiet, Answer { error: 0, session, partitions: vec![] });

    // A record in partition 1, which this fetch does not name: its long poll wakes for it.
    let produced = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        producer.produce(TOPIC, 1, &values(&["c"])).await.unwrap()
    });
    let woken = fetch(&mut conn, (session, 2), &[], &[], 10_000).await;
    assert_eq!(produced.await.unwrap(), (0, 0));
    assert_eq!(woken, Answer { error: 0, session, partitions: vec![(1, 0, 1, values(&["c"]))] });

    // Partition 1 moved on and partition 2 is forgotten: nothing new.
    assert_eq!(fetch(&mut conn, (session, 3), &[(1, 1)], &[2], 0).await.partitions, vec![]);

    // Refusals: the same epoch again, an unknown session.
    let again = fetch(&mut conn, (session, 3), &[], &[], 0).await;
    assert_eq!((again.error, again.session), (ResponseError::InvalidFetchSessionEpoch.code(), 0));
    let unknown = fetch(&mut conn, (session + 7, 4), &[], &[], 0).await;
    assert_eq!((unknown.error, unknown.session), (ResponseError::FetchSessionIdNotFound.code(), 0));
    // The refused fetches left the session as it was.
    assert_eq!(fetch(&mut conn, (session, 4), &[], &[], 0).await, Answer { error: 0, session, partitions: vec![] });

    // Epoch -1 closes it and is answered in full without a session; then it is unknown.
    let closed = fetch(&mut conn, (session, -1), &[(0, 0)], &[], 0).await;
    assert_eq!(closed, Answer { error: 0, session: 0, partitions: vec![(0, 0, 2, values(&["a", "b"]))] });
    let after = fetch(&mut conn, (session, 5), &[], &[], 0).await;
    assert_eq!(after.error, ResponseError::FetchSessionIdNotFound.code());

    // Another connection holds no session of this one's.
    let mut other = KafkaConn::connect(&kafka, Duration::from_secs(60)).await.unwrap();
    let reopened = fetch(&mut conn, (0, 0), &[(0, 2)], &[], 0).await;
    let elsewhere = fetch(&mut other, (reopened.session, 1), &[], &[], 0).await;
    assert_eq!(elsewhere.error, ResponseError::FetchSessionIdNotFound.code());
    server.stop().await;
}
