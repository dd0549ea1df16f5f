//! What admin clients see of share groups: ShareGroupDescribe (the group's state,
//! epochs and each member's subscription and assignment) and DescribeShareGroupOffsets
//! (each share-partition's start offset, as stored on the partition's stream), as
//! `kafka-share-groups.sh --describe` and Java's `Admin.describeShareGroups` and
//! `listShareGroupOffsets` ask them.

use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::share_group_describe_response::{Assignment, DescribedGroup, Member, TopicPartitions};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, ShareGroupDescribeRequest,
    ShareGroupDescribeResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::group::{self, ShareGroup};
use super::offsets::{refused, Refusal};
use crate::authorized::{self, NOT_ASKED};
use crate::groups::{consumer_session_ms, not_coordinator, stored_offsets, StoredOffset};
use crate::{topics, Kafka};

/// The assignor share groups are described with: every member gets every partition of
/// its topics (Kafka's share groups name theirs `simple`).
const ASSIGNOR: &str = "simple";

pub fn describe(kafka: &Kafka, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse {
    let asked = request.include_authorized_operations;
    let groups = request
        .group_ids
        .into_iter()
        .map(|id| {
            let answer = DescribedGroup::default().with_group_id(id.clone()).with_authorized_operations(NOT_ASKED);
            if let Some(error) = not_coordinator(kafka, &id.0) {
                return answer.with_error_code(error);
            }
            let now = kafka.shares.now();
            let mut groups = kafka.shares.groups();
            match groups.get_mut(&*id.0) {
                Some(group) => {
                    group.expire(now, consumer_session_ms(kafka));
                    described(answer, group)
                        .with_authorized_operations(authorized::when_asked(asked, || authorized::group(kafka)))
                }
                None => {
                    drop(groups);
                    let other_kind = kafka.groups.holds(&id.0, consumer_session_ms(kafka));
                    not_found(answer, &id.0, other_kind)
                }
            }
        })
        .collect();
    ShareGroupDescribeResponse::default().with_groups(groups)
}

/// A group's state name: `Stable` with members, `Empty` without.
pub(crate) fn state_name(group: &ShareGroup) -> &'static str {
    if group.is_empty() {
        "Empty"
    } else {
        "Stable"
    }
}

/// GROUP_ID_NOT_FOUND, saying whether the name is another kind of group's, as Kafka does.
fn not_found(answer: DescribedGroup, id: &str, other_kind: bool) -> DescribedGroup {
    let message =
        if other_kind { format!("Group {id} is not a share group.") } else { format!("Group {id} not found.") };
    answer
        .with_group_state(StrBytes::from_static_str("Dead"))
        .with_error_code(ResponseError::GroupIdNotFound.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

fn described(answer: DescribedGroup, group: &ShareGroup) -> DescribedGroup {
    let members = group
        .members()
        .iter()
        .map(|(id, m)| {
            Member::default()
                .with_member_id(StrBytes::from_string(id.clone()))
                .with_rack_id(m.rack_id.clone().map(StrBytes::from_string))
                .with_member_epoch(m.epoch)
                .with_client_id(StrBytes::from_string(m.client_id.clone()))
                .with_subscribed_topic_names(m.topics.iter().map(|t| topic_name(t)).collect())
                .with_assignment(assignment(&m.assigned))
        })
        .collect();
    answer
        .with_group_state(StrBytes::from_static_str(state_name(group)))
        .with_group_epoch(group.epoch())
        .with_assignment_epoch(group.epoch())
        .with_assignor_name(StrBytes::from_static_str(ASSIGNOR))
        .with_members(members)
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

fn assignment(assigned: &group::Assignment) -> Assignment {
    let topic_partitions = assigned
        .iter()
        .map(|(topic, partitions)| {
            TopicPartitions::default()
                .with_topic_id(topics::topic_id(topic))
                .with_topic_name(topic_name(topic))
                .with_partitions(partitions.clone())
        })
        .collect();
    Assignment::default().with_topic_partitions(topic_partitions)
}

/// DescribeShareGroupOffsets (version 0): each asked partition's share-partition start
/// offset (-1 where the group has none); asked for every topic, only the partitions the
/// group has one on, as OffsetFetch answers. A group this coordinator holds as a share
/// group is answered, and so is one it holds no group of at all but that has start
/// offsets stored (a share group whose members have not come back since a restart: the
/// stored offsets do not say which kind of group wrote them); a classic or
/// consumer-protocol group, or one with nothing stored, is GROUP_ID_NOT_FOUND.
pub async fn describe_offsets(
    kafka: &Kafka,
    request: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let mut groups = Vec::with_capacity(request.groups.len());
    for asked in request.groups {
        let answer = DescribeShareGroupOffsetsResponseGroup::default().with_group_id(asked.group_id.clone());
        let group = asked.group_id.0.to_string();
        let topics = asked.topics.map(|topics| topics.into_iter().map(|t| (t.topic_name, t.partitions)).collect());
        groups.push(match offsets_of(kafka, &group, topics).await {
            Ok(found) => answer.with_topics(answered_topics(found)),
            Err((error, message)) => {
                answer.with_error_code(error).with_error_message(message.map(StrBytes::from_string))
            }
        });
    }
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}

type Offsets = Vec<(TopicName, Vec<StoredOffset>)>;

async fn offsets_of(
    kafka: &Kafka,
    group: &str,
    topics: Option<Vec<(TopicName, Vec<i32>)>>,
) -> Result<Offsets, Refusal> {
    super::offsets::share_group(kafka, group).await?;
    stored_offsets(kafka, group, topics).await.map_err(refused)
}

fn answered_topics(found: Offsets) -> Vec<DescribeShareGroupOffsetsResponseTopic> {
    found
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|stored| {
                    DescribeShareGroupOffsetsResponsePartition::default()
                        .with_partition_index(stored.partition)
                        .with_start_offset(stored.offset)
                        .with_leader_epoch(0)
                        .with_error_code(stored.error)
                })
                .collect();
            DescribeShareGroupOffsetsResponseTopic::default()
                .with_topic_id(topics::topic_id(&name.0))
                .with_topic_name(name)
                .with_partitions(partitions)
        })
        .collect()
}
