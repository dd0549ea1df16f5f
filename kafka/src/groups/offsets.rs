//! OffsetCommit over tracked consumers: group `G`'s committed offset on partition `P` of
//! topic `T` is the position of consumer `G` on stream `T/P`; a negative committed offset
//! removes it (OffsetFetch then answers -1, read by every client as no committed offset,
//! as the negative value Kafka keeps is). A commit's metadata string is kept beside its
//! position (up to Kafka's 4,096 bytes; longer is OFFSET_METADATA_TOO_LARGE).
//! DeleteGroups removes a group's consumer from every partition of every topic,
//! OffsetDelete from the partitions it names. OffsetFetch is `offset_fetch`.

use std::collections::BTreeSet;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_metadata_contract::ConsumerPosition;
use shale_service::ServiceError;

use crate::error::code;
use crate::topics::{self, stream_of};
use crate::Kafka;

pub async fn commit_offsets(kafka: &Kafka, request: OffsetCommitRequest) -> OffsetCommitResponse {
    let group = request.group_id.0.to_string();
    let allowed = if group.is_empty() {
        Err(ResponseError::InvalidGroupId.code())
    } else {
        let instance = request.group_instance_id.as_ref().map(|i| i.to_string());
        super::may_commit(kafka, &group, &request.member_id, instance.as_deref(), request.generation_id_or_member_epoch)
    };
    let mut topics = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::new();
        for p in topic.partitions {
            let stream = stream_of(&name, p.partition_index);
            let error = match (allowed, commit_metadata(p.committed_metadata.as_ref())) {
                (Err(error), _) | (Ok(()), Err(error)) => error,
                (Ok(()), Ok(metadata)) => match store(kafka, &stream, &group, p.committed_offset, metadata).await {
                    Ok(()) => 0,
                    Err(e) => code(&e),
                },
            };
            partitions.push(
                OffsetCommitResponsePartition::default().with_partition_index(p.partition_index).with_error_code(error),
            );
        }
        topics.push(OffsetCommitResponseTopic::default().with_name(topic.name).with_partitions(partitions));
    }
    OffsetCommitResponse::default().with_topics(topics)
}

/// Stores `group`'s committed `offset` on `stream`, with `metadata` beside it. A
/// negative offset is "none": Kafka keeps it as given and every client reads any
/// negative offset back as no committed offset (kafkajs commits -1 or -2 when it resets
/// a partition to its default, on `OFFSET_OUT_OF_RANGE` and in its admin's
/// `resetOffsets`), so the group's position is removed and OffsetFetch answers -1.
pub(crate) async fn store(
    kafka: &Kafka,
    stream: &str,
    group: &str,
    offset: i64,
    metadata: String,
) -> Result<(), ServiceError> {
    let basin = &kafka.config.basin;
    match u64::try_from(offset) {
        Ok(offset) => kafka.service.commit_consumer(basin, stream, group, offset, None, metadata).await.map(drop),
        Err(_) => kafka.service.delete_consumer(basin, stream, group).await.map(drop),
    }
}

/// A commit's metadata string as stored (none is empty, as Kafka stores it), or
/// OFFSET_METADATA_TOO_LARGE past 4,096 bytes (Kafka's `offset.metadata.max.bytes`).
pub(crate) fn commit_metadata(metadata: Option<&StrBytes>) -> Result<String, i16> {
    let metadata = metadata.map(|m| m.to_string()).unwrap_or_default();
    if metadata.len() > ConsumerPosition::MAX_COMMIT_METADATA_BYTES {
        return Err(ResponseError::OffsetMetadataTooLarge.code());
    }
    Ok(metadata)
}

/// The stream of every partition of every topic.
pub(crate) async fn partition_streams(kafka: &Kafka) -> Result<Vec<String>, ServiceError> {
    let all = topics::all_topics(kafka).await?;
    Ok(all.iter().flat_map(|(topic, &n)| (0..n as i32).map(move |partition| stream_of(topic, partition))).collect())
}

/// Every group with a committed offset on some partition of some topic.
pub(super) async fn groups_with_offsets(kafka: &Kafka) -> Result<BTreeSet<String>, ServiceError> {
    let mut groups = BTreeSet::new();
    for stream in partition_streams(kafka).await? {
        groups.extend(kafka.service.consumer_names(&kafka.config.basin, &stream).await?);
    }
    Ok(groups)
}

/// Whether `group` has a committed offset on one of `streams`.
pub(crate) async fn has_offsets(kafka: &Kafka, streams: &[String], group: &str) -> Result<bool, ServiceError> {
    for stream in streams {
        if kafka.service.consumer_position(&kafka.config.basin, stream, group).await?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// DeleteGroups: a group with members is NON_EMPTY_GROUP; otherwise its committed
/// offsets are removed from every partition and its state forgotten. A group with
/// neither is GROUP_ID_NOT_FOUND.
pub async fn delete(kafka: &Kafka, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut results = Vec::new();
    for id in request.groups_names {
        let group = id.0.to_string();
        let error = match delete_group(kafka, &group).await {
            Ok(()) => 0,
            Err(error) => error,
        };
        results.push(DeletableGroupResult::default().with_group_id(id).with_error_code(error));
    }
    DeleteGroupsResponse::default().with_results(results)
}

async fn delete_group(kafka: &Kafka, group: &str) -> Result<(), i16> {
    if let Some(error) = super::not_coordinator(kafka, group) {
        return Err(error);
    }
    if kafka.groups.with_live_consumer_group(group, super::consumer_session_ms(kafka), |g| g.is_some()) {
        // A consumer-protocol group is kept only while it has members.
        return Err(ResponseError::NonEmptyGroup.code());
    }
    let known = match kafka.groups.lock().get(group) {
        Some(state) if !state.members.is_empty() => return Err(ResponseError::NonEmptyGroup.code()),
        Some(_) => true,
        None => false,
    };
    let share = kafka.shares.delete_group(group, super::consumer_session_ms(kafka));
    let known = known | share.map_err(|()| ResponseError::NonEmptyGroup.code())?;
    let mut removed = false;
    for stream in partition_streams(kafka).await.map_err(|e| code(&e))? {
        let deleted = kafka.service.delete_consumer(&kafka.config.basin, &stream, group).await;
        removed |= deleted.map_err(|e| code(&e))?;
    }
    kafka.groups.lock().remove(group);
    if known || removed {
        Ok(())
    } else {
        Err(ResponseError::GroupIdNotFound.code())
    }
}

/// OffsetDelete: the group's committed offsets on the named partitions removed, as Kafka
/// does: a group with members keeps its offsets on the topics its members subscribe to
/// (GROUP_SUBSCRIBED_TO_TOPIC for those partitions), a group with members of another
/// protocol type than `consumer` is NON_EMPTY_GROUP, and a group with neither members
/// nor an offset on the named partitions is GROUP_ID_NOT_FOUND.
pub async fn delete_offsets(kafka: &Kafka, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group = request.group_id.0.to_string();
    // A share group's start offsets go with the group (DeleteGroups).
    if let Err(error) = super::offsets_changeable(kafka, &group) {
        return OffsetDeleteResponse::default().with_error_code(error);
    }
    let session_ms = super::consumer_session_ms(kafka);
    let consumer_protocol =
        kafka.groups.with_live_consumer_group(&group, session_ms, |g| g.map(|g| g.subscribed_topics()));
    let (known, subscribed) = match consumer_protocol {
        Some(subscribed) => (true, subscribed),
        None => match kafka.groups.lock().get(&group) {
            Some(state) if !state.members.is_empty() && state.protocol_type != "consumer" => {
                return OffsetDeleteResponse::default().with_error_code(ResponseError::NonEmptyGroup.code());
            }
            Some(state) => (true, state.subscribed_topics()),
            None => (false, Default::default()),
        },
    };
    let mut removed = false;
    let mut topics = Vec::new();
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut partitions = Vec::new();
        for p in topic.partitions {
            let error = if subscribed.contains(&name) {
                ResponseError::GroupSubscribedToTopic.code()
            } else {
                let stream = stream_of(&name, p.partition_index);
                match kafka.service.delete_consumer(&kafka.config.basin, &stream, &group).await {
                    Ok(deleted) => {
                        removed |= deleted;
                        0
                    }
                    Err(e) => code(&e),
                }
            };
            partitions.push(
                OffsetDeleteResponsePartition::default().with_partition_index(p.partition_index).with_error_code(error),
            );
        }
        topics.push(OffsetDeleteResponseTopic::default().with_name(topic.name).with_partitions(partitions));
    }
    if !known && !removed {
        return OffsetDeleteResponse::default().with_error_code(ResponseError::GroupIdNotFound.code());
    }
    OffsetDeleteResponse::default().with_topics(topics)
}
