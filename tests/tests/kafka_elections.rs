//! ElectLeaders over a real socket, as admin tools send it: every existing partition
//! already has its leader (ELECTION_NOT_NEEDED, with Kafka's message), for a preferred
//! and an unclean election and at every version; asked for every partition, each topic
//! is answered with none; unknown partitions and topics are UNKNOWN_TOPIC_OR_PARTITION;
//! an unknown election type refuses the whole request.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_tests::kafka_client::KafkaConn;
use shale_tests::TestServer;

/// Each topic answered, with each partition's id and error code.
type Answer = Vec<(String, Vec<(i32, i16)>)>;

fn topic(name: &str, partitions: &[i32]) -> TopicPartitions {
    TopicPartitions::default()
        .with_topic(TopicName(StrBytes::from_string(name.into())))
        .with_partitions(partitions.into())
}

/// One ElectLeaders at `version` of `election_type` for `asked` (every partition when
/// `None`): the top-level error code and each topic's answers.
async fn elect(
    conn: &mut KafkaConn,
    version: i16,
    election_type: i8,
    asked: Option<Vec<TopicPartitions>>,
) -> (i16, Answer) {
    let request = ElectLeadersRequest::default()
        .with_election_type(election_type)
        .with_topic_partitions(asked)
        .with_timeout_ms(10_000);
    let response: ElectLeadersResponse = conn.call(ApiKey::ElectLeaders, version, &request).await.unwrap();
    let mut answer: Answer = response
        .replica_election_results
        .iter()
        .map(|t| (t.topic.0.to_string(), t.partition_result.iter().map(|p| (p.partition_id, p.error_code)).collect()))
        .collect();
    answer.sort();
    if let Some(message) = response
        .replica_election_results
        .iter()
        .flat_map(|t| &t.partition_result)
        .find_map(|p| (p.error_code == ResponseError::ElectionNotNeeded.code()).then(|| p.error_message.clone()))
    {
        assert_eq!(message.as_deref(), Some("Leader election not needed for topic partition."));
    }
    (response.error_code, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_partition_already_has_its_leader() {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("orders", 3).await.unwrap(), 0);
    assert_eq!(conn.create_topic("payments", 1).await.unwrap(), 0);
    let (not_needed, unknown) =
        (ResponseError::ElectionNotNeeded.code(), ResponseError::UnknownTopicOrPartition.code());

    for (version, election_type) in [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1)] {
        let asked = vec![topic("orders", &[0, 2, 7]), topic("missing", &[0])];
        let (error, answer) = elect(&mut conn, version, election_type, Some(asked)).await;
        let expected = vec![
            ("missing".to_string(), vec![(0, unknown)]),
            ("orders".to_string(), vec![(0, not_needed), (2, not_needed), (7, unknown)]),
        ];
        assert_eq!((error, answer), (0, expected), "version {version}, election type {election_type}");
    }

    // Every partition: those that need no election are left out, each topic listed.
    let (error, answer) = elect(&mut conn, 2, 0, None).await;
    assert_eq!((error, answer), (0, vec![("orders".to_string(), vec![]), ("payments".to_string(), vec![])]));

    let invalid = ResponseError::InvalidRequest.code();
    let (error, answer) = elect(&mut conn, 2, 5, Some(vec![topic("orders", &[1])])).await;
    assert_eq!((error, answer), (invalid, vec![("orders".to_string(), vec![(1, invalid)])]));

    // Nothing moved: the partition still takes records at its next offset.
    assert_eq!(conn.produce("orders", 1, &["after".to_string()]).await.unwrap(), (0, 0));
    server.stop().await;
}
