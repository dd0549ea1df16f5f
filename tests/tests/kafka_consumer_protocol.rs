//! The consumer group protocol (KIP-848) over a real socket, where clients do not go:
//! what a heartbeat is refused for (an empty member id at version 1, an unknown assignor,
//! a regular expression that does not compile, an unknown member, a wrong epoch, a group of the other
//! protocol), the assignment by topic id a join gets and the topic found by that id in
//! Metadata, commits and offset reads (OffsetFetch 8-9) checked against the member's
//! epoch, and leaving.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId, JoinGroupRequest, JoinGroupResponse, MetadataRequest, MetadataResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_tests::kafka_client::KafkaConn;
use shale_tests::TestServer;

const GROUP: &str = "kip848";

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A join of `member` subscribing to `topic`.
fn join(member: &str, topic: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(text(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(text(topic))]))
        .with_topic_partitions(Some(Vec::new()))
}

async fn heartbeat(conn: &mut KafkaConn, request: &ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse {
    conn.call(ApiKey::ConsumerGroupHeartbeat, 1, request).await.unwrap()
}

async fn commit(conn: &mut KafkaConn, member: &str, epoch: i32) -> i16 {
    let partition = OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(1);
    let topic =
        OffsetCommitRequestTopic::default().with_name(TopicName(text("orders"))).with_partitions(vec![partition]);
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_generation_id_or_member_epoch(epoch)
        .with_member_id(text(member))
        .with_topics(vec![topic]);
    let response: OffsetCommitResponse = conn.call(ApiKey::OffsetCommit, 8, &request).await.unwrap();
    response.topics[0].partitions[0].error_code
}

/// OffsetFetch (version 9) of each of `groups`, named with the member asking and its epoch:
/// each group's error and its `(topic, partition, offset)`s, every topic asked.
async fn fetch_offsets(
    conn: &mut KafkaConn,
    groups: &[(&str, Option<&str>, i32)],
) -> Vec<(i16, Vec<(String, i32, i64)>)> {
    let groups = groups
        .iter()
        .map(|&(group, member, epoch)| {
            OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(text(group)))
                .with_member_id(member.map(text))
                .with_member_epoch(epoch)
                .with_topics(None)
        })
        .collect();
    let request = OffsetFetchRequest::default().with_groups(groups);
    let response: OffsetFetchResponse = conn.call(ApiKey::OffsetFetch, 9, &request).await.unwrap();
    response
        .groups
        .into_iter()
        .map(|g| {
            let offsets = g.topics.iter().flat_map(|t| {
                t.partitions.iter().map(|p| (t.name.0.to_string(), p.partition_index, p.committed_offset))
            });
            (g.error_code, offsets.collect())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_protocol_assigns_by_topic_id_checks_epochs_and_refuses_bad_heartbeats() {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("orders", 3).await.unwrap(), 0);
    assert_eq!(conn.produce("orders", 0, &["first".to_string()]).await.unwrap(), (0, 0));
    let code = |r: &ConsumerGroupHeartbeatResponse| r.error_code;

    // Refused before anything changes.
    assert_eq!(code(&heartbeat(&mut conn, &join("", "orders")).await), ResponseError::InvalidRequest.code());
    let assignor = join("m1", "orders").with_server_assignor(Some(text("sticky")));
    assert_eq!(code(&heartbeat(&mut conn, &assignor).await), ResponseError::UnsupportedAssignor.code());
    let regex = join("m1", "orders").with_subscribed_topic_regex(Some(text("(ord")));
    assert_eq!(code(&heartbeat(&mut conn, &regex).await), ResponseError::InvalidRegularExpression.code());
    let unknown = join("nobody", "orders").with_member_epoch(4);
    assert_eq!(code(&heartbeat(&mut conn, &unknown).await), ResponseError::UnknownMemberId.code());

    // A join: every partition, by topic id, at the group's epoch.
    let joined = heartbeat(&mut conn, &join("m1", "orders")).await;
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    assert!(joined.member_epoch > 0 && joined.heartbeat_interval_ms > 0);
    let assignment = joined.assignment.expect("a join is answered with its assignment");
    let [topic] = &assignment.topic_partitions[..] else { panic!("{assignment:?}") };
    assert_eq!(topic.partitions, vec![0, 1, 2]);
    let by_id = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_topic_id(topic.topic_id).with_name(None)]));
    let found: MetadataResponse = conn.call(ApiKey::Metadata, 12, &by_id).await.unwrap();
    assert_eq!(found.topics[0].name.as_ref().map(|n| n.0.to_string()), Some("orders".to_string()));
    assert_eq!(found.topics[0].partitions.len(), 3);
    // Java's admin client sends an empty name, not a null one, beside the id.
    let empty_name = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_topic_id(topic.topic_id)
        .with_name(Some(TopicName(text(""))))]));
    let found: MetadataResponse = conn.call(ApiKey::Metadata, 12, &empty_name).await.unwrap();
    assert_eq!(found.topics[0].topic_id, topic.topic_id);
    assert_eq!(found.topics[0].name.as_ref().map(|n| n.0.to_string()), Some("orders".to_string()));
    let nowhere = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_topic_id(uuid::Uuid::from_u128(7))
        .with_name(None)]));
    let missing: MetadataResponse = conn.call(ApiKey::Metadata, 12, &nowhere).await.unwrap();
    assert_eq!(missing.topics[0].error_code, ResponseError::UnknownTopicId.code());

    // The next heartbeat, reporting what it owns: same epoch, nothing new to send.
    let owned = TopicPartitions::default().with_topic_id(topic.topic_id).with_partitions(vec![0, 1, 2]);
    let steady = join("m1", "orders")
        .with_member_epoch(joined.member_epoch)
        .with_subscribed_topic_names(None)
        .with_topic_partitions(Some(vec![owned]));
    let again = heartbeat(&mut conn, &steady).await;
    assert_eq!((again.error_code, again.member_epoch, again.assignment.is_none()), (0, joined.member_epoch, true));
    let fenced = steady.clone().with_member_epoch(joined.member_epoch + 5);
    assert_eq!(code(&heartbeat(&mut conn, &fenced).await), ResponseError::FencedMemberEpoch.code());

    // Commits: at the member's epoch, not an older one, not by a stranger.
    assert_eq!(commit(&mut conn, "m1", joined.member_epoch).await, 0);
    assert_eq!(commit(&mut conn, "m1", joined.member_epoch - 1).await, ResponseError::StaleMemberEpoch.code());
    assert_eq!(commit(&mut conn, "m2", joined.member_epoch).await, ResponseError::UnknownMemberId.code());

    // OffsetFetch 9 names the member asking: at its epoch it reads, at an older one or as
    // a stranger it is refused; naming no member (an admin client) always reads. Several
    // groups in one request (8 on) are each answered on their own.
    let epoch = joined.member_epoch;
    let read = fetch_offsets(&mut conn, &[(GROUP, Some("m1"), epoch), ("other", None, -1), (GROUP, None, -1)]).await;
    let committed = vec![("orders".to_string(), 0, 1)];
    assert_eq!(read, vec![(0, committed.clone()), (0, Vec::new()), (0, committed.clone())]);
    let stale = fetch_offsets(&mut conn, &[(GROUP, Some("m1"), epoch - 1), (GROUP, Some("m2"), epoch)]).await;
    let refused = |error: ResponseError| (error.code(), Vec::new());
    assert_eq!(stale, vec![refused(ResponseError::StaleMemberEpoch), refused(ResponseError::UnknownMemberId)]);

    // A classic join is refused while the group has consumer-protocol members.
    let classic = JoinGroupRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default().with_name(text("range"))]);
    let refused: JoinGroupResponse = conn.call(ApiKey::JoinGroup, 5, &classic).await.unwrap();
    assert_eq!(refused.error_code, ResponseError::GroupIdNotFound.code());

    let describe = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(GROUP))]);
    let described: ConsumerGroupDescribeResponse =
        conn.call(ApiKey::ConsumerGroupDescribe, 0, &describe).await.unwrap();
    let group = &described.groups[0];
    assert_eq!((group.error_code, group.group_state.as_str(), group.members.len()), (0, "Stable", 1));
    assert_eq!(group.assignor_name.as_str(), "uniform");
    // Authorized operations only when asked: with access control off, every operation
    // Kafka supports on a group (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS).
    assert_eq!(group.authorized_operations, i32::MIN);
    let asked = describe.clone().with_include_authorized_operations(true);
    let described: ConsumerGroupDescribeResponse = conn.call(ApiKey::ConsumerGroupDescribe, 0, &asked).await.unwrap();
    assert_eq!(described.groups[0].authorized_operations, 1 << 3 | 1 << 6 | 1 << 8 | 1 << 10 | 1 << 11);

    // Leaving: the group is gone (its offsets stay), and describing it falls back.
    let leave = steady.with_member_epoch(-1).with_topic_partitions(None);
    let left = heartbeat(&mut conn, &leave).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -1));
    let described: ConsumerGroupDescribeResponse =
        conn.call(ApiKey::ConsumerGroupDescribe, 0, &describe).await.unwrap();
    assert_eq!(described.groups[0].error_code, ResponseError::GroupIdNotFound.code());
    server.stop().await;
}

/// A static member (`group.instance.id`) leaving with epoch -2 keeps its place: a new
/// member id with its instance id takes its epoch and partitions, and another member
/// with that instance id while it is present is UNRELEASED_INSTANCE_ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_comes_back_under_a_new_id_to_its_partitions() {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("statics", 2).await.unwrap(), 0);
    let with_instance = |member: &str| join(member, "statics").with_instance_id(Some(text("host-1")));

    let first = heartbeat(&mut conn, &with_instance("s1")).await;
    assert_eq!(first.error_code, 0, "{:?}", first.error_message);
    let taken = heartbeat(&mut conn, &with_instance("s2")).await;
    assert_eq!(taken.error_code, ResponseError::UnreleasedInstanceId.code());

    let away = with_instance("s1").with_member_epoch(-2).with_subscribed_topic_names(None);
    assert_eq!(heartbeat(&mut conn, &away).await.member_epoch, -2);
    let back = heartbeat(&mut conn, &with_instance("s2")).await;
    assert_eq!((back.error_code, back.member_epoch), (0, first.member_epoch));
    let partitions = |r: &ConsumerGroupHeartbeatResponse| r.assignment.as_ref().map(|a| a.topic_partitions.clone());
    assert_eq!(partitions(&back), partitions(&first));
    server.stop().await;
}
