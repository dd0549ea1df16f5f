//! Describing consumer-protocol groups: ConsumerGroupDescribe (its state, epochs,
//! assignor and each member's subscription, assignment and target), and the same group
//! in DescribeGroups' classic terms (the assignor as its protocol, each member's
//! subscription and assignment in the classic consumer encoding), so tools that know
//! only the classic API still see who holds what.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_group_describe_response::{Assignment, DescribedGroup, Member, TopicPartitions};
use kafka_protocol::messages::describe_groups_response::{self, DescribedGroupMember};
use kafka_protocol::messages::{
    consumer_protocol_assignment, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::ResponseError;

use super::assignors::by_topic;
use super::consumer_group::{ConsumerGroup, Partitions};
use super::{consumer_session_ms, not_coordinator, CONSUMER};
use crate::authorized::{self, NOT_ASKED};
use crate::{topics, Kafka};

/// `member_type` of a consumer-protocol member (version 1).
const CONSUMER_MEMBER: i8 = 1;

pub fn describe(kafka: &Kafka, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse {
    let asked = request.include_authorized_operations;
    let groups = request
        .group_ids
        .into_iter()
        .map(|id| {
            let answer = DescribedGroup::default().with_group_id(id.clone()).with_authorized_operations(NOT_ASKED);
            if let Some(error) = not_coordinator(kafka, &id.0) {
                return answer.with_error_code(error);
            }
            kafka.groups.with_live_consumer_group(&id.0, consumer_session_ms(kafka), |group| match group {
                Some(group) => described(answer, group)
                    .with_authorized_operations(authorized::when_asked(asked, || authorized::group(kafka))),
                // Classic groups and unknown ones: clients then ask DescribeGroups.
                None => answer
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(StrBytes::from_string(format!("Group {} not found.", &*id.0)))),
            })
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

fn described(answer: DescribedGroup, group: &ConsumerGroup) -> DescribedGroup {
    let members = group
        .members
        .iter()
        .map(|(id, m)| {
            let target = group.target.get(id).cloned().unwrap_or_default();
            Member::default()
                .with_member_id(StrBytes::from_string(id.clone()))
                .with_instance_id(m.instance_id.clone().map(StrBytes::from_string))
                .with_rack_id(m.rack_id.clone().map(StrBytes::from_string))
                .with_member_epoch(m.epoch)
                .with_client_id(StrBytes::from_string(m.client_id.clone()))
                .with_subscribed_topic_names(m.subscribed.iter().map(|t| name(t)).collect())
                .with_subscribed_topic_regex(m.regex.as_ref().map(|r| StrBytes::from_string(r.source.clone())))
                .with_assignment(assignment(&m.assigned))
                .with_target_assignment(assignment(&target))
                .with_member_type(CONSUMER_MEMBER)
        })
        .collect();
    answer
        .with_group_state(StrBytes::from_static_str(group.state_name()))
        .with_group_epoch(group.epoch)
        .with_assignment_epoch(group.assignment_epoch)
        .with_assignor_name(StrBytes::from_static_str(group.assignor.name()))
        .with_members(members)
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

fn assignment(partitions: &Partitions) -> Assignment {
    let topic_partitions = by_topic(partitions)
        .into_iter()
        .map(|(topic, partitions)| {
            TopicPartitions::default()
                .with_topic_id(topics::topic_id(topic))
                .with_topic_name(name(topic))
                .with_partitions(partitions)
        })
        .collect();
    Assignment::default().with_topic_partitions(topic_partitions)
}

/// `group` as DescribeGroups describes a group.
pub fn classic_description(
    answer: describe_groups_response::DescribedGroup,
    group: &ConsumerGroup,
) -> describe_groups_response::DescribedGroup {
    let members = group
        .members
        .iter()
        .map(|(id, m)| {
            let subscription = ConsumerProtocolSubscription::default()
                .with_topics(m.subscribed.iter().map(|t| StrBytes::from_string(t.clone())).collect());
            let assigned = by_topic(&m.assigned)
                .into_iter()
                .map(|(topic, partitions)| {
                    consumer_protocol_assignment::TopicPartition::default()
                        .with_topic(name(topic))
                        .with_partitions(partitions)
                })
                .collect();
            let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(assigned);
            DescribedGroupMember::default()
                .with_member_id(StrBytes::from_string(id.clone()))
                .with_group_instance_id(m.instance_id.clone().map(StrBytes::from_string))
                .with_client_id(StrBytes::from_string(m.client_id.clone()))
                .with_member_metadata(versioned(&subscription))
                .with_member_assignment(versioned(&assignment))
        })
        .collect();
    answer
        .with_group_state(StrBytes::from_static_str(group.state_name()))
        .with_protocol_type(StrBytes::from_static_str(CONSUMER))
        .with_protocol_data(StrBytes::from_static_str(group.assignor.name()))
        .with_members(members)
}

/// A classic consumer protocol message at version 0: its version, then its fields.
fn versioned(message: &impl Encodable) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i16(0);
    // Encoding version 0 of a message built here cannot fail (no field is out of range).
    if message.encode(&mut out, 0).is_err() {
        return Bytes::new();
    }
    out.freeze()
}
