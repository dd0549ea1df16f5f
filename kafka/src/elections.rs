//! ElectLeaders, as admin tools send it (`kafka-leader-election.sh`, an admin client's
//! `elect_leaders`): every partition here has one replica, its leader, which is the
//! replica a preferred election picks and a live one an unclean election would keep, so
//! every existing partition answers ELECTION_NOT_NEEDED, as Kafka answers a partition
//! whose leader is already the one asked for. Asked for every partition (no list),
//! Kafka leaves those out, so each topic is answered with no partitions. A partition that
//! does not exist is UNKNOWN_TOPIC_OR_PARTITION; a topic outside the caller's token
//! TOPIC_AUTHORIZATION_FAILED, as in Metadata.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::topics::Found;
use crate::{error, topics, Kafka};

/// Election types: the preferred replica, or any live one (unclean).
const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

/// A partition's answer: its error code and Kafka's message for it.
type Outcome = (i16, Option<String>);

/// Kafka's message for ELECTION_NOT_NEEDED.
const NOT_NEEDED: &str = "Leader election not needed for topic partition.";

pub async fn elect(kafka: &Kafka, request: ElectLeadersRequest) -> ElectLeadersResponse {
    let every = request.topic_partitions.is_none();
    let asked = request.topic_partitions.unwrap_or_default();
    if !matches!(request.election_type, PREFERRED | UNCLEAN) {
        // Kafka refuses the whole request, each partition asked for with the same error.
        let refused = ResponseError::InvalidRequest.code();
        let why = format!("Unknown election type {}", request.election_type);
        let results = asked.into_iter().map(|t| {
            let outcomes = t.partitions.into_iter().map(|p| (p, (refused, Some(why.clone()))));
            answer(t.topic, outcomes)
        });
        return ElectLeadersResponse::default()
            .with_error_code(refused)
            .with_replica_election_results(results.collect());
    }
    let mut results = Vec::new();
    if every {
        match topics::all_topics(kafka).await {
            Ok(all) => {
                results.extend(all.into_keys().map(|name| answer(TopicName(StrBytes::from_string(name)), [])));
            }
            Err(e) => return ElectLeadersResponse::default().with_error_code(error::code_of(&e).code()),
        }
    }
    for topic in asked {
        let outcomes = outcomes(kafka, &topic.topic.0, &topic.partitions).await;
        results.push(answer(topic.topic, topic.partitions.into_iter().zip(outcomes)));
    }
    ElectLeadersResponse::default().with_replica_election_results(results)
}

/// Each partition's outcome: ELECTION_NOT_NEEDED where it exists.
async fn outcomes(kafka: &Kafka, topic: &str, partitions: &[i32]) -> Vec<Outcome> {
    let whole = |error: ResponseError, why: Option<String>| vec![(error.code(), why); partitions.len()];
    let no_topic = || Some(format!("No such topic as {topic}"));
    match topics::find(kafka, topic).await {
        Ok(Found::Invalid | Found::Partitions(0)) => whole(ResponseError::UnknownTopicOrPartition, no_topic()),
        Ok(Found::Hidden) => whole(ResponseError::TopicAuthorizationFailed, None),
        Ok(Found::Partitions(count)) => partitions
            .iter()
            .map(|&p| match u32::try_from(p) {
                Ok(n) if n < count => (ResponseError::ElectionNotNeeded.code(), Some(NOT_NEEDED.to_string())),
                _ => (ResponseError::UnknownTopicOrPartition.code(), Some(format!("No such partition as {topic}-{p}"))),
            })
            .collect(),
        Err(e) => whole(error::code_of(&e), Some(e.to_string())),
    }
}

fn answer(topic: TopicName, partitions: impl IntoIterator<Item = (i32, Outcome)>) -> ReplicaElectionResult {
    let results = partitions.into_iter().map(|(partition, (code, why))| {
        PartitionResult::default()
            .with_partition_id(partition)
            .with_error_code(code)
            .with_error_message(why.map(StrBytes::from_string))
    });
    ReplicaElectionResult::default().with_topic(topic).with_partition_result(results.collect())
}
