//! DescribeProducers, as `kafka-transactions.sh describe-producers` and an admin client's
//! `describe_producers` ask it: each partition's active producers.
//!
//! Producers are listed from the partition's producer state in metadata (what makes a
//! retried batch apply once), idempotent and transactional alike, as Kafka lists them
//! from its own: each producer id once, at its latest epoch, with the last sequence of
//! its latest batch and that batch's last timestamp, until the state expires (a
//! transactional batch is staged before it has offsets or timestamps: its timestamp is
//! -1, unknown, as Kafka answers for a producer without one). The
//! current transaction's start offset is always -1: nothing of an open transaction is
//! in the log before its commit, so none holds back read_committed consumers (Kafka
//! gives the offset of the open transaction's first batch on the partition).
//!
//! Any broker answers for any partition (every agent reads the same metadata; Kafka's
//! leader alone answers). A partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION,
//! a topic outside the caller's token TOPIC_AUTHORIZATION_FAILED; a token that may not
//! read the partition gets that error from the service.

use std::collections::BTreeMap;

use futures::StreamExt;
use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_metadata_contract::ProducerSummary;

use crate::produce::producer_of_name;
use crate::topics::{self, stream_of, Found};
use crate::{error, Kafka};

/// Partitions looked up at once.
const PARTITIONS_AT_ONCE: usize = 16;

pub async fn describe(kafka: &Kafka, request: DescribeProducersRequest) -> DescribeProducersResponse {
    let mut topics_answered = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let partitions = match topics::find(kafka, &name).await {
            Ok(Found::Hidden) => refuse_all(&topic.partition_indexes, ResponseError::TopicAuthorizationFailed, None),
            Ok(Found::Invalid | Found::Partitions(0)) => {
                let why = format!("No such topic as {name}");
                refuse_all(&topic.partition_indexes, ResponseError::UnknownTopicOrPartition, Some(why))
            }
            Ok(Found::Partitions(count)) => answer_partitions(kafka, &name, &topic.partition_indexes, count).await,
            Err(e) => refuse_all(&topic.partition_indexes, error::code_of(&e), Some(e.to_string())),
        };
        topics_answered.push(TopicResponse::default().with_name(topic.name).with_partitions(partitions));
    }
    DescribeProducersResponse::default().with_topics(topics_answered)
}

async fn answer_partitions(kafka: &Kafka, topic: &str, partitions: &[i32], count: u32) -> Vec<PartitionResponse> {
    futures::stream::iter(partitions.iter().copied())
        .map(|partition| async move {
            let answer = PartitionResponse::default().with_partition_index(partition);
            if !u32::try_from(partition).is_ok_and(|p| p < count) {
                let why = format!("No such partition as {topic}-{partition}");
                return refused(answer, ResponseError::UnknownTopicOrPartition, Some(why));
            }
            let stream = stream_of(topic, partition);
            match kafka.service.producers(&kafka.config.basin, &stream).await {
                Ok(found) => answer.with_active_producers(latest_epochs(found)),
                Err(e) => refused(answer, error::code_of(&e), Some(e.to_string())),
            }
        })
        .buffered(PARTITIONS_AT_ONCE)
        .collect()
        .await
}

/// Kafka producers among a partition's producer states (named `kafka-<id>-<epoch>`),
/// each id at its latest epoch.
fn latest_epochs(found: Vec<ProducerSummary>) -> Vec<ProducerState> {
    let mut latest: BTreeMap<i64, (i16, ProducerSummary)> = BTreeMap::new();
    for summary in found {
        let Some((id, epoch)) = producer_of_name(&summary.producer) else { continue };
        if latest.get(&id).is_none_or(|(kept, _)| *kept < epoch) {
            latest.insert(id, (epoch, summary));
        }
    }
    latest
        .into_iter()
        .map(|(id, (epoch, s))| {
            let last = s.last_seq.saturating_add(s.last_count.max(1) - 1);
            producer(id, epoch)
                .with_last_sequence(i32::try_from(last % (1 << 31)).unwrap_or(i32::MAX))
                .with_last_timestamp(match s.last_timestamp {
                    0 => -1,
                    at => i64::try_from(at).unwrap_or(i64::MAX),
                })
        })
        .collect()
}

fn producer(id: i64, epoch: i16) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(i32::from(epoch))
        .with_coordinator_epoch(-1)
        .with_current_txn_start_offset(-1)
}

fn refuse_all(partitions: &[i32], error: ResponseError, why: Option<String>) -> Vec<PartitionResponse> {
    let answer = |p| refused(PartitionResponse::default().with_partition_index(p), error, why.clone());
    partitions.iter().map(|&p| answer(p)).collect()
}

fn refused(answer: PartitionResponse, error: ResponseError, why: Option<String>) -> PartitionResponse {
    answer.with_error_code(error.code()).with_error_message(why.map(StrBytes::from_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::produce::producer_name;

    fn summary(producer: String, last_seq: u64, last_count: u64) -> ProducerSummary {
        ProducerSummary { producer, last_seq, last_count, last_timestamp: 7, last_active_ms: 9 }
    }

    /// Each id once, at its latest epoch, with the last sequence of its latest batch;
    /// S2's producers are not Kafka's.
    #[test]
    fn each_kafka_producer_is_listed_once_at_its_latest_epoch() {
        let found = vec![
            summary(producer_name(5, 0), 10, 4),
            summary(producer_name(5, 1), 0, 3),
            summary("s2-writer".into(), 1, 1),
            summary(producer_name(6, 0), 100, 1),
        ];
        let listed: Vec<(i64, i32, i32)> =
            latest_epochs(found).iter().map(|p| (p.producer_id.0, p.producer_epoch, p.last_sequence)).collect();
        assert_eq!(listed, vec![(5, 1, 2), (6, 0, 100)]);
    }
}
