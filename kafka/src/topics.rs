//! Topics as sets of streams: partition `P` of topic `T` is the stream `T/P` of the
//! Kafka basin. A topic exists while its stream `T/0` does, and has as many partitions as
//! there are streams `T/0`, `T/1`, ... without a gap. Partitions are created from the
//! highest down and `T/0` (or, when adding, the lowest new one) last, so a topic and its
//! new partitions appear all at once; a create that stops half way leaves streams no
//! Kafka client sees, and its retry creates the rest. Deletion removes `T/0` first.
//!
//! Configs: `retention.ms`, `message.timestamp.type` and `cleanup.policy=delete` map onto
//! each partition's stream config; `retention.bytes` and `max.message.bytes` are fixed.

mod configs;

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_metadata_contract::StreamConfig;
use shale_service::{ListQuery, ServiceError};

pub use configs::{alter_configs, describe_configs, incremental_alter_configs, MAX_MESSAGE_BYTES};

use crate::config::MAX_PARTITIONS;
use crate::error::code;
use crate::Kafka;

/// The stream holding `partition` of `topic`.
pub fn stream_of(topic: &str, partition: i32) -> String {
    format!("{topic}/{partition}")
}

/// The topic and partition a stream holds (`T/P`), if it is a partition's stream.
pub fn topic_partition_of(stream: &str) -> Option<(&str, i32)> {
    let (topic, suffix) = stream.rsplit_once('/')?;
    Some((topic, i32::try_from(partition_of(suffix)?).ok()?))
}

/// Kafka's rules for topic names: 1 to 249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn valid_topic(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 249 {
        return Err(format!("topic name must be 1 to 249 characters, got {}", name.len()));
    }
    if name == "." || name == ".." {
        return Err("topic name must not be `.` or `..`".into());
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        return Err(format!("topic name `{name}` may contain only ASCII letters, digits, `.`, `_` and `-`"));
    }
    Ok(())
}

/// The partition number a stream name's suffix gives (`"12"`), with no leading zero.
fn partition_of(suffix: &str) -> Option<u32> {
    if suffix.is_empty() || (suffix.len() > 1 && suffix.starts_with('0')) {
        return None;
    }
    suffix.parse().ok().filter(|&p| p < MAX_PARTITIONS)
}

/// Every stream name of the Kafka basin starting with `prefix`, page by page.
/// Whether the caller may see `topic` (its token reaches the topic's streams).
pub fn visible(kafka: &Kafka, topic: &str) -> bool {
    let access = kafka.service.access();
    access.sees_basin(&kafka.config.basin) && access.sees_stream(&stream_of(topic, 0))
}

/// The basin's streams under `prefix` that the caller may see: topics are found by the
/// listener itself, so a token that may produce to or fetch from a topic's streams
/// learns of the topic without the right to list the basin.
async fn stream_names(kafka: &Kafka, prefix: &str) -> Result<Vec<String>, ServiceError> {
    let access = kafka.service.access();
    if !access.sees_basin(&kafka.config.basin) {
        return Ok(Vec::new());
    }
    let mut names = Vec::new();
    let mut start_after = String::new();
    loop {
        let query = ListQuery { prefix: prefix.to_string(), start_after: start_after.clone(), limit: None };
        let page = kafka.discovery.list_streams(&kafka.config.basin, &query).await?;
        let Some(last) = page.items.last() else { break };
        start_after = last.name.clone();
        names.extend(page.items.into_iter().map(|s| s.name).filter(|name| access.sees_stream(name)));
        if !page.has_more {
            break;
        }
    }
    Ok(names)
}

/// How many partitions a set of partition numbers makes: the run from 0 without a gap.
fn contiguous(mut partitions: Vec<u32>) -> u32 {
    partitions.sort_unstable();
    partitions.dedup();
    partitions.iter().enumerate().take_while(|&(i, &p)| i as u32 == p).count() as u32
}

/// Partitions of `topic`; 0 when it does not exist.
pub async fn partition_count(kafka: &Kafka, topic: &str) -> Result<u32, ServiceError> {
    let prefix = format!("{topic}/");
    let names = stream_names(kafka, &prefix).await?;
    Ok(contiguous(names.iter().filter_map(|n| partition_of(&n[prefix.len()..])).collect()))
}

/// A topic named in a request, as the caller finds it.
pub enum Found {
    /// Not a valid topic name.
    Invalid,
    /// Outside the caller's token.
    Hidden,
    /// Its partition count; 0 when it does not exist.
    Partitions(u32),
}

/// `topic` as the caller finds it: a valid name, one its token reaches, then its
/// partitions.
pub async fn find(kafka: &Kafka, topic: &str) -> Result<Found, ServiceError> {
    if valid_topic(topic).is_err() {
        return Ok(Found::Invalid);
    }
    if !visible(kafka, topic) {
        return Ok(Found::Hidden);
    }
    Ok(Found::Partitions(partition_count(kafka, topic).await?))
}

/// Every topic and its partition count.
pub async fn all_topics(kafka: &Kafka) -> Result<BTreeMap<String, u32>, ServiceError> {
    let mut partitions: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for name in stream_names(kafka, "").await? {
        let Some((topic, suffix)) = name.rsplit_once('/') else { continue };
        if let (Ok(()), Some(p)) = (valid_topic(topic), partition_of(suffix)) {
            partitions.entry(topic.to_string()).or_default().push(p);
        }
    }
    Ok(partitions.into_iter().map(|(t, p)| (t, contiguous(p))).filter(|&(_, n)| n > 0).collect())
}

/// Partition streams created or deleted at once: their metadata writes share WAL writes,
/// so a topic of many partitions takes a few store round trips, not one per partition.
const STREAMS_AT_ONCE: usize = 64;

/// Creates partitions `from..to` of `topic`: all but the lowest at once, then the lowest,
/// which makes them all visible (a topic's partitions count up to the first missing one).
/// Existing streams are kept (a retry carries on).
async fn create_range(
    kafka: &Kafka,
    topic: &str,
    from: u32,
    to: u32,
    config: &StreamConfig,
) -> Result<(), ServiceError> {
    if from >= to {
        return Ok(());
    }
    let ensure = |partition: u32| {
        let stream = stream_of(topic, partition as i32);
        async move { kafka.service.ensure_stream(&kafka.config.basin, &stream, config.clone()).await.map(|_| ()) }
    };
    futures::stream::iter((from + 1..to).map(ensure)).buffer_unordered(STREAMS_AT_ONCE).try_collect::<()>().await?;
    ensure(from).await
}

/// Creates `topic` with `partitions` partitions (used by auto-creation too).
pub async fn create_topic(
    kafka: &Kafka,
    topic: &str,
    partitions: u32,
    config: &StreamConfig,
) -> Result<(), ServiceError> {
    create_range(kafka, topic, 0, partitions, config).await
}

fn error_result(name: TopicName, error: ResponseError, message: String) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(name)
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

pub async fn create(kafka: &Kafka, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut results = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        if let Err(message) = valid_topic(&name) {
            results.push(error_result(topic.name, ResponseError::InvalidTopicException, message));
            continue;
        }
        let partitions = match topic.num_partitions {
            -1 => kafka.config.default_partitions,
            n if n >= 1 && (n as u32) <= MAX_PARTITIONS => n as u32,
            n => {
                let message = format!("num_partitions must be 1 to {MAX_PARTITIONS} or -1, got {n}");
                results.push(error_result(topic.name, ResponseError::InvalidPartitions, message));
                continue;
            }
        };
        if topic.replication_factor != -1 && topic.replication_factor < 1 || !topic.assignments.is_empty() {
            let message = "replication is the object store's: give replication_factor -1 or at least 1, no assignments";
            results.push(error_result(topic.name, ResponseError::InvalidReplicationFactor, message.into()));
            continue;
        }
        let settings = topic.configs.iter().map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())));
        let config = match configs::stream_config(settings) {
            Ok(config) => config,
            Err(message) => {
                results.push(error_result(topic.name, ResponseError::InvalidConfig, message));
                continue;
            }
        };
        let outcome = match partition_count(kafka, &name).await {
            Ok(n) if n > 0 => Err((ResponseError::TopicAlreadyExists, format!("topic `{name}` already exists"))),
            Ok(_) if request.validate_only => Ok(()),
            Ok(_) => create_topic(kafka, &name, partitions, &config)
                .await
                .map_err(|e| (crate::error::code_of(&e), e.to_string())),
            Err(e) => Err((crate::error::code_of(&e), e.to_string())),
        };
        results.push(match outcome {
            Ok(()) => CreatableTopicResult::default()
                .with_name(topic.name)
                .with_topic_id(topic_id(&name))
                .with_num_partitions(partitions as i32)
                .with_replication_factor(1),
            Err((error, message)) => error_result(topic.name, error, message),
        });
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// DeleteTopics: each named topic's partitions deleted; from version 6 a topic may be
/// named by its id alone (Java's `Admin.deleteTopics(TopicCollection.ofTopicIds(..))`),
/// an id no topic has UNKNOWN_TOPIC_ID.
pub async fn delete(kafka: &Kafka, request: DeleteTopicsRequest, version: i16) -> DeleteTopicsResponse {
    let mut responses = Vec::new();
    let mut names = Vec::new();
    if version >= 6 {
        let mut by_id = NamesById::default();
        for asked in request.topics {
            match asked.name {
                Some(name) => names.push(name),
                None => match by_id.name_of(kafka, asked.topic_id).await {
                    Ok(Some(name)) => names.push(TopicName(StrBytes::from_string(name))),
                    Ok(None) => responses.push(
                        DeletableTopicResult::default()
                            .with_topic_id(asked.topic_id)
                            .with_error_code(ResponseError::UnknownTopicId.code())
                            .with_error_message(Some(StrBytes::from_static_str(
                                "This server does not host this topic ID.",
                            ))),
                    ),
                    Err(e) => responses.push(
                        DeletableTopicResult::default()
                            .with_topic_id(asked.topic_id)
                            .with_error_code(code(&e))
                            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                    ),
                },
            }
        }
    } else {
        names = request.topic_names;
    }
    for name in names {
        let topic = name.0.to_string();
        let result = DeletableTopicResult::default().with_name(Some(name)).with_topic_id(topic_id(&topic));
        let error = match delete_topic(kafka, &topic).await {
            Ok(true) => None,
            Ok(false) => {
                Some((ResponseError::UnknownTopicOrPartition.code(), format!("topic `{topic}` does not exist")))
            }
            Err(e) => Some((code(&e), e.to_string())),
        };
        responses.push(match error {
            None => result,
            Some((code, message)) => {
                result.with_error_code(code).with_error_message(Some(StrBytes::from_string(message)))
            }
        });
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

/// Deletes every partition of `topic`, `T/0` first so the topic disappears at once, then
/// the others together; `false` when it did not exist.
async fn delete_topic(kafka: &Kafka, topic: &str) -> Result<bool, ServiceError> {
    let partitions = partition_count(kafka, topic).await?;
    if partitions == 0 {
        return Ok(false);
    }
    kafka.topic_configs.forget(topic).await;
    let delete = |partition: u32| {
        let stream = stream_of(topic, partition as i32);
        async move {
            match kafka.service.delete_stream(&kafka.config.basin, &stream).await {
                Err(e) if !e.code().is_not_found() => Err(e),
                _ => Ok(()),
            }
        }
    };
    delete(0).await?;
    futures::stream::iter((1..partitions).map(delete)).buffer_unordered(STREAMS_AT_ONCE).try_collect::<()>().await?;
    Ok(true)
}

pub async fn create_partitions(kafka: &Kafka, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let mut results = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let outcome = add_partitions(kafka, &name, topic.count, request.validate_only).await;
        let result = CreatePartitionsTopicResult::default().with_name(topic.name);
        results.push(match outcome {
            Ok(()) => result,
            Err((error, message)) => {
                result.with_error_code(error.code()).with_error_message(Some(StrBytes::from_string(message)))
            }
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

async fn add_partitions(
    kafka: &Kafka,
    topic: &str,
    count: i32,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    let service_error = |e: ServiceError| (crate::error::code_of(&e), e.to_string());
    let current = partition_count(kafka, topic).await.map_err(service_error)?;
    if current == 0 {
        return Err((ResponseError::UnknownTopicOrPartition, format!("topic `{topic}` does not exist")));
    }
    if count <= current as i32 || count as u32 > MAX_PARTITIONS {
        let message =
            format!("topic `{topic}` has {current} partitions: the new count must be more, at most {MAX_PARTITIONS}");
        return Err((ResponseError::InvalidPartitions, message));
    }
    if validate_only {
        return Ok(());
    }
    let config = kafka.service.stream_config(&kafka.config.basin, &stream_of(topic, 0)).await.map_err(service_error)?;
    create_range(kafka, topic, current, count as u32, &config).await.map_err(service_error)
}

/// Topic names by id for one request: every topic is listed at the first lookup (ids
/// are derived from names, so that one listing answers every id asked after it).
#[derive(Default)]
pub struct NamesById(Option<Vec<String>>);

impl NamesById {
    /// The name of the topic with id `id`; `None` when no topic has it.
    pub async fn name_of(&mut self, kafka: &Kafka, id: uuid::Uuid) -> Result<Option<String>, ServiceError> {
        if self.0.is_none() {
            self.0 = Some(all_topics(kafka).await?.into_keys().collect());
        }
        Ok(self.0.iter().flatten().find(|name| topic_id(name) == id).cloned())
    }
}

/// A topic's id: derived from its name, so every process gives the same one. (A topic
/// deleted and created again keeps its id.)
pub fn topic_id(name: &str) -> uuid::Uuid {
    // FNV-1a over the name, twice with different seeds, for 128 bits.
    let hash = |seed: u64| name.bytes().fold(seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let (high, low) = (hash(0xcbf2_9ce4_8422_2325), hash(0x8422_2325_cbf2_9ce4));
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes());
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// Creates a topic that a produce or metadata request named, with the default
/// partition count; a partition past that count stays unknown.
pub async fn auto_create(kafka: &Kafka, topic: &str, partition: i32) -> Result<(), (ResponseError, String)> {
    let unknown =
        || (ResponseError::UnknownTopicOrPartition, format!("partition {partition} of topic `{topic}` does not exist"));
    let service_error = |e: ServiceError| (crate::error::code_of(&e), e.to_string());
    let existing = partition_count(kafka, topic).await.map_err(service_error)?;
    if existing > 0 || partition < 0 || partition as u32 >= kafka.config.default_partitions {
        return Err(unknown());
    }
    create_topic(kafka, topic, kafka.config.default_partitions, &Default::default()).await.map_err(service_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafkas_rules() {
        assert!(valid_topic("orders.v1_x-2").is_ok());
        for bad in ["", ".", "..", "a/b", "a b", "ü"] {
            assert!(valid_topic(bad).is_err(), "{bad}");
        }
        assert!(valid_topic(&"a".repeat(250)).is_err());
    }

    #[test]
    fn partitions_count_the_run_from_zero() {
        assert_eq!(contiguous(vec![2, 0, 1]), 3);
        assert_eq!(contiguous(vec![1, 2]), 0, "without partition 0 the topic does not exist");
        assert_eq!(contiguous(vec![0, 1, 3]), 2, "a partition past a gap is not yet visible");
        assert_eq!(partition_of("07"), None);
        assert_eq!(partition_of("0"), Some(0));
        assert_eq!(partition_of("x"), None);
    }
}
