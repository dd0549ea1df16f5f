//! DescribeGroups and ListGroups: the groups this coordinator has in memory, as they
//! are (classic groups, and consumer-protocol groups described in classic terms), and
//! those known only by their committed offsets, as `Empty` (Kafka keeps a group whose
//! members left, and one whose offsets were committed without membership).

use std::collections::HashMap;

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DescribeGroupsRequest, DescribeGroupsResponse, GroupId, ListGroupsRequest, ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_service::ServiceError;

use super::state::Phase;
use super::{consumer_describe, consumer_session_ms, may_use_groups, not_coordinator, offsets, CONSUMER};
use crate::{authorized, Kafka};

/// The protocol type and group type of share groups.
const SHARE: &str = "share";

/// DescribeGroups: the groups this coordinator has in memory as they are (a share group
/// is GROUP_ID_NOT_FOUND: ShareGroupDescribe describes it); a group it does
/// not (its members gone before a restart, or it never had any: offsets committed
/// without membership) is `Empty` when it has committed offsets, as Kafka keeps such a
/// group, and `Dead` when it has none.
pub async fn describe(kafka: &Kafka, request: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let asked = request.include_authorized_operations;
    let moved: Vec<Option<i16>> = request.groups.iter().map(|id| not_coordinator(kafka, &id.0)).collect();
    // The groups not in memory are looked for by their offsets, over the partitions
    // listed once for all of them.
    let unknown: Vec<String> = request
        .groups
        .iter()
        .zip(&moved)
        .filter(|(id, moved)| {
            let held = kafka.groups.holds(&id.0, consumer_session_ms(kafka)) || kafka.shares.holds(&id.0);
            moved.is_none() && !held
        })
        .map(|(id, _)| id.0.to_string())
        .collect();
    let mut stored = HashMap::new();
    if !unknown.is_empty() {
        let code = |e: ServiceError| crate::error::code(&e);
        let streams = offsets::partition_streams(kafka).await.map_err(code);
        for id in unknown {
            let found = match &streams {
                Ok(streams) => offsets::has_offsets(kafka, streams, &id).await.map_err(code),
                Err(error) => Err(*error),
            };
            stored.insert(id, found);
        }
    }
    let consumer_groups = kafka.groups.live_consumer_groups(consumer_session_ms(kafka));
    let groups = kafka.groups.lock();
    let mut described = request
        .groups
        .into_iter()
        .zip(moved)
        .map(|(id, moved)| {
            if let Some(error) = moved {
                return DescribedGroup::default().with_group_id(id).with_error_code(error);
            }
            if kafka.shares.holds(&id.0) {
                // Kafka describes share groups with ShareGroupDescribe only.
                return DescribedGroup::default()
                    .with_group_id(id)
                    .with_group_state(StrBytes::from_static_str("Dead"))
                    .with_error_code(ResponseError::GroupIdNotFound.code());
            }
            if let Some(group) = consumer_groups.get(&*id.0) {
                return consumer_describe::classic_description(DescribedGroup::default().with_group_id(id), group);
            }
            let Some(group) = groups.get(&id.0.to_string()) else {
                let described = DescribedGroup::default().with_group_id(id.clone());
                return match stored.get(&id.0.to_string()) {
                    Some(Err(error)) => described.with_error_code(*error),
                    Some(Ok(true)) => described
                        .with_group_state(StrBytes::from_static_str(Phase::Empty.name()))
                        .with_protocol_type(StrBytes::from_static_str(CONSUMER)),
                    // Gone meanwhile, or without offsets.
                    _ => described.with_group_state(StrBytes::from_static_str("Dead")),
                };
            };
            let protocol = group.protocol.clone().unwrap_or_default();
            let members = group
                .members
                .iter()
                .map(|(member_id, m)| {
                    let metadata = m.metadata_for(&protocol);
                    DescribedGroupMember::default()
                        .with_member_id(StrBytes::from_string(member_id.clone()))
                        .with_group_instance_id(m.group_instance_id.clone().map(StrBytes::from_string))
                        .with_client_id(StrBytes::from_string(m.client_id.clone()))
                        .with_client_host(StrBytes::from_string(m.client_host.clone()))
                        .with_member_metadata(metadata)
                        .with_member_assignment(m.assignment.clone())
                })
                .collect();
            DescribedGroup::default()
                .with_group_id(id)
                .with_group_state(StrBytes::from_static_str(group.phase.name()))
                .with_protocol_type(StrBytes::from_string(group.protocol_type.clone()))
                .with_protocol_data(StrBytes::from_string(protocol))
                .with_members(members)
        })
        .collect::<Vec<_>>();
    drop(groups);
    if asked {
        for group in described.iter_mut().filter(|group| group.error_code == 0) {
            group.authorized_operations = authorized::group(kafka);
        }
    }
    DescribeGroupsResponse::default().with_groups(described)
}

/// The groups this broker coordinates (a cluster's admin client asks every broker): those
/// it has in memory, and those with committed offsets only, listed `Empty` as Kafka keeps
/// them (their members gone before a restart, or offsets committed without membership).
pub async fn list(kafka: &Kafka, request: ListGroupsRequest) -> ListGroupsResponse {
    if !may_use_groups(kafka) {
        return ListGroupsResponse::default().with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let stored = match offsets::groups_with_offsets(kafka).await {
        Ok(stored) => stored,
        Err(e) => return ListGroupsResponse::default().with_error_code(crate::error::code(&e)),
    };
    // (id, protocol type, state, group type)
    let mut all: Vec<(String, String, &'static str, &'static str)> = Vec::new();
    let consumer_groups = kafka.groups.live_consumer_groups(consumer_session_ms(kafka));
    all.extend(consumer_groups.iter().map(|(id, g)| (id.clone(), CONSUMER.to_string(), g.state_name(), "consumer")));
    drop(consumer_groups);
    let groups = kafka.groups.lock();
    all.extend(groups.iter().map(|(id, g)| (id.clone(), g.protocol_type.clone(), g.phase.name(), "classic")));
    drop(groups);
    let shares = kafka.shares.listed(consumer_session_ms(kafka));
    all.extend(shares.into_iter().map(|(id, state)| (id, SHARE.to_string(), state, SHARE)));
    let offsets_only: Vec<String> =
        stored.into_iter().filter(|id| !all.iter().any(|(known, ..)| known == id)).collect();
    all.extend(offsets_only.into_iter().map(|id| (id, CONSUMER.to_string(), Phase::Empty.name(), "classic")));
    let listed = all
        .into_iter()
        .filter(|(id, _, _, _)| kafka.brokers.coordinates(id))
        .filter(|(_, _, state, _)| {
            request.states_filter.is_empty() || request.states_filter.iter().any(|s| &**s == *state)
        })
        .filter(|(_, _, _, kind)| {
            request.types_filter.is_empty() || request.types_filter.iter().any(|t| t.eq_ignore_ascii_case(kind))
        })
        .map(|(id, protocol_type, state, group_type)| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state))
                .with_group_type(StrBytes::from_static_str(group_type))
        })
        .collect();
    ListGroupsResponse::default().with_groups(listed)
}
