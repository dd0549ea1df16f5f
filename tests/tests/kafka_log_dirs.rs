//! DescribeLogDirs over a real socket, as consoles ask it for partition sizes: one log
//! directory named after the basin; each partition's size the metered bytes of its
//! records from its log start to its end (a trim takes the trimmed records off and adds
//! its own command record); partitions asked for that do not exist are left out.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use shale_tests::kafka_client::KafkaConn;
use shale_tests::TestServer;

/// What a record of `value` is metered at (S2's metering: 8 bytes and the body; these
/// records have no key, so no headers).
fn metered(value: &str) -> i64 {
    8 + value.len() as i64
}

/// Every `(topic, partition, size)` one DescribeLogDirs at `version` answered for
/// `asked` (every partition when `None`), and the log directory's name.
async fn describe(
    conn: &mut KafkaConn,
    version: i16,
    asked: Option<Vec<(&str, Vec<i32>)>>,
) -> (String, Vec<(String, i32, i64)>) {
    let topics = asked.map(|asked| {
        asked
            .into_iter()
            .map(|(name, partitions)| {
                DescribableLogDirTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(name.into())))
                    .with_partitions(partitions)
            })
            .collect()
    });
    let request = DescribeLogDirsRequest::default().with_topics(topics);
    let response: DescribeLogDirsResponse = conn.call(ApiKey::DescribeLogDirs, version, &request).await.unwrap();
    assert_eq!(response.results.len(), 1, "one log directory");
    let dir = &response.results[0];
    assert_eq!(dir.error_code, 0);
    let mut sizes: Vec<_> = dir
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), p.partition_index, p.partition_size)))
        .collect();
    assert!(dir.topics.iter().flat_map(|t| &t.partitions).all(|p| p.offset_lag == 0 && !p.is_future_key));
    sizes.sort();
    (dir.log_dir.to_string(), sizes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_sizes_are_their_records_metered_bytes_from_the_log_start() {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("sizes", 2).await.unwrap(), 0);
    assert_eq!(conn.create_topic("other", 1).await.unwrap(), 0);
    let values: Vec<String> = [100, 200, 300].iter().map(|&n| "v".repeat(n)).collect();
    assert_eq!(conn.produce("sizes", 0, &values).await.unwrap(), (0, 0));
    assert_eq!(conn.produce("other", 0, &values[..1]).await.unwrap(), (0, 0));
    let all: i64 = values.iter().map(|v| metered(v)).sum();

    for version in [1, 4] {
        let (dir, sizes) = describe(&mut conn, version, None).await;
        assert_eq!(dir, "shale:kafka-topics", "the default basin's name, no server path");
        let expected = vec![
            ("other".to_string(), 0, metered(&values[0])),
            ("sizes".to_string(), 0, all),
            ("sizes".to_string(), 1, 0),
        ];
        assert_eq!(sizes, expected, "version {version}");
    }
    let asked = vec![("sizes", vec![0, 9]), ("missing", vec![0])];
    assert_eq!(describe(&mut conn, 2, Some(asked)).await.1, vec![("sizes".to_string(), 0, all)]);

    // A trim before offset 1: the first record's bytes go, its command record's come.
    assert_eq!(conn.delete_records("sizes", 0, 1).await.unwrap(), 0);
    // S2's trim command: one header, an empty name and the value `trim`, and the
    // sequence number as an 8-byte body.
    let trim_record = 8 + 2 + 4 + 8;
    let after = describe(&mut conn, 4, Some(vec![("sizes", vec![0])])).await.1;
    assert_eq!(after, vec![("sizes".to_string(), 0, all - metered(&values[0]) + trim_record)]);
    server.stop().await;
}
