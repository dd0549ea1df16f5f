//! DescribeLogDirs, as admin tools and consoles ask it for partition sizes: a broker has
//! one log directory, named after the basin (the data is in the object store; no server
//! path is shown), holding the partitions it leads among the brokers the caller sees (as
//! Metadata names them, so each partition is counted once over the cluster). A
//! partition's size is the metered bytes of its records from its log start to its end
//! (S2's metering: body, headers and 8 bytes a record), never lagging (one replica).
//! Partitions asked for that are unknown, led by another broker or outside the caller's
//! token are left out, as Kafka leaves out partitions a broker does not hold.

use futures::StreamExt;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use shale_service::ServiceError;

use crate::brokers::{Broker, Brokers};
use crate::topics::Found;
use crate::{error, topics, Kafka};

/// Partition sizes looked up at once.
const SIZES_AT_ONCE: usize = 16;

pub async fn describe(kafka: &Kafka, request: DescribeLogDirsRequest, brokers: &[Broker]) -> DescribeLogDirsResponse {
    let me = kafka.brokers.me().id;
    let mut error_code = 0;
    let asked: Vec<(String, Vec<i32>)> = match request.topics {
        Some(topics) => {
            let mut asked = Vec::new();
            for topic in topics {
                let name = topic.topic.0.to_string();
                let count = match known_partitions(kafka, &name).await {
                    Ok(count) => count,
                    Err(e) => {
                        tracing::warn!(topic = %name, error = %e, "kafka log dirs: no partitions for a topic");
                        error_code = error::code_of(&e).code();
                        0
                    }
                };
                let partitions = topic.partitions.into_iter().filter(|&p| u32::try_from(p).is_ok_and(|p| p < count));
                asked.push((name, partitions.collect()));
            }
            asked
        }
        None => match topics::all_topics(kafka).await {
            Ok(all) => all.into_iter().map(|(name, count)| (name, (0..count as i32).collect())).collect(),
            Err(e) => return answer(kafka, Vec::new(), error::code_of(&e).code()),
        },
    };
    let mine = asked.into_iter().flat_map(|(name, partitions)| {
        let led = partitions.into_iter().filter(|&p| Brokers::leader_of(brokers, &name, p) == me).collect::<Vec<_>>();
        led.into_iter().map(move |p| (name.clone(), p))
    });
    let sizes: Vec<_> = futures::stream::iter(mine)
        .map(|(name, p)| async move {
            let size = kafka.service.live_bytes(&kafka.config.basin, &topics::stream_of(&name, p)).await;
            (name, p, size)
        })
        .buffered(SIZES_AT_ONCE)
        .collect()
        .await;
    let mut answered: Vec<DescribeLogDirsTopic> = Vec::new();
    for (name, partition, size) in sizes {
        let size = match size {
            Ok(bytes) => i64::try_from(bytes).unwrap_or(i64::MAX),
            Err(e) => {
                tracing::warn!(topic = %name, partition, error = %e, "kafka log dirs: no size for a partition");
                error_code = error::code_of(&e).code();
                continue;
            }
        };
        let entry = DescribeLogDirsPartition::default().with_partition_index(partition).with_partition_size(size);
        match answered.last_mut().filter(|t| t.name.0.as_str() == name) {
            Some(topic) => topic.partitions.push(entry),
            None => answered.push(
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name)))
                    .with_partitions(vec![entry]),
            ),
        }
    }
    answer(kafka, answered, error_code)
}

/// Partitions of `topic` the caller may see (0 when unknown or not visible).
async fn known_partitions(kafka: &Kafka, topic: &str) -> Result<u32, ServiceError> {
    match topics::find(kafka, topic).await? {
        Found::Invalid | Found::Hidden => Ok(0),
        Found::Partitions(count) => Ok(count),
    }
}

/// The broker's one log directory with `topics`; `error_code` is the directory's (a
/// topic or size that could not be looked up), as Kafka marks a directory it cannot read.
fn answer(kafka: &Kafka, topics: Vec<DescribeLogDirsTopic>, error_code: i16) -> DescribeLogDirsResponse {
    let dir = DescribeLogDirsResult::default()
        .with_error_code(error_code)
        .with_log_dir(StrBytes::from_string(format!("shale:{}", kafka.config.basin)))
        .with_topics(topics)
        .with_total_bytes(-1)
        .with_usable_bytes(-1);
    DescribeLogDirsResponse::default().with_results(vec![dir])
}
