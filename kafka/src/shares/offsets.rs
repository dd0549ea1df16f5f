//! Changing an empty share group's start offsets, as `kafka-share-groups.sh
//! --reset-offsets` and `--delete-offsets` and Java's `Admin.alterShareGroupOffsets` and
//! `deleteShareGroupOffsets` do: AlterShareGroupOffsets sets a share-partition's start
//! offset (every record before it done with), DeleteShareGroupOffsets removes a topic's,
//! so the group starts there again as `[kafka] share_auto_offset_reset` says. Both are
//! refused while the group has members (NON_EMPTY_GROUP), as Kafka refuses them. The
//! broker leading a partition learns of the change at the next share session opened on
//! it (see `fetch`).

use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_service::ServiceError;

use crate::groups::{consumer_session_ms, not_coordinator};
use crate::topics::{self, stream_of, Found};
use crate::Kafka;

/// A refusal: Kafka's error code and, where there is more to say, why.
pub(super) type Refusal = (i16, Option<String>);

/// `group` as a share group this coordinator answers for: one it holds (with members or
/// without), or a name it holds no group of at all that has start offsets stored (a
/// share group whose members have not come back since a restart: the stored offsets do
/// not say which kind of group wrote them). `Ok(true)` when it has members. A classic or
/// consumer-protocol group, or a name with nothing stored, is GROUP_ID_NOT_FOUND.
pub(super) async fn share_group(kafka: &Kafka, group: &str) -> Result<bool, Refusal> {
    if let Some(error) = not_coordinator(kafka, group) {
        return Err((error, None));
    }
    let session_ms = consumer_session_ms(kafka);
    if let Some(members) = kafka.shares.has_members(group, session_ms) {
        return Ok(members);
    }
    let other_kind = kafka.groups.holds(group, session_ms);
    let streams = crate::groups::partition_streams(kafka).await.map_err(refused)?;
    if other_kind || !crate::groups::has_offsets(kafka, &streams, group).await.map_err(refused)? {
        return Err((ResponseError::GroupIdNotFound.code(), Some(format!("Group {group} is not a share group."))));
    }
    Ok(false)
}

/// [`share_group`] without members: NON_EMPTY_GROUP while it has some.
async fn empty_share_group(kafka: &Kafka, group: &str) -> Result<(), Refusal> {
    if group.is_empty() {
        return Err((ResponseError::InvalidGroupId.code(), None));
    }
    match share_group(kafka, group).await? {
        true => Err((
            ResponseError::NonEmptyGroup.code(),
            Some(format!("Share group {group} has members: its offsets change only while it has none.")),
        )),
        false => Ok(()),
    }
}

/// AlterShareGroupOffsets (version 0): each named partition's start offset set, stored
/// as the group's position on the partition's stream (at most the partition's end; a
/// negative one removes it, so the group starts there again by its reset policy, as
/// Kafka's uninitialized start offset does). A topic or partition that does not exist is
/// UNKNOWN_TOPIC_OR_PARTITION, a topic outside the caller's token
/// TOPIC_AUTHORIZATION_FAILED.
pub async fn alter_offsets(kafka: &Kafka, request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse {
    let group = request.group_id.0.to_string();
    if let Err((error, message)) = empty_share_group(kafka, &group).await {
        return AlterShareGroupOffsetsResponse::default()
            .with_error_code(error)
            .with_error_message(message.map(StrBytes::from_string));
    }
    let mut responses = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.topic_name.0.to_string();
        let found = topic_partitions(kafka, &name).await;
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for asked in topic.partitions {
            let index = asked.partition_index;
            let outcome = match &found {
                Ok(count) if (0..*count).contains(&index) => {
                    let stream = stream_of(&name, index);
                    crate::groups::store(kafka, &stream, &group, asked.start_offset, String::new())
                        .await
                        .map_err(refused)
                }
                Ok(_) => Err(unknown_partition()),
                Err(refusal) => Err(refusal.clone()),
            };
            let (error, message) = outcome.err().unwrap_or((0, None));
            partitions.push(
                AlterShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(index)
                    .with_error_code(error)
                    .with_error_message(message.map(StrBytes::from_string)),
            );
        }
        let topic_id = if found.is_ok_and(|count| count > 0) { topics::topic_id(&name) } else { uuid::Uuid::nil() };
        responses.push(
            AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_name(topic.topic_name)
                .with_topic_id(topic_id)
                .with_partitions(partitions),
        );
    }
    if !responses.is_empty() {
        tracing::info!(%group, "share group start offsets altered");
    }
    AlterShareGroupOffsetsResponse::default().with_responses(responses)
}

/// DeleteShareGroupOffsets (version 0): the group's start offsets on every partition of
/// each named topic removed. A topic the group has none on is UNKNOWN_TOPIC_OR_PARTITION
/// ("no offset information to delete", as Kafka answers), as is one that does not exist.
pub async fn delete_offsets(kafka: &Kafka, request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse {
    let group = request.group_id.0.to_string();
    if let Err((error, message)) = empty_share_group(kafka, &group).await {
        return DeleteShareGroupOffsetsResponse::default()
            .with_error_code(error)
            .with_error_message(message.map(StrBytes::from_string));
    }
    let mut responses = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.topic_name.0.to_string();
        let outcome = match topic_partitions(kafka, &name).await {
            Ok(0) => Err(unknown_partition()),
            Ok(count) => delete_topic_starts(kafka, &group, &name, count).await,
            Err(refusal) => Err(refusal),
        };
        let answer = DeleteShareGroupOffsetsResponseTopic::default().with_topic_name(topic.topic_name);
        responses.push(match outcome {
            Ok(()) => {
                tracing::info!(%group, topic = %name, "share group start offsets deleted");
                answer.with_topic_id(topics::topic_id(&name))
            }
            Err((error, message)) => {
                answer.with_error_code(error).with_error_message(message.map(StrBytes::from_string))
            }
        });
    }
    DeleteShareGroupOffsetsResponse::default().with_responses(responses)
}

/// Removes `group`'s start offset from each of the topic's `count` partitions.
async fn delete_topic_starts(kafka: &Kafka, group: &str, topic: &str, count: i32) -> Result<(), Refusal> {
    let mut removed = false;
    for partition in 0..count {
        let deleted = kafka.service.delete_consumer(&kafka.config.basin, &stream_of(topic, partition), group).await;
        removed |= deleted.map_err(refused)?;
    }
    if removed {
        Ok(())
    } else {
        Err((ResponseError::UnknownTopicOrPartition.code(), Some("There is no offset information to delete.".into())))
    }
}

/// The topic's partition count as the caller finds it (0: no such topic).
async fn topic_partitions(kafka: &Kafka, topic: &str) -> Result<i32, Refusal> {
    match topics::find(kafka, topic).await {
        Ok(Found::Partitions(count)) => Ok(i32::try_from(count).unwrap_or(i32::MAX)),
        Ok(Found::Invalid) => Ok(0),
        Ok(Found::Hidden) => {
            Err((ResponseError::TopicAuthorizationFailed.code(), Some(format!("Topic {topic} is not authorized."))))
        }
        Err(e) => Err(refused(e)),
    }
}

/// A failed service call's refusal.
pub(super) fn refused(error: ServiceError) -> Refusal {
    (crate::error::code(&error), Some(error.to_string()))
}

fn unknown_partition() -> Refusal {
    (ResponseError::UnknownTopicOrPartition.code(), Some("This server does not host this topic-partition.".into()))
}
