//! ConsumerGroupHeartbeat, the consumer protocol's one call (KIP-848, version 1 as
//! librdkafka sends it, and 0): a member joins with epoch 0 and its subscription, learns
//! its epoch and assignment from the answers, reports the partitions it owns, and leaves
//! with epoch -1. The group's state is `consumer_group`'s; this module looks up the
//! subscribed topics' partition counts, maps topic ids, and answers.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::consumer_group_heartbeat_response::{self, Assignment};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_service::ServiceError;

use super::assignors::{by_topic, Assignor};
use super::consumer_group::{Beat, Partitions, Refusal, TopicRegex};
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
    let Checked { member_id, assignor, regex } = match checked(kafka, &group_id, &request, version, client_id) {
        Ok(checked) => checked,
        Err((error, why)) => return Response::default().with_error_code(error).with_error_message(why),
    };
    let subscribed: Option<BTreeSet<String>> =
        request.subscribed_topic_names.as_ref().map(|names| names.iter().map(|n| n.0.to_string()).collect());
    if let Some(topic) = subscribed.iter().flatten().find(|t| !topics::visible(kafka, t)) {
        return refuse(ResponseError::TopicAuthorizationFailed, format!("Topic {topic} is not authorized."));
    }
    let now = kafka.groups.now();
    let new_regex = regex.as_ref().is_some_and(Option::is_some);
    let (wanted, counts) = match partition_counts(kafka, &group_id, subscribed.as_ref(), new_regex, now).await {
        Ok(found) => found,
        Err(e) => return refuse(crate::error::code_of(&e), e.to_string()),
    };
    let beat = Beat {
        member_id: member_id.clone(),
        epoch: request.member_epoch,
        client_id: client_id.to_string(),
        instance_id: request.instance_id.as_ref().map(text),
        rack_id: request.rack_id.as_ref().map(text),
        rebalance_timeout_ms: u64::try_from(request.rebalance_timeout_ms).unwrap_or(0),
        subscribed,
        regex,
        assignor,
        owned: request.topic_partitions.as_ref().map(|owned| owned_partitions(owned, &wanted)),
    };
    let outcome = kafka.groups.with_consumer_group_mut(&group_id, now, consumer_session_ms(kafka), |group| {
        if counts.is_some() {
            group.topics_checked_ms = now;
        }
        group.heartbeat(beat, counts.unwrap_or_default(), now)
    });
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
        Err(Refusal::UnreleasedInstance) => refuse(
            ResponseError::UnreleasedInstanceId,
            "The instance id is held by another member of the group, which must leave first.",
        ),
        Err(Refusal::IncompleteJoin) => {
            refuse(ResponseError::InvalidRequest, "A joining member gives its subscribed topics and rebalance timeout.")
        }
    }
}

/// A heartbeat's member id, the assignor it asks for, and its regular expression
/// (`Some(None)`: an empty one, none any more).
struct Checked {
    member_id: String,
    assignor: Option<Assignor>,
    regex: Option<Option<TopicRegex>>,
}

/// What is checked before the group is touched: this broker coordinates the group for
/// this caller, the member has an id (generated here for a join at version 0), its
/// regular expression (if any) compiles, it names no assignor but `uniform` or `range`,
/// and the group has no classic members.
fn checked(
    kafka: &Kafka,
    group_id: &str,
    request: &ConsumerGroupHeartbeatRequest,
    version: i16,
    client_id: &str,
) -> Result<Checked, (i16, Option<StrBytes>)> {
    let refused = |error: ResponseError, why: String| Err((error.code(), Some(StrBytes::from_string(why))));
    if group_id.is_empty() {
        return refused(ResponseError::InvalidRequest, "GroupId can't be empty.".into());
    }
    if let Some(error) = not_coordinator(kafka, group_id) {
        return Err((error, None));
    }
    let member_id = match text(&request.member_id) {
        id if !id.is_empty() => id,
        _ if version == 0 && request.member_epoch == 0 => kafka.groups.member_id(client_id),
        _ => return refused(ResponseError::InvalidRequest, "MemberId can't be empty.".into()),
    };
    let regex = match request.subscribed_topic_regex.as_ref().map(|r| r.as_str()) {
        None => None,
        Some("") => Some(None),
        Some(source) => match TopicRegex::new(source) {
            Ok(regex) => Some(Some(regex)),
            Err(e) => return refused(ResponseError::InvalidRegularExpression, format!("{source}: {e}")),
        },
    };
    let assignor = match request.server_assignor.as_ref().filter(|name| !name.is_empty()) {
        None => None,
        Some(name) => match Assignor::parse(name) {
            Some(assignor) => Some(assignor),
            None => {
                let why = format!("ServerAssignor {name} is not supported. Supported assignors: uniform, range.");
                return refused(ResponseError::UnsupportedAssignor, why);
            }
        },
    };
    if kafka.groups.has_classic_members(group_id) || kafka.shares.holds(group_id) {
        return refused(ResponseError::GroupIdNotFound, format!("Group {group_id} is not a consumer group."));
    }
    Ok(Checked { member_id, assignor, regex })
}

/// The partitions a member reports owning, named: those of topics the group does not
/// subscribe to (ids it cannot name) are left out.
fn owned_partitions(owned: &[TopicPartitions], subscribed: &BTreeSet<String>) -> Partitions {
    let by_id: BTreeMap<uuid::Uuid, &String> = subscribed.iter().map(|t| (topics::topic_id(t), t)).collect();
    owned
        .iter()
        .filter_map(|t| by_id.get(&t.topic_id).map(|name| (*name, &t.partitions)))
        .flat_map(|(name, partitions)| partitions.iter().map(move |&p| (name.clone(), p)))
        .collect()
}

/// How long a group's partition counts are trusted before a heartbeat looks them up
/// again: partitions added to a topic reach the assignment within this long.
const COUNTS_TRUSTED_FOR_MS: u64 = 5_000;

/// The topics the group and this heartbeat subscribe to; and their partition counts,
/// looked up when the group's are older than [`COUNTS_TRUSTED_FOR_MS`], the heartbeat
/// names a topic the group has none for or brings a new regular expression (`None`: the
/// group's own still hold). Where a member subscribes by regular expression every topic
/// the caller may see is looked up, in one listing. A topic that does not exist (or
/// could not be named) has none; one the caller may not see is left out.
async fn partition_counts(
    kafka: &Kafka,
    group_id: &str,
    subscribed: Option<&BTreeSet<String>>,
    new_regex: bool,
    now: u64,
) -> Result<(BTreeSet<String>, Option<BTreeMap<String, u32>>), ServiceError> {
    let (mut wanted, fresh, every_topic) = match kafka.groups.consumer_lock().get(group_id) {
        Some(group) => {
            let known = |t: &String| group.topics.contains_key(t);
            let fresh = now < group.topics_checked_ms.saturating_add(COUNTS_TRUSTED_FOR_MS)
                && !new_regex
                && subscribed.is_none_or(|topics| topics.iter().all(known));
            (group.subscribed_topics(), fresh, new_regex || group.has_regex())
        }
        None => (BTreeSet::new(), false, new_regex),
    };
    wanted.extend(subscribed.into_iter().flatten().cloned());
    if fresh {
        return Ok((wanted, None));
    }
    if every_topic {
        let all = topics::all_topics(kafka).await?;
        wanted.extend(all.keys().cloned());
        return Ok((wanted, Some(all.into_iter().collect())));
    }
    let mut counts = BTreeMap::new();
    for topic in &wanted {
        let count = match topics::find(kafka, topic).await? {
            Found::Partitions(n) => n,
            Found::Invalid => 0,
            // Another member's topic this caller's token does not reach: its count as
            // that member's heartbeats find it.
            Found::Hidden => continue,
        };
        counts.insert(topic.clone(), count);
    }
    Ok((wanted, Some(counts)))
}

/// An assignment as the answer carries it: partitions by topic id.
fn assignment(partitions: &Partitions) -> Assignment {
    let topic_partitions = by_topic(partitions)
        .into_iter()
        .map(|(topic, partitions)| {
            consumer_group_heartbeat_response::TopicPartitions::default()
                .with_topic_id(topics::topic_id(topic))
                .with_partitions(partitions)
        })
        .collect();
    Assignment::default().with_topic_partitions(topic_partitions)
}
