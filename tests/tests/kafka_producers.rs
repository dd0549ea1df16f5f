//! DescribeProducers over a real socket, as `kafka-transactions.sh describe-producers`
//! sends it: an idempotent producer listed on the partition it wrote to, once, at its
//! latest epoch, with its latest batch's last sequence and timestamp; a transactional
//! producer the same way, before and after its commit, never with a transaction start
//! offset; unknown partitions and topics refused.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_producers_response::PartitionResponse;
use kafka_protocol::messages::{ApiKey, DescribeProducersRequest, DescribeProducersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_tests::kafka_client::{KafkaConn, TxnProducer};
use shale_tests::TestServer;

/// The record timestamp the test client's batches carry.
const CREATE_TIME: i64 = 1_700_000_000_000;

fn values(from: usize, count: usize) -> Vec<String> {
    (from..from + count).map(|i| format!("value-{i}")).collect()
}

/// DescribeProducers for `asked` (topic, partitions), answered per partition in order.
async fn describe(conn: &mut KafkaConn, asked: &[(&str, &[i32])]) -> Vec<PartitionResponse> {
    let topics = asked
        .iter()
        .map(|(topic, partitions)| {
            TopicRequest::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partition_indexes(partitions.to_vec())
        })
        .collect();
    let request = DescribeProducersRequest::default().with_topics(topics);
    let response: DescribeProducersResponse = conn.call(ApiKey::DescribeProducers, 0, &request).await.unwrap();
    response.topics.into_iter().flat_map(|t| t.partitions).collect()
}

/// Each active producer of a partition as (id, epoch, last sequence, last timestamp),
/// after checking the fields Shale always answers the same way.
fn listed(partition: &PartitionResponse) -> Vec<(i64, i32, i32, i64)> {
    assert_eq!(partition.error_code, 0, "{:?}", partition.error_message);
    let producers = &partition.active_producers;
    assert!(producers.iter().all(|p| p.coordinator_epoch == -1 && p.current_txn_start_offset == -1));
    producers.iter().map(|p| (p.producer_id.0, p.producer_epoch, p.last_sequence, p.last_timestamp)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_producers_lists_each_producer_once_at_its_latest_epoch() {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("described", 2).await.unwrap(), 0);
    assert!(listed(&describe(&mut conn, &[("described", &[0])]).await[0]).is_empty(), "no producer yet");

    // An idempotent producer: two batches of 3 and 2 records, sequences 0 and 3.
    let (error, id, epoch) = conn.init_idempotent(None).await.unwrap();
    assert_eq!((error, epoch), (0, 0));
    let mut idempotent = TxnProducer { id, epoch, sequence: 0 };
    assert_eq!(conn.produce_idempotent(idempotent, "described", 0, &values(0, 3)).await.unwrap(), (0, 0));
    idempotent.sequence = 3;
    assert_eq!(conn.produce_idempotent(idempotent, "described", 0, &values(3, 2)).await.unwrap(), (0, 3));

    // A transactional producer with an open transaction on partition 1.
    let (error, txn_id, txn_epoch) = conn.init_transactional("described-txn").await.unwrap();
    assert_eq!(error, 0);
    let transactional = TxnProducer { id: txn_id, epoch: txn_epoch, sequence: 0 };
    assert_eq!(conn.add_partitions("described-txn", transactional, "described", &[1]).await.unwrap(), 0);
    let (error, _) =
        conn.produce_transactional("described-txn", transactional, "described", 1, &values(0, 2)).await.unwrap();
    assert_eq!(error, 0);

    let answer = describe(&mut conn, &[("described", &[0, 1, 5]), ("missing", &[0])]).await;
    assert_eq!(listed(&answer[0]), vec![(id, 0, 4, CREATE_TIME)]);
    // A staged batch has no timestamp in the producer state.
    let txn_producer = (txn_id, i32::from(txn_epoch), 1, -1);
    assert_eq!(listed(&answer[1]), vec![txn_producer]);
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!((answer[2].partition_index, answer[2].error_code), (5, unknown));
    assert_eq!((answer[3].partition_index, answer[3].error_code), (0, unknown));

    // Committed, the transaction's producer stays listed (its state lives on, as in
    // Kafka); the idempotent producer bumps its epoch (KIP-360) and is listed once, at
    // the new one.
    assert_eq!(conn.end_transaction("described-txn", transactional, true).await.unwrap(), 0);
    let (error, same_id, bumped) = conn.init_idempotent(Some(idempotent)).await.unwrap();
    assert_eq!((error, same_id, bumped), (0, id, 1));
    let next = TxnProducer { id, epoch: bumped, sequence: 0 };
    assert_eq!(conn.produce_idempotent(next, "described", 0, &values(5, 1)).await.unwrap(), (0, 5));
    let answer = describe(&mut conn, &[("described", &[0, 1])]).await;
    assert_eq!(listed(&answer[0]), vec![(id, 1, 0, CREATE_TIME)]);
    assert_eq!(listed(&answer[1]), vec![txn_producer]);
    server.stop().await;
}
