//! ShareGroupHeartbeat (version 1): a member joins with epoch 0 and the topics it
//! subscribes to, heartbeats with the epoch it was given, and leaves with -1; each answer
//! carries its assignment, every partition of its topics.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::group::{Beat, Refusal};
use crate::groups::{consumer_session_ms, not_coordinator};
use crate::topics::{self, Found};
use crate::Kafka;

type Response = ShareGroupHeartbeatResponse;

fn refuse(error: ResponseError, why: impl Into<String>) -> Response {
    Response::default().with_error_code(error.code()).with_error_message(Some(StrBytes::from_string(why.into())))
}

pub async fn heartbeat(kafka: &Kafka, request: ShareGroupHeartbeatRequest, client_id: &str) -> Response {
    let group_id = request.group_id.0.to_string();
    let member_id = request.member_id.to_string();
    if group_id.is_empty() || member_id.is_empty() {
        return refuse(ResponseError::InvalidRequest, "GroupId and MemberId can't be empty.");
    }
    if let Some(error) = not_coordinator(kafka, &group_id) {
        return Response::default().with_error_code(error);
    }
    let subscribed: Option<BTreeSet<String>> =
        request.subscribed_topic_names.as_ref().map(|names| names.iter().map(|n| n.0.to_string()).collect());
    if let Some(topic) = subscribed.iter().flatten().find(|t| !topics::visible(kafka, t)) {
        return refuse(ResponseError::TopicAuthorizationFailed, format!("Topic {topic} is not authorized."));
    }
    if request.member_epoch == 0 && kafka.groups.holds(&group_id, consumer_session_ms(kafka)) {
        return refuse(ResponseError::GroupIdNotFound, format!("Group {group_id} is not a share group."));
    }
    let beat = Beat {
        member_id: &member_id,
        epoch: request.member_epoch,
        topics: subscribed,
        client_id,
        rack_id: request.rack_id.as_deref(),
    };
    let topics = kafka
        .shares
        .groups()
        .get(&group_id)
        .map(|g| g.topics_after(&beat))
        .unwrap_or_else(|| beat.topics.clone().unwrap_or_default());
    let mut counts = BTreeMap::new();
    if beat.epoch != -1 {
        for topic in topics {
            match topics::find(kafka, &topic).await {
                Ok(Found::Partitions(n)) => {
                    counts.insert(topic, n);
                }
                Ok(Found::Invalid | Found::Hidden) => {}
                Err(e) => return refuse(crate::error::code_of(&e), e.to_string()),
            }
        }
    }
    let now = kafka.shares.now();
    let outcome = {
        let mut groups = kafka.shares.groups();
        // Only a join that names its topics makes a group: a refused or stray heartbeat
        // leaves nothing behind.
        let joining = beat.epoch == 0 && beat.topics.is_some();
        let group = if joining { Some(groups.entry(group_id.clone()).or_default()) } else { groups.get_mut(&group_id) };
        match group {
            Some(group) => {
                group.expire(now, consumer_session_ms(kafka));
                group.heartbeat(beat, &counts, now)
            }
            None if beat.epoch == -1 => Ok((-1, Default::default())),
            None if beat.epoch == 0 => Err(Refusal::NoSubscription),
            None => Err(Refusal::UnknownMember),
        }
    };
    match outcome {
        Ok((epoch, assigned)) => {
            let interval = i32::try_from(kafka.config.consumer_heartbeat_interval.as_millis()).unwrap_or(i32::MAX);
            let assignment = (epoch > 0).then(|| {
                let topic_partitions = assigned
                    .into_iter()
                    .map(|(topic, partitions)| {
                        TopicPartitions::default().with_topic_id(topics::topic_id(&topic)).with_partitions(partitions)
                    })
                    .collect();
                Assignment::default().with_topic_partitions(topic_partitions)
            });
            Response::default()
                .with_member_id(Some(StrBytes::from_string(member_id)))
                .with_member_epoch(epoch)
                .with_heartbeat_interval_ms(interval)
                .with_assignment(assignment)
        }
        Err(Refusal::UnknownMember) => {
            refuse(ResponseError::UnknownMemberId, format!("Member {member_id} is not a member of group {group_id}."))
        }
        Err(Refusal::FencedEpoch) => {
            refuse(ResponseError::FencedMemberEpoch, "The member epoch does not match the member's current epoch.")
        }
        Err(Refusal::NoSubscription) => refuse(ResponseError::InvalidRequest, "A joining member names its topics."),
    }
}
