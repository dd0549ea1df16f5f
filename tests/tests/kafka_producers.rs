//! DescribeProducers over a real socket, as `kafka-transactions.sh describe-producers`
//! sends it: an idempotent producer listed on the partition it wrote to, once, at its
//! latest epoch, with its latest batch's last sequence and timestamp; a transactional
//! producer the same way, before and after its commit, never with a transaction start
//! offset; unknown partitions and topics refused. And ListTransactions' filters, as
//! `kafka-transactions.sh list` and Java's `Admin.listTransactions` send them: by
//! duration (version 1) and by a pattern of transactional ids (version 2).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_producers_response::PartitionResponse;
use kafka_protocol::messages::{
    ApiKey, DescribeProducersRequest, DescribeProducersResponse, ListTransactionsRequest, ListTransactionsResponse,
    TopicName,
};
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

/// ListTransactions at `version` with a duration filter and an id pattern: the error code
/// and the ids listed, sorted.
async fn list_transactions(
    conn: &mut KafkaConn,
    version: i16,
    duration_ms: i64,
    pattern: Option<&str>,
) -> (i16, Vec<String>) {
    let request = ListTransactionsRequest::default()
        .with_duration_filter(duration_ms)
        .with_transactional_id_pattern(pattern.map(|p| StrBytes::from_string(p.to_string())));
    let response: ListTransactionsResponse = conn.call(ApiKey::ListTransactions, version, &request).await.unwrap();
    let mut ids: Vec<String> = response.transaction_states.iter().map(|t| t.transactional_id.0.to_string()).collect();
    ids.sort();
    (response.error_code, ids)
}

/// ListTransactions' filters: an open transaction started just now is not listed as
/// running longer than an hour, while ids with none open are (their start is unknown, as
/// Kafka's `Empty` ones); a pattern lists the ids it matches whole; a pattern that does
/// not compile is INVALID_REGULAR_EXPRESSION.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_transactions_filters_by_duration_and_id_pattern() {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("listed", 1).await.unwrap(), 0);
    for id in ["etl-1", "etl-2", "other"] {
        assert_eq!(conn.init_transactional(id).await.unwrap().0, 0);
    }
    let (error, producer, epoch) = conn.init_transactional("etl-1").await.unwrap();
    assert_eq!(error, 0);
    let open = TxnProducer { id: producer, epoch, sequence: 0 };
    assert_eq!(conn.add_partitions("etl-1", open, "listed", &[0]).await.unwrap(), 0);
    assert_eq!(conn.produce_transactional("etl-1", open, "listed", 0, &values(0, 1)).await.unwrap().0, 0);

    let every = ["etl-1", "etl-2", "other"].map(String::from).to_vec();
    assert_eq!(list_transactions(&mut conn, 2, -1, None).await, (0, every));
    let hour = 3_600_000;
    let long_running = list_transactions(&mut conn, 1, hour, None).await;
    assert_eq!(long_running, (0, vec!["etl-2".into(), "other".into()]), "etl-1 has run for well under an hour");
    assert_eq!(list_transactions(&mut conn, 2, -1, Some("etl-.*")).await, (0, vec!["etl-1".into(), "etl-2".into()]));
    assert_eq!(list_transactions(&mut conn, 2, -1, Some("etl")).await, (0, vec![]), "a pattern matches whole ids");
    assert_eq!(list_transactions(&mut conn, 2, hour, Some("etl-.*")).await, (0, vec!["etl-2".into()]));
    let broken = list_transactions(&mut conn, 2, -1, Some("etl-[")).await;
    assert_eq!(broken, (ResponseError::InvalidRegularExpression.code(), vec![]));
    server.stop().await;
}
