//! Consumer groups' offsets over a real socket, as clients and admin tools use them: a
//! negative committed offset (a client resetting a partition) clears the group's offset,
//! a commit's metadata string is kept with its offset (up to Kafka's 4,096 bytes; a
//! transactional commit answers each partition on its own),
//! an OffsetFetch for every topic answers only the partitions a group has offsets on,
//! OffsetDelete keeps the offsets on topics a group's members subscribe to, a group
//! known only by its committed offsets is listed and described as `Empty`, and a member
//! that joins without an id from JoinGroup version 4 is given one to join with
//! (MEMBER_ID_REQUIRED), leaving no member behind until it does, and a static member
//! away through a round stays a member and comes back to its assignment without one.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolSubscription, DescribeGroupsRequest, DescribeGroupsResponse, GroupId, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
    SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::ResponseError;
use shale_tests::kafka_client::KafkaConn;
use shale_tests::TestServer;

/// A server with Kafka's listener, a connection to it, and `topics` (name, partitions),
/// each partition holding `records` records.
async fn server_with(topics: &[(&str, i32)], records: usize) -> (TestServer, KafkaConn) {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(10)).await.unwrap();
    let values: Vec<String> = (0..records).map(|i| format!("v{i}")).collect();
    for &(topic, partitions) in topics {
        assert_eq!(conn.create_topic(topic, partitions).await.unwrap(), 0);
        for partition in 0..partitions {
            assert_eq!(conn.produce(topic, partition, &values).await.unwrap(), (0, 0));
        }
    }
    (server, conn)
}

fn group(name: &'static str) -> GroupId {
    GroupId(StrBytes::from_static_str(name))
}

#[tokio::test]
async fn a_negative_committed_offset_clears_the_groups_offset() {
    let (server, mut conn) = server_with(&[("reset", 1)], 3).await;
    assert_eq!(conn.commit("g", "reset", 0, 2).await.unwrap(), 0);
    assert_eq!(conn.committed("g", "reset", 0).await.unwrap(), (0, 2));
    // KafkaJS resets a partition to its default by committing -2 (earliest) or -1 (latest).
    for sentinel in [-2, -1] {
        assert_eq!(conn.commit("g", "reset", 0, sentinel).await.unwrap(), 0);
        assert_eq!(conn.committed("g", "reset", 0).await.unwrap(), (0, -1), "after committing {sentinel}");
    }
    assert_eq!(conn.commit("g", "reset", 0, 1).await.unwrap(), 0);
    assert_eq!(conn.committed("g", "reset", 0).await.unwrap(), (0, 1));
    // Another group's offset is not touched; an unknown topic is refused either way.
    assert_eq!(conn.commit("other", "reset", 0, 3).await.unwrap(), 0);
    assert_eq!(conn.commit("g", "reset", 0, -1).await.unwrap(), 0);
    assert_eq!(conn.committed("other", "reset", 0).await.unwrap(), (0, 3));
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(conn.commit("g", "missing", 0, -1).await.unwrap(), unknown);
    assert_eq!(conn.commit("g", "missing", 0, 1).await.unwrap(), unknown);
    server.stop().await;
}

/// Commits `offset` with `metadata` for group "m" on partition 0 of "meta": the error code.
async fn commit_with_metadata(conn: &mut KafkaConn, offset: i64, metadata: Option<String>) -> i16 {
    let p = OffsetCommitRequestPartition::default()
        .with_committed_offset(offset)
        .with_committed_metadata(metadata.map(StrBytes::from_string));
    let topic = OffsetCommitRequestTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("meta")))
        .with_partitions(vec![p]);
    let request = OffsetCommitRequest::default()
        .with_group_id(group("m"))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![topic]);
    let response: OffsetCommitResponse = conn.call(ApiKey::OffsetCommit, 8, &request).await.unwrap();
    response.topics[0].partitions[0].error_code
}

/// Group "m"'s offset and metadata on partition 0 of "meta", as OffsetFetch answers at
/// version 7 (one group) and at 8 (groups), which must agree.
async fn committed_with_metadata(conn: &mut KafkaConn) -> (i64, String) {
    let wanted = kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("meta")))
        .with_partition_indexes(vec![0]);
    let one = OffsetFetchRequest::default().with_group_id(group("m")).with_topics(Some(vec![wanted]));
    let one: OffsetFetchResponse = conn.call(ApiKey::OffsetFetch, 7, &one).await.unwrap();
    let p = &one.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let answer = (p.committed_offset, p.metadata.as_deref().unwrap_or("(null)").to_string());
    let wanted = OffsetFetchRequestTopics::default()
        .with_name(TopicName(StrBytes::from_static_str("meta")))
        .with_partition_indexes(vec![0]);
    let asked = OffsetFetchRequestGroup::default().with_group_id(group("m")).with_topics(Some(vec![wanted]));
    let groups = OffsetFetchRequest::default().with_groups(vec![asked]);
    let groups: OffsetFetchResponse = conn.call(ApiKey::OffsetFetch, 8, &groups).await.unwrap();
    let p = &groups.groups[0].topics[0].partitions[0];
    assert_eq!((p.committed_offset, p.metadata.as_deref().unwrap_or("(null)")), (answer.0, answer.1.as_str()));
    answer
}

/// A commit's metadata string comes back with its offset, as Kafka keeps it: replaced by
/// the next commit (none is stored as empty); over Kafka's 4,096 bytes it is
/// OFFSET_METADATA_TOO_LARGE and the stored offset and metadata stay as they were.
#[tokio::test]
async fn a_commits_metadata_is_kept_with_its_offset() {
    let (server, mut conn) = server_with(&[("meta", 1)], 5).await;
    assert_eq!(commit_with_metadata(&mut conn, 2, Some("checkpoint 7".into())).await, 0);
    assert_eq!(committed_with_metadata(&mut conn).await, (2, "checkpoint 7".to_string()));
    let largest = "x".repeat(4096);
    assert_eq!(commit_with_metadata(&mut conn, 3, Some(largest.clone())).await, 0);
    assert_eq!(committed_with_metadata(&mut conn).await, (3, largest.clone()));
    let too_large = ResponseError::OffsetMetadataTooLarge.code();
    assert_eq!(commit_with_metadata(&mut conn, 4, Some("x".repeat(4097))).await, too_large);
    assert_eq!(committed_with_metadata(&mut conn).await, (3, largest), "nothing of the refused commit stored");
    assert_eq!(commit_with_metadata(&mut conn, 4, None).await, 0);
    assert_eq!(committed_with_metadata(&mut conn).await, (4, String::new()), "none is empty, as Kafka stores it");
    server.stop().await;
}

/// A TxnOffsetCommit answers each partition on its own: a negative offset is
/// INVALID_COMMIT_OFFSET_SIZE and metadata over 4,096 bytes OFFSET_METADATA_TOO_LARGE,
/// while the partitions around them are staged and, once the transaction commits, read
/// back with their metadata.
#[tokio::test]
async fn a_transactional_commit_refuses_each_bad_partition_and_keeps_the_others_metadata() {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{ProducerId, TransactionalId, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
    let (server, mut conn) = server_with(&[("meta", 4)], 5).await;
    let (error, id, epoch) = conn.init_transactional("tx-meta").await.unwrap();
    assert_eq!(error, 0);
    let transactional_id = || TransactionalId(StrBytes::from_static_str("tx-meta"));
    let producer = shale_tests::kafka_client::TxnProducer { id, epoch, sequence: 0 };
    assert_eq!(conn.add_offsets("tx-meta", producer, "m").await.unwrap(), 0);
    let partition = |index: i32, offset: i64, metadata: String| {
        TxnOffsetCommitRequestPartition::default()
            .with_partition_index(index)
            .with_committed_offset(offset)
            .with_committed_metadata(Some(StrBytes::from_string(metadata)))
    };
    let partitions = vec![
        partition(0, 1, "first".into()),
        partition(1, -1, "negative".into()),
        partition(2, 2, "x".repeat(4097)),
        partition(3, 3, "last".into()),
    ];
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(transactional_id())
        .with_group_id(group("m"))
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("meta")))
            .with_partitions(partitions)]);
    let answer: TxnOffsetCommitResponse = conn.call(ApiKey::TxnOffsetCommit, 3, &request).await.unwrap();
    let codes: Vec<i16> = answer.topics[0].partitions.iter().map(|p| p.error_code).collect();
    let (negative, too_large) =
        (ResponseError::InvalidCommitOffsetSize.code(), ResponseError::OffsetMetadataTooLarge.code());
    assert_eq!(codes, vec![0, negative, too_large, 0]);
    assert_eq!(conn.end_transaction("tx-meta", producer, true).await.unwrap(), 0);
    let wanted = kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("meta")))
        .with_partition_indexes(vec![0, 1, 2, 3]);
    let fetch = OffsetFetchRequest::default().with_group_id(group("m")).with_topics(Some(vec![wanted]));
    let fetched: OffsetFetchResponse = conn.call(ApiKey::OffsetFetch, 7, &fetch).await.unwrap();
    let stored: Vec<(i64, &str)> = fetched.topics[0]
        .partitions
        .iter()
        .map(|p| (p.committed_offset, p.metadata.as_deref().unwrap_or("(null)")))
        .collect();
    assert_eq!(stored, vec![(1, "first"), (-1, ""), (-1, ""), (3, "last")]);
    server.stop().await;
}

#[tokio::test]
async fn an_offset_fetch_for_every_topic_answers_the_partitions_the_group_has_offsets_on() {
    let (server, mut conn) = server_with(&[("left", 3), ("right", 2), ("untouched", 4)], 8).await;
    assert_eq!(conn.commit("g", "left", 1, 5).await.unwrap(), 0);
    assert_eq!(conn.commit("g", "right", 0, 7).await.unwrap(), 0);
    assert_eq!(conn.commit("g", "right", 1, 2).await.unwrap(), 0);
    assert_eq!(conn.commit("g", "right", 1, -1).await.unwrap(), 0, "committed, then reset");
    assert_eq!(conn.commit("other", "untouched", 0, 1).await.unwrap(), 0);

    let every_topic = |name| OffsetFetchRequest::default().with_group_id(group(name)).with_topics(None);
    let response: OffsetFetchResponse = conn.call(ApiKey::OffsetFetch, 7, &every_topic("g")).await.unwrap();
    assert_eq!(response.error_code, 0);
    let mut answered: Vec<(String, i32, i64, i16)> = response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| (t.name.0.to_string(), p.partition_index, p.committed_offset, p.error_code))
        })
        .collect();
    answered.sort();
    assert_eq!(answered, vec![("left".into(), 1, 5, 0), ("right".into(), 0, 7, 0)]);
    // A group with no offsets anywhere: no topics at all.
    let response: OffsetFetchResponse = conn.call(ApiKey::OffsetFetch, 7, &every_topic("nobody")).await.unwrap();
    assert_eq!((response.error_code, response.topics.len()), (0, 0));
    server.stop().await;
}

#[tokio::test]
async fn offset_delete_removes_a_groups_offsets_except_on_the_topics_its_members_read() {
    let (server, mut conn) = server_with(&[("read", 2), ("other", 2)], 4).await;
    for (group, topic, partition, offset) in
        [("g", "read", 0, 1), ("g", "read", 1, 2), ("busy", "read", 0, 3), ("busy", "other", 0, 4)]
    {
        assert_eq!(conn.commit(group, topic, partition, offset).await.unwrap(), 0);
    }
    let delete = |name, topic: &'static str, partition: i32| {
        let partitions = vec![OffsetDeleteRequestPartition::default().with_partition_index(partition)];
        let topic = OffsetDeleteRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_partitions(partitions);
        OffsetDeleteRequest::default().with_group_id(group(name)).with_topics(vec![topic])
    };
    // One partition's offset goes; the group's other offsets stay.
    let response: OffsetDeleteResponse = conn.call(ApiKey::OffsetDelete, 0, &delete("g", "read", 0)).await.unwrap();
    assert_eq!((response.error_code, response.topics[0].partitions[0].error_code), (0, 0));
    assert_eq!(conn.committed("g", "read", 0).await.unwrap(), (0, -1));
    assert_eq!(conn.committed("g", "read", 1).await.unwrap(), (0, 2));
    // A group with neither members nor an offset there.
    let response: OffsetDeleteResponse = conn.call(ApiKey::OffsetDelete, 0, &delete("ghost", "read", 0)).await.unwrap();
    assert_eq!(response.error_code, ResponseError::GroupIdNotFound.code());

    // A member of "busy" subscribes to "read": its offsets there stay, "other"'s go.
    let mut subscription = BytesMut::new();
    subscription.extend_from_slice(&0i16.to_be_bytes());
    ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_static_str("read")])
        .encode(&mut subscription, 0)
        .unwrap();
    let join = JoinGroupRequest::default()
        .with_group_id(group("busy"))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(subscription.freeze())]);
    let joined = conn.join_group(5, &join).await.unwrap();
    assert_eq!(joined.error_code, 0);
    let response: OffsetDeleteResponse = conn.call(ApiKey::OffsetDelete, 0, &delete("busy", "read", 0)).await.unwrap();
    let subscribed = ResponseError::GroupSubscribedToTopic.code();
    assert_eq!((response.error_code, response.topics[0].partitions[0].error_code), (0, subscribed));
    assert_eq!(conn.committed("busy", "read", 0).await.unwrap(), (0, 3));
    let response: OffsetDeleteResponse = conn.call(ApiKey::OffsetDelete, 0, &delete("busy", "other", 0)).await.unwrap();
    assert_eq!((response.error_code, response.topics[0].partitions[0].error_code), (0, 0));
    assert_eq!(conn.committed("busy", "other", 0).await.unwrap(), (0, -1));
    server.stop().await;
}

#[tokio::test]
async fn groups_known_only_by_their_offsets_are_listed_and_described_empty() {
    let (server, mut conn) = server_with(&[("kept", 2)], 2).await;
    // Offsets committed without membership (as admin tools and self-assigned consumers do).
    assert_eq!(conn.commit("offsets-only", "kept", 1, 2).await.unwrap(), 0);

    let list = |states: Vec<&'static str>| {
        ListGroupsRequest::default().with_states_filter(states.into_iter().map(StrBytes::from_static_str).collect())
    };
    let listed: ListGroupsResponse = conn.call(ApiKey::ListGroups, 4, &list(vec![])).await.unwrap();
    assert_eq!(listed.error_code, 0);
    let found: Vec<(String, String, String)> = listed
        .groups
        .iter()
        .map(|g| (g.group_id.0.to_string(), g.protocol_type.to_string(), g.group_state.to_string()))
        .collect();
    assert_eq!(found, vec![("offsets-only".into(), "consumer".into(), "Empty".into())]);
    let stable: ListGroupsResponse = conn.call(ApiKey::ListGroups, 4, &list(vec!["Stable"])).await.unwrap();
    assert!(stable.groups.is_empty(), "filtered out by state");

    let describe = DescribeGroupsRequest::default().with_groups(vec![group("offsets-only"), group("never")]);
    let described: DescribeGroupsResponse = conn.call(ApiKey::DescribeGroups, 5, &describe).await.unwrap();
    let states: Vec<(i16, String, String, usize)> = described
        .groups
        .iter()
        .map(|g| (g.error_code, g.group_state.to_string(), g.protocol_type.to_string(), g.members.len()))
        .collect();
    assert_eq!(states, vec![(0, "Empty".into(), "consumer".into(), 0), (0, "Dead".into(), String::new(), 0)]);
    server.stop().await;
}

/// A consumer's JoinGroup to `name` with no member id yet (and `instance` as its static
/// instance id, if any).
fn join_request(name: &'static str, instance: Option<&'static str>) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group(name))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_group_instance_id(instance.map(StrBytes::from_static_str))
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default().with_name(StrBytes::from_static_str("range"))])
}

/// The members `name` has, as DescribeGroups lists them.
async fn members(conn: &mut KafkaConn, name: &'static str) -> Vec<String> {
    let describe = DescribeGroupsRequest::default().with_groups(vec![group(name)]);
    let described: DescribeGroupsResponse = conn.call(ApiKey::DescribeGroups, 5, &describe).await.unwrap();
    described.groups[0].members.iter().map(|m| m.member_id.to_string()).collect()
}

#[tokio::test]
async fn a_join_without_a_member_id_is_given_one_to_join_with_from_version_4_and_no_other() {
    let (server, mut conn) = server_with(&[], 0).await;
    // Version 4: the id comes with MEMBER_ID_REQUIRED, and nothing joins yet, however often
    // the first join is sent (a client whose answer was lost sends it again).
    let request = join_request("kip-394", None);
    let mut given = Vec::new();
    for _ in 0..2 {
        let answer: JoinGroupResponse = conn.call(ApiKey::JoinGroup, 4, &request).await.unwrap();
        assert_eq!((answer.error_code, answer.generation_id), (ResponseError::MemberIdRequired.code(), -1));
        assert!(!answer.member_id.is_empty(), "the answer gives the id to join with");
        given.push(answer.member_id.to_string());
    }
    assert_ne!(given[0], given[1], "each join without an id is given an id of its own");
    assert!(members(&mut conn, "kip-394").await.is_empty(), "no member until one joins with its id");
    // An id the group did not give is refused, at any version, and joins nothing.
    for version in [3, 4] {
        let made_up = request.clone().with_member_id(StrBytes::from_static_str("made-up"));
        let answer: JoinGroupResponse = conn.call(ApiKey::JoinGroup, version, &made_up).await.unwrap();
        assert_eq!(answer.error_code, ResponseError::UnknownMemberId.code(), "version {version}");
    }
    assert!(members(&mut conn, "kip-394").await.is_empty());
    // Joining with the id it was given, the member is in the group under that id.
    let joined: JoinGroupResponse = conn
        .call(ApiKey::JoinGroup, 4, &request.clone().with_member_id(StrBytes::from_string(given[1].clone())))
        .await
        .unwrap();
    assert_eq!((joined.error_code, joined.member_id.to_string()), (0, given[1].clone()));
    assert!(joined.generation_id >= 1);
    assert_eq!(members(&mut conn, "kip-394").await, vec![given[1].clone()]);

    // Before version 4, and for a static member at any version, the first join takes the
    // member at once, as Kafka does.
    let old: JoinGroupResponse = conn.call(ApiKey::JoinGroup, 3, &join_request("old", None)).await.unwrap();
    assert_eq!(old.error_code, 0);
    assert_eq!(members(&mut conn, "old").await, vec![old.member_id.to_string()]);
    let static_member: JoinGroupResponse =
        conn.call(ApiKey::JoinGroup, 5, &join_request("static", Some("instance-1"))).await.unwrap();
    assert_eq!(static_member.error_code, 0);
    assert_eq!(members(&mut conn, "static").await, vec![static_member.member_id.to_string()]);
    server.stop().await;
}

/// A join to "kept" at version 5 by `member_id` ("" for a new one), static `instance` if
/// any, with a session of 30 s and rounds of 1 s: its answer.
async fn join_kept(conn: &mut KafkaConn, member_id: &str, instance: Option<&'static str>) -> JoinGroupResponse {
    let request = join_request("kept", instance)
        .with_member_id(StrBytes::from_string(member_id.to_string()))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(1_000);
    let answer = conn.join_group(5, &request).await.unwrap();
    assert_eq!(answer.error_code, 0, "{member_id} {instance:?}");
    answer
}

/// `member_id`'s SyncGroup to "kept" at `generation`, handing out `assignments` (the
/// leader's): the assignment it is answered.
async fn sync_kept(conn: &mut KafkaConn, member_id: &str, generation: i32, assignments: &[(&str, &str)]) -> String {
    let assignments = assignments
        .iter()
        .map(|(member, assignment)| {
            SyncGroupRequestAssignment::default()
                .with_member_id(StrBytes::from_string(member.to_string()))
                .with_assignment(bytes::Bytes::from(assignment.to_string()))
        })
        .collect();
    let request = SyncGroupRequest::default()
        .with_group_id(group("kept"))
        .with_generation_id(generation)
        .with_member_id(StrBytes::from_string(member_id.to_string()))
        .with_assignments(assignments);
    let answer: SyncGroupResponse = conn.call(ApiKey::SyncGroup, 5, &request).await.unwrap();
    assert_eq!(answer.error_code, 0, "{member_id}");
    String::from_utf8(answer.assignment.to_vec()).unwrap()
}

/// A static member (KIP-345) that is away while a round runs stays in the group, as Kafka
/// keeps it: the leader is handed it among the members and assigns it partitions. Back
/// under a new member id with its instance id, it takes that assignment at once, without
/// another round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_away_through_a_round_stays_and_comes_back_without_one() {
    let (server, _) = server_with(&[], 0).await;
    let connect = || KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(10));
    let (mut a, mut b, mut c) = (connect().await.unwrap(), connect().await.unwrap(), connect().await.unwrap());
    let first = join_kept(&mut a, "", Some("ia")).await;
    let id_a = first.member_id.to_string();
    sync_kept(&mut a, &id_a, first.generation_id, &[(&id_a, "all")]).await;
    let (joined_b, rejoined_a) =
        tokio::join!(join_kept(&mut b, "", Some("ib")), rejoin_when_asked(&mut a, &id_a, first.generation_id));
    let id_b = joined_b.member_id.to_string();
    let generation = rejoined_a.generation_id;
    sync_kept(&mut a, &id_a, generation, &[(&id_a, "a"), (&id_b, "b")]).await;
    assert_eq!(sync_kept(&mut b, &id_b, generation, &[]).await, "b");

    // b goes quiet (a static member sends no LeaveGroup); a dynamic member's join starts a
    // round, which ends at its 1 s deadline without b.
    let (joined_c, rejoined_a) =
        tokio::join!(join_kept(&mut c, "", None), rejoin_when_asked(&mut a, &id_a, generation));
    let id_c = joined_c.member_id.to_string();
    let generation = rejoined_a.generation_id;
    let listed: Vec<String> = rejoined_a.members.iter().map(|m| m.member_id.to_string()).collect();
    assert!(listed.contains(&id_b), "the leader is handed b among the members: {listed:?}");
    assert_eq!(listed.len(), 3);
    sync_kept(&mut a, &id_a, generation, &[(&id_a, "a"), (&id_b, "b again"), (&id_c, "c")]).await;
    assert_eq!(sync_kept(&mut c, &id_c, generation, &[]).await, "c");

    // b restarts: a new connection, no member id, its instance id.
    let mut b = connect().await.unwrap();
    let back = join_kept(&mut b, "", Some("ib")).await;
    assert_eq!(back.generation_id, generation, "no round: the generation stands");
    assert_ne!(back.member_id.to_string(), id_b, "a new member id");
    assert_eq!(sync_kept(&mut b, &back.member_id.to_string(), generation, &[]).await, "b again");
    assert_eq!(heartbeat_kept(&mut c, &id_c, generation).await, 0, "the others are not asked to rejoin");
    server.stop().await;
}

/// `member_id`'s Heartbeat to "kept" at `generation`: its error code.
async fn heartbeat_kept(conn: &mut KafkaConn, member_id: &str, generation: i32) -> i16 {
    let beat = HeartbeatRequest::default()
        .with_group_id(group("kept"))
        .with_generation_id(generation)
        .with_member_id(StrBytes::from_string(member_id.to_string()));
    let beat: HeartbeatResponse = conn.call(ApiKey::Heartbeat, 4, &beat).await.unwrap();
    beat.error_code
}

/// Static member "ia" heartbeats as `member_id` at `generation` until it is asked to
/// rejoin (a round has begun), then rejoins: its join's answer.
async fn rejoin_when_asked(conn: &mut KafkaConn, member_id: &str, generation: i32) -> JoinGroupResponse {
    let asked = ResponseError::RebalanceInProgress.code();
    for _ in 0..200 {
        if heartbeat_kept(conn, member_id, generation).await == asked {
            return join_kept(conn, member_id, Some("ia")).await;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no round began within 200 heartbeats");
}
