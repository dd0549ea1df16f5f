//! ConsumerGroupHeartbeat, the consumer protocol's one call (KIP-848, version 1 as
//! librdkafka sends it, and 0): a member joins with epoch 0 and its subscription, learns
//! its epoch and assignment from the answers, reports the partitions it owns, and leaves
//! with epoch -1. The group's state is `consumer_group`'s; this module looks up the
//! subscribed topics' partition counts, maps topic ids, and answers.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::assignors::Assignor;
use super::consumer_group::{Beat, ConsumerGroup, Partitions, Refusal};
use super::{consumer_session_ms, not_coordinator, text};
use crate::topics::{self, Found};
use crate::Kafka;

type Response = ConsumerGroupHeartbeatResponse;

fn refuse(error: ResponseError, why: impl Into<String>) -> Response {
    Response::default().with_error_code(error.code()).with_error_message(Some(StrBytes::from_string(why.into())))
}

pub async fn heartbeat(
    kafka: &Kafka,
    request: ConsumerGroupHeartbeatRequest,
    version: i16,
    client_id: &str,
) -> Response {
    let group_id = request.group_id.0.to_string();
    if group_id.is_empty() {
        return refuse(ResponseError::InvalidRequest, "GroupId can't be empty.");
    }
    if let Some(error) = not_coordinator(kafka, &group_id) {
        return Response::default().with_error_code(error);
    }
    let member_id = match text(&request.member_id) {
        id if !id.is_empty() => id,
        _ if version == 0 && request.member_epoch == 0 => kafka.groups.member_id(client_id),
        _ => return refuse(ResponseError::InvalidRequest, "MemberId can't be empty."),
    };
    if request.subscribed_topic_regex.as_ref().is_some_and(|regex| !regex.is_empty()) {
        return refuse(
            ResponseError::InvalidRequest,
            "subscriptions by regular expression are not served: name the topics",
        );
    }
    let assignor = match request.server_assignor.as_ref().filter(|name| !name.is_empty()) {
        None => None,
        Some(name) => match Assignor::parse(name) {
            Some(assignor) => Some(assignor),
            None => {
                return refuse(
                    ResponseError::UnsupportedAssignor,
                    format!("ServerAssignor {name} is not supported. Supported assignors: uniform, range."),
                )
            }
        },
    };
    if kafka.groups.lock().get(&group_id).is_some_and(|g| !g.members.is_empty()) {
        return refuse(ResponseError::GroupIdNotFound, format!("Group {group_id} is not a consumer group."));
    }
    let subscribed: Option<BTreeSet<String>> =
        request.subscribed_topic_names.as_ref().map(|names| names.iter().map(|n| n.0.to_string()).collect());
    let mut wanted =
        kafka.groups.consumer_lock().get(&group_id).map(ConsumerGroup::subscribed_topics).unwrap_or_default();
    wanted.extend(subscribed.iter().flatten().cloned());
    let mut counts = BTreeMap::new();
    for topic in &wanted {
        let own = subscribed.as_ref().is_some_and(|s| s.contains(topic));
        match topics::find(kafka, topic).await {
            Ok(Found::Partitions(n)) => {
                counts.insert(topic.clone(), n);
            }
            Ok(Found::Hidden) if own => {
                return refuse(ResponseError::TopicAuthorizationFailed, format!("Topic {topic} is not authorized."))
            }
            Ok(Found::Invalid) if own => {
                counts.insert(topic.clone(), 0);
            }
            Ok(_) => {}
            Err(e) => return refuse(crate::error::code_of(&e), e.to_string()),
        }
    }
    let by_id: BTreeMap<uuid::Uuid, &String> = wanted.iter().map(|t| (topics::topic_id(t), t)).collect();
    let owned = request.topic_partitions.as_ref().map(|owned| {
        owned
            .iter()
            .filter_map(|t| by_id.get(&t.topic_id).map(|name| (name, &t.partitions)))
            .flat_map(|(name, partitions)| partitions.iter().map(|&p| ((*name).clone(), p)))
            .collect::<Partitions>()
    });
    let beat = Beat {
        member_id: member_id.clone(),
        epoch: request.member_epoch,
        client_id: client_id.to_string(),
        instance_id: request.instance_id.as_ref().map(text),
        rack_id: request.rack_id.as_ref().map(text),
        rebalance_timeout_ms: u64::try_from(request.rebalance_timeout_ms).unwrap_or(0),
        subscribed,
        assignor,
        owned,
    };
    let now = kafka.groups.now();
    let session_ms = consumer_session_ms(kafka);
    let outcome = {
        let mut groups = kafka.groups.consumer_lock();
        let group = groups.entry(group_id.clone()).or_default();
        group.expire(now, session_ms);
        let outcome = group.heartbeat(beat, counts, now);
        if group.members.is_empty() {
            groups.remove(&group_id);
        }
        outcome
    };
    match outcome {
        Ok(answer) => {
            let interval = kafka.config.consumer_heartbeat_interval.as_millis();
            Response::default()
                .with_member_id(Some(StrBytes::from_string(member_id)))
                .with_member_epoch(answer.epoch)
                .with_heartbeat_interval_ms(i32::try_from(interval).unwrap_or(i32::MAX))
                .with_assignment(answer.assignment.map(|a| assignment(&a)))
        }
        Err(Refusal::UnknownMember) => {
            refuse(ResponseError::UnknownMemberId, format!("Member {member_id} is not a member of group {group_id}."))
        }
        Err(Refusal::FencedEpoch) => {
            refuse(ResponseError::FencedMemberEpoch, "The member epoch does not match the member's current epoch.")
        }
        Err(Refusal::IncompleteJoin) => {
            refuse(ResponseError::InvalidRequest, "A joining member gives its subscribed topics and rebalance timeout.")
        }
    }
}

/// An assignment as the answer carries it: partitions by topic id.
fn assignment(partitions: &Partitions) -> Assignment {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(topic).or_default().push(*partition);
    }
    let topic_partitions = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            TopicPartitions::default().with_topic_id(topics::topic_id(topic)).with_partitions(partitions)
        })
        .collect();
    Assignment::default().with_topic_partitions(topic_partitions)
}
