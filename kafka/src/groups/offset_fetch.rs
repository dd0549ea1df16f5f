//! OffsetFetch: a group's committed offsets, read from the tracked consumers named after
//! it (`offsets`), one group a request (versions 1-7) or several (8 on; 9 naming the
//! consumer-protocol member that asks). Asked for every topic, only the partitions the
//! group has offsets on are answered, as Kafka does. Each offset comes with the metadata
//! string committed with it.

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_service::ServiceError;

use crate::error::code;
use crate::topics::{self, stream_of};
use crate::Kafka;

/// One partition's committed offset as OffsetFetch answers it: -1 and no metadata when
/// there is none, or with the error that kept it from being read.
pub(crate) struct StoredOffset {
    pub partition: i32,
    pub offset: i64,
    pub metadata: String,
    pub error: i16,
}

/// Group `group`'s committed offset on `partition`'s `stream`.
async fn committed(kafka: &Kafka, stream: &str, partition: i32, group: &str) -> StoredOffset {
    let none = StoredOffset { partition, offset: -1, metadata: String::new(), error: 0 };
    match kafka.service.consumer_position(&kafka.config.basin, stream, group).await {
        Ok(Some(position)) => StoredOffset {
            offset: i64::try_from(position.seq_num).unwrap_or(i64::MAX),
            metadata: position.commit_metadata,
            ..none
        },
        Ok(None) => none,
        Err(e) => StoredOffset { error: code(&e), ..none },
    }
}

/// `(topic, partitions)` asked for, every topic when `None`.
async fn asked_partitions(
    kafka: &Kafka,
    topics: Option<Vec<(TopicName, Vec<i32>)>>,
) -> Result<Vec<(TopicName, Vec<i32>)>, ServiceError> {
    if let Some(topics) = topics {
        return Ok(topics);
    }
    let all = topics::all_topics(kafka).await?;
    Ok(all.into_iter().map(|(name, n)| (TopicName(StrBytes::from_string(name)), (0..n as i32).collect())).collect())
}

/// Each asked partition's committed offset.
async fn committed_offsets(
    kafka: &Kafka,
    group: &str,
    asked: Vec<(TopicName, Vec<i32>)>,
) -> Vec<(TopicName, Vec<StoredOffset>)> {
    let mut answers = Vec::new();
    for (name, partitions) in asked {
        let topic = name.0.to_string();
        let mut found = Vec::new();
        for partition in partitions {
            found.push(committed(kafka, &stream_of(&topic, partition), partition, group).await);
        }
        answers.push((name, found));
    }
    answers
}

/// OffsetFetch: one group (versions 1-7) or several (8 on), each asked for the
/// partitions it names or every topic (`None`).
pub async fn fetch_offsets(kafka: &Kafka, request: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    if version >= 8 {
        return fetch_groups(kafka, request.groups).await;
    }
    let group = request.group_id.0.to_string();
    if !super::may_use_groups(kafka) {
        return OffsetFetchResponse::default().with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let topics = request.topics.map(|topics| topics.into_iter().map(|t| (t.name, t.partition_indexes)).collect());
    let stored = match stored_offsets(kafka, &group, topics).await {
        Ok(stored) => stored,
        Err(e) => return OffsetFetchResponse::default().with_error_code(code(&e)),
    };
    let topics = stored
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|stored| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(stored.partition)
                        .with_committed_offset(stored.offset)
                        .with_committed_leader_epoch(-1)
                        .with_metadata(Some(StrBytes::from_string(stored.metadata)))
                        .with_error_code(stored.error)
                })
                .collect();
            OffsetFetchResponseTopic::default().with_name(name).with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

/// OffsetFetch from version 8: each group answered on its own, with its own error. At
/// version 9 a consumer-protocol member names itself and its epoch (as Java's consumer
/// does): a member the group does not have is UNKNOWN_MEMBER_ID, another epoch than its
/// own STALE_MEMBER_EPOCH, as Kafka checks them; a caller naming no member (an admin
/// client, a classic consumer) is answered as before.
async fn fetch_groups(kafka: &Kafka, asked: Vec<OffsetFetchRequestGroup>) -> OffsetFetchResponse {
    let mut groups = Vec::with_capacity(asked.len());
    for asked in asked {
        let answer = OffsetFetchResponseGroup::default().with_group_id(asked.group_id.clone());
        let group = asked.group_id.0.to_string();
        if let Err(error) = may_fetch(kafka, &group, asked.member_id.as_deref(), asked.member_epoch) {
            groups.push(answer.with_error_code(error));
            continue;
        }
        let topics = asked.topics.map(|topics| topics.into_iter().map(|t| (t.name, t.partition_indexes)).collect());
        groups.push(match stored_offsets(kafka, &group, topics).await {
            Ok(stored) => answer.with_topics(stored.into_iter().map(group_topic).collect()),
            Err(e) => answer.with_error_code(code(&e)),
        });
    }
    OffsetFetchResponse::default().with_groups(groups)
}

/// Whether the caller may read `group`'s offsets: its token lets it use groups and, when
/// it names a member of a consumer-protocol group held here, that member is in the
/// group at `member_epoch`.
fn may_fetch(kafka: &Kafka, group: &str, member_id: Option<&str>, member_epoch: i32) -> Result<(), i16> {
    if !super::may_use_groups(kafka) {
        return Err(ResponseError::GroupAuthorizationFailed.code());
    }
    let member_id = member_id.unwrap_or_default();
    if member_id.is_empty() && member_epoch < 0 {
        return Ok(());
    }
    let session_ms = super::consumer_session_ms(kafka);
    kafka.groups.with_live_consumer_group(group, session_ms, |held| match held {
        None => Ok(()),
        Some(held) => match held.members.get(member_id) {
            Some(member) if member.epoch == member_epoch => Ok(()),
            Some(_) => Err(ResponseError::StaleMemberEpoch.code()),
            None => Err(ResponseError::UnknownMemberId.code()),
        },
    })
}

fn group_topic((name, partitions): (TopicName, Vec<StoredOffset>)) -> OffsetFetchResponseTopics {
    let partitions = partitions
        .into_iter()
        .map(|stored| {
            OffsetFetchResponsePartitions::default()
                .with_partition_index(stored.partition)
                .with_committed_offset(stored.offset)
                .with_committed_leader_epoch(-1)
                .with_metadata(Some(StrBytes::from_string(stored.metadata)))
                .with_error_code(stored.error)
        })
        .collect();
    OffsetFetchResponseTopics::default().with_name(name).with_partitions(partitions)
}

/// A group's offsets stored on each partition of `topics`: asked for every topic
/// (`None`), only the partitions that have one, as Kafka answers (the others are left
/// out, not answered -1).
pub(crate) async fn stored_offsets(
    kafka: &Kafka,
    group: &str,
    topics: Option<Vec<(TopicName, Vec<i32>)>>,
) -> Result<Vec<(TopicName, Vec<StoredOffset>)>, ServiceError> {
    let every_topic = topics.is_none();
    let asked = asked_partitions(kafka, topics).await?;
    let mut found = committed_offsets(kafka, group, asked).await;
    if every_topic {
        for (_, partitions) in &mut found {
            partitions.retain(|stored| stored.offset >= 0 || stored.error != 0);
        }
        found.retain(|(_, partitions)| !partitions.is_empty());
    }
    Ok(found)
}
