//! Share groups (KIP-932) over a real socket, where librdkafka's share consumer does not
//! go: what a heartbeat is refused for, a share session's epochs, records held by one
//! member refused to another's fetch and acknowledgement, a released record handed to
//! another member with its delivery count raised, the stored start offset, what admin
//! calls describe, list, delete and reset, and what `/metrics` shows of them.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kafka_protocol::messages::share_acknowledge_request::{self, AcknowledgePartition, AcknowledgeTopic};
use kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::share_fetch_response::AcquiredRecords;
use kafka_protocol::messages::{
    alter_share_group_offsets_request, delete_share_group_offsets_request, describe_share_group_offsets_request,
    describe_share_group_offsets_response, join_group_request, offset_delete_request, txn_offset_commit_request,
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, ApiKey, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, DeleteGroupsRequest, DeleteGroupsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeGroupsRequest, DescribeGroupsResponse, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse, GroupId, JoinGroupRequest, ListGroupsRequest, ListGroupsResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, ProducerId, ShareAcknowledgeRequest, ShareAcknowledgeResponse,
    ShareFetchRequest, ShareFetchResponse, ShareGroupDescribeRequest, ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName, TransactionalId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_tests::kafka_client::{KafkaConn, TxnProducer};
use shale_tests::TestServer;

const GROUP: &str = "workers";

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

async fn heartbeat(
    conn: &mut KafkaConn,
    member: &str,
    epoch: i32,
    topics: Option<&[&str]>,
) -> ShareGroupHeartbeatResponse {
    let request = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(text(member))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names(topics.map(|t| t.iter().map(|n| TopicName(text(n))).collect()));
    conn.call(ApiKey::ShareGroupHeartbeat, 1, &request).await.unwrap()
}

/// A fetch of partition 0 of the topic with `id` by `member` at session `epoch`.
async fn fetch(conn: &mut KafkaConn, member: &str, epoch: i32, id: uuid::Uuid) -> ShareFetchResponse {
    let partition = FetchPartition::default().with_partition_index(0).with_partition_max_bytes(1 << 20);
    let request = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(text(GROUP))))
        .with_member_id(Some(text(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_max_records(10)
        .with_batch_size(10)
        .with_topics(vec![FetchTopic::default().with_topic_id(id).with_partitions(vec![partition])]);
    conn.call(ApiKey::ShareFetch, 1, &request).await.unwrap()
}

/// `member`'s acknowledgement of offsets `first..=last` of partition 0 with `types`.
async fn acknowledge(
    conn: &mut KafkaConn,
    member: &str,
    epoch: i32,
    id: uuid::Uuid,
    (first, last, types): (i64, i64, Vec<i8>),
) -> ShareAcknowledgeResponse {
    let batch = share_acknowledge_request::AcknowledgementBatch::default()
        .with_first_offset(first)
        .with_last_offset(last)
        .with_acknowledge_types(types);
    let partition = AcknowledgePartition::default().with_partition_index(0).with_acknowledgement_batches(vec![batch]);
    let request = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(text(GROUP))))
        .with_member_id(Some(text(member)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![AcknowledgeTopic::default().with_topic_id(id).with_partitions(vec![partition])]);
    conn.call(ApiKey::ShareAcknowledge, 1, &request).await.unwrap()
}

fn acquired(response: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    assert_eq!(response.error_code, 0, "{:?}", response.error_message);
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0, "{:?}", partition.error_message);
    partition
        .acquired_records
        .iter()
        .map(|a: &AcquiredRecords| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

fn ack_error(response: &ShareAcknowledgeResponse) -> i16 {
    assert_eq!(response.error_code, 0, "{:?}", response.error_message);
    response.responses[0].partitions[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_groups_hand_each_record_to_one_member_and_keep_their_start() {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("jobs", 1).await.unwrap(), 0);
    assert_eq!(conn.produce("jobs", 0, &["before".to_string()]).await.unwrap(), (0, 0));

    // Heartbeats: refused without a member id, an unknown member, a wrong epoch.
    let code = |r: &ShareGroupHeartbeatResponse| r.error_code;
    assert_eq!(code(&heartbeat(&mut conn, "", 0, Some(&["jobs"])).await), ResponseError::InvalidRequest.code());
    assert_eq!(code(&heartbeat(&mut conn, "nobody", 3, None).await), ResponseError::UnknownMemberId.code());
    let joined = heartbeat(&mut conn, "m1", 0, Some(&["jobs"])).await;
    assert_eq!((joined.error_code, joined.member_epoch), (0, 1), "{:?}", joined.error_message);
    let assignment = joined.assignment.expect("a join is answered with its assignment");
    let id = assignment.topic_partitions[0].topic_id;
    assert_eq!(assignment.topic_partitions[0].partitions, vec![0]);
    assert_eq!(code(&heartbeat(&mut conn, "m1", 7, None).await), ResponseError::FencedMemberEpoch.code());
    assert_eq!(heartbeat(&mut conn, "m1", 1, None).await.member_epoch, 1);

    // A session must be opened at epoch 0; the first fetch starts the group at the tail.
    assert_eq!(fetch(&mut conn, "m1", 1, id).await.error_code, ResponseError::ShareSessionNotFound.code());
    assert!(acquired(&fetch(&mut conn, "m1", 0, id).await).is_empty(), "nothing after the latest offset yet");
    let values: Vec<String> = (0..3).map(|i| format!("job-{i}")).collect();
    assert_eq!(conn.produce("jobs", 0, &values).await.unwrap(), (0, 1));
    assert_eq!(acquired(&fetch(&mut conn, "m1", 1, id).await), vec![(1, 3, 1)]);

    // Another member finds them held: nothing to fetch, nothing it may acknowledge.
    assert!(acquired(&fetch(&mut conn, "m2", 0, id).await).is_empty());
    let refused = acknowledge(&mut conn, "m2", 1, id, (1, 1, vec![1])).await;
    assert_eq!(ack_error(&refused), ResponseError::InvalidRecordState.code());

    // m1 releases 1 and accepts 2 and 3: m2 is handed 1, delivered a second time.
    assert_eq!(ack_error(&acknowledge(&mut conn, "m1", 2, id, (1, 3, vec![2, 1, 1])).await), 0);
    assert_eq!(acquired(&fetch(&mut conn, "m2", 2, id).await), vec![(1, 1, 2)]);
    assert_eq!(conn.committed(GROUP, "jobs", 0).await.unwrap(), (0, 1), "the start waits for 1");
    assert_eq!(ack_error(&acknowledge(&mut conn, "m2", 3, id, (1, 1, vec![1])).await), 0);
    assert_eq!(conn.committed(GROUP, "jobs", 0).await.unwrap(), (0, 4), "every job done with: stored");

    // A wrong epoch closes the session.
    assert_eq!(fetch(&mut conn, "m1", 9, id).await.error_code, ResponseError::InvalidShareSessionEpoch.code());
    assert_eq!(fetch(&mut conn, "m1", 3, id).await.error_code, ResponseError::ShareSessionNotFound.code());
    assert_eq!(heartbeat(&mut conn, "m1", -1, None).await.member_epoch, -1);
}

/// A server whose share sessions and share-partitions are idle after 1 s.
async fn with_a_one_second_session_timeout() -> TestServer {
    TestServer::start_with(|config| {
        config.kafka.listen = Some("127.0.0.1:0".parse().unwrap());
        config.kafka.consumer_heartbeat_interval = Duration::from_millis(200);
        config.kafka.consumer_session_timeout = Duration::from_secs(1);
    })
    .await
}

/// A member that vanishes without closing its share session: once the session has been
/// idle for the consumer session timeout (1 s here), another member's request evicts it
/// and the records it held are handed out again, their delivery not counted; the vanished
/// member's next request finds no session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_share_session_is_evicted_and_its_records_handed_out_again() {
    let server = with_a_one_second_session_timeout().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("jobs", 1).await.unwrap(), 0);
    let joined = heartbeat(&mut conn, "gone", 0, Some(&["jobs"])).await;
    let id = joined.assignment.expect("assigned").topic_partitions[0].topic_id;
    assert!(acquired(&fetch(&mut conn, "gone", 0, id).await).is_empty());
    assert_eq!(conn.produce("jobs", 0, &["job".to_string()]).await.unwrap(), (0, 0));
    assert_eq!(acquired(&fetch(&mut conn, "gone", 1, id).await), vec![(0, 0, 1)]);

    // "gone" sends nothing more; "next" asks until the record is handed to it.
    let began = tokio::time::Instant::now();
    assert!(acquired(&fetch(&mut conn, "next", 0, id).await).is_empty(), "held by the other member");
    let mut epoch = 1;
    let handed = loop {
        assert!(began.elapsed() < Duration::from_secs(20), "the idle session was never evicted");
        let got = acquired(&fetch(&mut conn, "next", epoch, id).await);
        epoch += 1;
        if !got.is_empty() {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(handed, vec![(0, 0, 1)], "given back uncounted, as a closed session's records");
    assert!(began.elapsed() >= Duration::from_secs(1), "not before the session was idle for its timeout");
    assert_eq!(fetch(&mut conn, "gone", 2, id).await.error_code, ResponseError::ShareSessionNotFound.code());
}

/// A share-partition no request has used for the consumer session timeout (1 s here) is
/// forgotten only when nothing is in flight: a released record waiting to be handed out
/// again keeps the partition, and its delivery count, through the idle time; a partition
/// whose records are all done is found again from its stored start offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_share_partition_is_forgotten_only_with_nothing_in_flight() {
    let server = with_a_one_second_session_timeout().await;
    let idle = Duration::from_millis(1_500);
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("jobs", 1).await.unwrap(), 0);
    let joined = heartbeat(&mut conn, "a", 0, Some(&["jobs"])).await;
    let id = joined.assignment.expect("assigned").topic_partitions[0].topic_id;
    assert!(acquired(&fetch(&mut conn, "a", 0, id).await).is_empty());
    assert_eq!(conn.produce("jobs", 0, &["j0".to_string(), "j1".to_string()]).await.unwrap(), (0, 0));
    assert_eq!(acquired(&fetch(&mut conn, "a", 1, id).await), vec![(0, 1, 1)]);
    assert_eq!(ack_error(&acknowledge(&mut conn, "a", 2, id, (0, 1, vec![1, 2])).await), 0);

    tokio::time::sleep(idle).await;
    assert_eq!(acquired(&fetch(&mut conn, "b", 0, id).await), vec![(1, 1, 2)], "its second delivery: state kept");
    assert_eq!(ack_error(&acknowledge(&mut conn, "b", 1, id, (1, 1, vec![1])).await), 0);
    assert_eq!(conn.committed(GROUP, "jobs", 0).await.unwrap(), (0, 2));
    assert_eq!(conn.produce("jobs", 0, &["j2".to_string()]).await.unwrap(), (0, 2));

    tokio::time::sleep(idle).await;
    assert_eq!(acquired(&fetch(&mut conn, "c", 0, id).await), vec![(2, 2, 1)], "only what came after the start");
}

/// A broker holds at most `max_share_sessions` share sessions (1 here): another member's
/// opening is SHARE_SESSION_LIMIT_REACHED until one closes; the open one carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_share_session_limit_a_new_session_waits_for_one_to_close() {
    let server = TestServer::start_with(|config| {
        config.kafka.listen = Some("127.0.0.1:0".parse().unwrap());
        config.kafka.max_share_sessions = 1;
    })
    .await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("jobs", 1).await.unwrap(), 0);
    let id =
        heartbeat(&mut conn, "a", 0, Some(&["jobs"])).await.assignment.expect("assigned").topic_partitions[0].topic_id;
    assert!(acquired(&fetch(&mut conn, "a", 0, id).await).is_empty());
    assert_eq!(fetch(&mut conn, "b", 0, id).await.error_code, ResponseError::ShareSessionLimitReached.code());
    assert_eq!(conn.produce("jobs", 0, &["j0".to_string()]).await.unwrap(), (0, 0));
    assert_eq!(acquired(&fetch(&mut conn, "a", 1, id).await), vec![(0, 0, 1)], "the open session carries on");
    assert_eq!(fetch(&mut conn, "a", -1, id).await.error_code, 0, "closed, its record given back");
    assert_eq!(acquired(&fetch(&mut conn, "b", 0, id).await), vec![(0, 0, 1)]);
}

/// The listener's `/metrics` show what it holds: the share group, the member's open share
/// session and the share-partition it fetched from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_the_share_group_its_session_and_its_partition() {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("jobs", 1).await.unwrap(), 0);
    let gauge = shale_tests::series;
    let scrape = || async { server.client.get(server.url("/metrics")).send().await.unwrap().text().await };
    let before = scrape().await.unwrap();
    assert_eq!(gauge(&before, "shale_kafka_share_sessions"), Some(0));
    assert_eq!(gauge(&before, "shale_kafka_groups{protocol=\"share\"}"), Some(0));

    let joined = heartbeat(&mut conn, "m", 0, Some(&["jobs"])).await;
    let id = joined.assignment.expect("assigned").topic_partitions[0].topic_id;
    assert!(acquired(&fetch(&mut conn, "m", 0, id).await).is_empty());
    let after = scrape().await.unwrap();
    assert_eq!(gauge(&after, "shale_kafka_groups{protocol=\"share\"}"), Some(1));
    assert_eq!(gauge(&after, "shale_kafka_share_sessions"), Some(1));
    assert_eq!(gauge(&after, "shale_kafka_share_partitions"), Some(1));
    assert!(gauge(&after, "shale_kafka_requests_total{api=\"ShareFetch\"}") >= Some(1));
}

/// What admin clients see of a share group: ShareGroupDescribe (state, epochs, members
/// and what each holds), DescribeShareGroupOffsets (the stored start offset), ListGroups
/// filtered to share groups, and DeleteGroups refused while members remain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_calls_describe_list_and_delete_a_share_group() {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("jobs", 1).await.unwrap(), 0);
    let id = heartbeat(&mut conn, "m1", 0, Some(&["jobs"])).await.assignment.unwrap().topic_partitions[0].topic_id;
    assert_eq!(heartbeat(&mut conn, "m2", 0, Some(&["jobs"])).await.member_epoch, 1);
    assert!(acquired(&fetch(&mut conn, "m1", 0, id).await).is_empty(), "the group starts at the tail");
    let values: Vec<String> = (0..4).map(|i| format!("job-{i}")).collect();
    assert_eq!(conn.produce("jobs", 0, &values).await.unwrap(), (0, 0));
    assert_eq!(acquired(&fetch(&mut conn, "m1", 1, id).await), vec![(0, 3, 1)]);
    assert_eq!(ack_error(&acknowledge(&mut conn, "m1", 2, id, (0, 1, vec![1, 1])).await), 0);

    let described = describe(&mut conn, &[GROUP, "nobody"]).await;
    let group = &described.groups[0];
    assert_eq!((group.error_code, &*group.group_state, &*group.assignor_name), (0, "Stable", "simple"));
    assert_eq!((group.group_epoch, group.assignment_epoch), (2, 2), "two joins");
    let members: Vec<(&str, i32, &str)> =
        group.members.iter().map(|m| (&*m.member_id, m.member_epoch, &*m.client_id)).collect();
    assert_eq!(members, vec![("m1", 1, "shale-tests"), ("m2", 1, "shale-tests")]);
    let holds = &group.members[1].assignment.topic_partitions[0];
    assert_eq!((&*holds.topic_name.0, holds.topic_id, &holds.partitions), ("jobs", id, &vec![0]));
    assert_eq!(described.groups[1].error_code, ResponseError::GroupIdNotFound.code());
    // Authorized operations only when asked: with access control off, every operation
    // Kafka supports on a group; none for a group not found.
    assert_eq!(group.authorized_operations, i32::MIN);
    let asked = ShareGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(text(GROUP)), GroupId(text("nobody"))])
        .with_include_authorized_operations(true);
    let asked: ShareGroupDescribeResponse = conn.call(ApiKey::ShareGroupDescribe, 1, &asked).await.unwrap();
    let operations: Vec<i32> = asked.groups.iter().map(|g| g.authorized_operations).collect();
    assert_eq!(operations, vec![1 << 3 | 1 << 6 | 1 << 8 | 1 << 10 | 1 << 11, i32::MIN]);
    let classic_terms = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(GROUP))]);
    let classic_terms: DescribeGroupsResponse = conn.call(ApiKey::DescribeGroups, 5, &classic_terms).await.unwrap();
    assert_eq!(classic_terms.groups[0].error_code, ResponseError::GroupIdNotFound.code(), "not a classic group");

    // Offsets 0 and 1 done with: the start offset is 2, for all topics or the one named.
    for topics in [None, Some(vec![("jobs", vec![0])])] {
        let answer = share_offsets(&mut conn, GROUP, topics).await;
        assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
        let partitions: Vec<(&str, i32, i64)> = answer
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (&*t.topic_name.0, p.partition_index, p.start_offset)))
            .collect();
        assert_eq!(partitions, vec![("jobs", 0, 2)]);
    }
    let unknown = share_offsets(&mut conn, "nobody", None).await;
    assert_eq!(unknown.error_code, ResponseError::GroupIdNotFound.code());

    assert_eq!(list_groups(&mut conn, &["share"]).await, vec![(GROUP.to_string(), "Stable".to_string())]);
    assert!(list_groups(&mut conn, &["classic", "consumer"]).await.is_empty(), "a share group is of no other type");
    assert_eq!(delete_group(&mut conn).await, ResponseError::NonEmptyGroup.code(), "members remain");

    // Both leave: the group stays, Empty, with its offsets, until it is deleted.
    assert_eq!(heartbeat(&mut conn, "m1", -1, None).await.member_epoch, -1);
    assert_eq!(heartbeat(&mut conn, "m2", -1, None).await.member_epoch, -1);
    let empty = &describe(&mut conn, &[GROUP]).await.groups[0];
    assert_eq!((empty.error_code, &*empty.group_state, empty.group_epoch), (0, "Empty", 4));
    assert!(empty.members.is_empty());
    assert_eq!(list_groups(&mut conn, &["share"]).await, vec![(GROUP.to_string(), "Empty".to_string())]);
    assert_eq!(delete_group(&mut conn).await, 0);
    assert_eq!(describe(&mut conn, &[GROUP]).await.groups[0].error_code, ResponseError::GroupIdNotFound.code());
    assert_eq!(share_offsets(&mut conn, GROUP, None).await.error_code, ResponseError::GroupIdNotFound.code());
    assert!(list_groups(&mut conn, &[]).await.is_empty(), "deleted with its offsets");
}

/// AlterShareGroupOffsets and DeleteShareGroupOffsets, as `kafka-share-groups.sh
/// --reset-offsets` and `--delete-offsets` send them: refused while the group has
/// members, for a group that is not a share group and for a name with no group; per
/// partition, an unknown topic or partition and an offset past the end refused, a
/// negative one removing the start. The new start holds at the next session of the
/// broker that leads the partition, which held the old one in memory with records in
/// flight; a deleted start begins again at the latest offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_share_groups_start_offsets_are_altered_and_deleted() {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("jobs", 1).await.unwrap(), 0);
    let old: Vec<String> = (0..4).map(|i| format!("old-{i}")).collect();
    assert_eq!(conn.produce("jobs", 0, &old).await.unwrap(), (0, 0));
    let id = heartbeat(&mut conn, "m1", 0, Some(&["jobs"])).await.assignment.unwrap().topic_partitions[0].topic_id;
    assert!(acquired(&fetch(&mut conn, "m1", 0, id).await).is_empty(), "the group starts at the tail, 4");
    let new: Vec<String> = (0..4).map(|i| format!("new-{i}")).collect();
    assert_eq!(conn.produce("jobs", 0, &new).await.unwrap(), (0, 4));
    assert_eq!(acquired(&fetch(&mut conn, "m1", 1, id).await), vec![(4, 7, 1)]);
    assert_eq!(ack_error(&acknowledge(&mut conn, "m1", 2, id, (4, 5, vec![1, 1])).await), 0);
    assert_eq!(conn.committed(GROUP, "jobs", 0).await.unwrap(), (0, 6), "6 and 7 still held by m1");

    let (not_found, non_empty) = (ResponseError::GroupIdNotFound.code(), ResponseError::NonEmptyGroup.code());
    assert_eq!(alter(&mut conn, GROUP, &[("jobs", 0, 1)]).await.error_code, non_empty, "m1 is a member");
    assert_eq!(delete_starts(&mut conn, GROUP, &["jobs"]).await.error_code, non_empty);
    assert_eq!(alter(&mut conn, "nobody", &[("jobs", 0, 1)]).await.error_code, not_found);
    assert_eq!(join_classic(&mut conn, "classic").await, 0);
    assert_eq!(alter(&mut conn, "classic", &[("jobs", 0, 1)]).await.error_code, not_found, "not a share group");
    assert_eq!(delete_starts(&mut conn, "classic", &["jobs"]).await.error_code, not_found);
    assert_eq!(conn.committed(GROUP, "jobs", 0).await.unwrap(), (0, 6), "nothing refused was applied");

    // m1 leaves without closing its share session: its records stay locked to it here.
    assert_eq!(heartbeat(&mut conn, "m1", -1, None).await.member_epoch, -1);
    let altered = alter(&mut conn, GROUP, &[("jobs", 0, 2), ("jobs", 3, 0), ("missing", 0, 0)]).await;
    assert_eq!(altered.error_code, 0, "{:?}", altered.error_message);
    let outcomes: Vec<(&str, uuid::Uuid, i32, i16)> = altered
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (&*t.topic_name.0, t.topic_id, p.partition_index, p.error_code)))
        .collect();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        outcomes,
        vec![("jobs", id, 0, 0), ("jobs", id, 3, unknown), ("missing", uuid::Uuid::nil(), 0, unknown)]
    );
    let past_end = alter(&mut conn, GROUP, &[("jobs", 0, 9)]).await;
    assert_eq!(past_end.responses[0].partitions[0].error_code, ResponseError::InvalidRequest.code(), "8 is the end");
    assert_eq!(start_offsets(&mut conn).await, vec![("jobs".to_string(), 0, 2)]);

    // A new member's first session starts from 2, each record delivered afresh: m1's
    // locks and counts went with the old start.
    assert_eq!(heartbeat(&mut conn, "m2", 0, Some(&["jobs"])).await.member_epoch, 1);
    assert_eq!(acquired(&fetch(&mut conn, "m2", 0, id).await), vec![(2, 7, 1)]);
    let stale = acknowledge(&mut conn, "m1", 3, id, (6, 7, vec![1, 1])).await;
    assert_eq!(ack_error(&stale), ResponseError::InvalidRecordState.code(), "m1 holds nothing now");
    assert_eq!(ack_error(&acknowledge(&mut conn, "m2", 1, id, (2, 7, vec![1; 6])).await), 0);
    assert_eq!(conn.committed(GROUP, "jobs", 0).await.unwrap(), (0, 8));
    assert_eq!(heartbeat(&mut conn, "m2", -1, None).await.member_epoch, -1);

    // Deleted: nothing listed; the next session starts at the latest offset.
    let deleted = delete_starts(&mut conn, GROUP, &["jobs", "missing"]).await;
    assert_eq!(deleted.error_code, 0, "{:?}", deleted.error_message);
    let outcomes: Vec<(&str, i16)> = deleted.responses.iter().map(|t| (&*t.topic_name.0, t.error_code)).collect();
    assert_eq!(outcomes, vec![("jobs", 0), ("missing", unknown)]);
    assert!(start_offsets(&mut conn).await.is_empty());
    let again = delete_starts(&mut conn, GROUP, &["jobs"]).await;
    assert_eq!(again.responses[0].error_code, unknown, "no offset information to delete");
    let more: Vec<String> = (0..2).map(|i| format!("more-{i}")).collect();
    assert_eq!(conn.produce("jobs", 0, &more).await.unwrap(), (0, 8));
    assert_eq!(heartbeat(&mut conn, "m3", 0, Some(&["jobs"])).await.member_epoch, 1);
    assert!(acquired(&fetch(&mut conn, "m3", 0, id).await).is_empty(), "started at the latest offset, 10");
    assert_eq!(conn.produce("jobs", 0, &["last".to_string()]).await.unwrap(), (0, 10));
    assert_eq!(acquired(&fetch(&mut conn, "m3", 1, id).await), vec![(10, 10, 1)]);

    // A negative start removes it, as a deletion does for one partition.
    assert_eq!(heartbeat(&mut conn, "m3", -1, None).await.member_epoch, -1);
    assert_eq!(start_offsets(&mut conn).await, vec![("jobs".to_string(), 0, 10)]);
    assert_eq!(alter(&mut conn, GROUP, &[("jobs", 0, -1)]).await.responses[0].partitions[0].error_code, 0);
    assert!(start_offsets(&mut conn).await.is_empty());
}

/// AlterShareGroupOffsets of `group`: `(topic, partition, start offset)` each.
async fn alter(conn: &mut KafkaConn, group: &str, starts: &[(&str, i32, i64)]) -> AlterShareGroupOffsetsResponse {
    let mut topics: Vec<alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic> = Vec::new();
    for &(topic, partition, start) in starts {
        let partition = alter_share_group_offsets_request::AlterShareGroupOffsetsRequestPartition::default()
            .with_partition_index(partition)
            .with_start_offset(start);
        match topics.iter_mut().find(|t| &*t.topic_name.0 == topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(TopicName(text(topic)))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    let request = AlterShareGroupOffsetsRequest::default().with_group_id(GroupId(text(group))).with_topics(topics);
    conn.call(ApiKey::AlterShareGroupOffsets, 0, &request).await.unwrap()
}

/// DeleteShareGroupOffsets of `group` on `topics`.
async fn delete_starts(conn: &mut KafkaConn, group: &str, topics: &[&str]) -> DeleteShareGroupOffsetsResponse {
    let topics = topics
        .iter()
        .map(|t| {
            delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(text(t)))
        })
        .collect();
    let request = DeleteShareGroupOffsetsRequest::default().with_group_id(GroupId(text(group))).with_topics(topics);
    conn.call(ApiKey::DeleteShareGroupOffsets, 0, &request).await.unwrap()
}

/// `(topic, partition, start offset)` of every start [`GROUP`] has stored.
async fn start_offsets(conn: &mut KafkaConn) -> Vec<(String, i32, i64)> {
    let answer = share_offsets(conn, GROUP, None).await;
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    answer
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_name.0.to_string(), p.partition_index, p.start_offset)))
        .collect()
}

async fn describe(conn: &mut KafkaConn, groups: &[&str]) -> ShareGroupDescribeResponse {
    let request =
        ShareGroupDescribeRequest::default().with_group_ids(groups.iter().map(|g| GroupId(text(g))).collect());
    conn.call(ApiKey::ShareGroupDescribe, 1, &request).await.unwrap()
}

/// Group `group`'s start offsets, of every topic (`None`) or of the partitions named.
async fn share_offsets(
    conn: &mut KafkaConn,
    group: &str,
    topics: Option<Vec<(&str, Vec<i32>)>>,
) -> describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup {
    let topics = topics.map(|topics| {
        topics
            .into_iter()
            .map(|(name, partitions)| {
                describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(TopicName(text(name)))
                    .with_partitions(partitions)
            })
            .collect()
    });
    let asked = describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(topics);
    let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![asked]);
    let response: DescribeShareGroupOffsetsResponse =
        conn.call(ApiKey::DescribeShareGroupOffsets, 0, &request).await.unwrap();
    response.groups.into_iter().next().unwrap()
}

/// `(group, state)` of the groups ListGroups lists of `types` (all with none).
async fn list_groups(conn: &mut KafkaConn, types: &[&str]) -> Vec<(String, String)> {
    let request = ListGroupsRequest::default().with_types_filter(types.iter().map(|t| text(t)).collect());
    let response: ListGroupsResponse = conn.call(ApiKey::ListGroups, 5, &request).await.unwrap();
    assert_eq!(response.error_code, 0);
    response.groups.into_iter().map(|g| (g.group_id.0.to_string(), g.group_state.to_string())).collect()
}

async fn delete_group(conn: &mut KafkaConn) -> i16 {
    let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(GROUP))]);
    let response: DeleteGroupsResponse = conn.call(ApiKey::DeleteGroups, 2, &request).await.unwrap();
    response.results[0].error_code
}

/// A group's name is a share group's or another kind's, never both: their positions
/// would be one another's. While the share group is held, a classic join, a
/// consumer-protocol join, a commit outside the group (plain or in a transaction) and an
/// offset delete are refused; a share join to a classic group's
/// name is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_group_and_another_kind_of_group_never_share_a_name() {
    let server = TestServer::start_with_kafka().await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(60)).await.unwrap();
    assert_eq!(conn.create_topic("jobs", 1).await.unwrap(), 0);
    let id = heartbeat(&mut conn, "m1", 0, Some(&["jobs"])).await.assignment.unwrap().topic_partitions[0].topic_id;
    assert!(acquired(&fetch(&mut conn, "m1", 0, id).await).is_empty());
    assert_eq!(conn.committed(GROUP, "jobs", 0).await.unwrap(), (0, 0), "the start offset stored");

    let not_found = ResponseError::GroupIdNotFound.code();
    assert_eq!(join_classic(&mut conn, GROUP).await, not_found);
    let consumer_join = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(GROUP)))
        .with_member_id(text("c1"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(text("jobs"))]))
        .with_topic_partitions(Some(Vec::new()));
    let consumer_join: ConsumerGroupHeartbeatResponse =
        conn.call(ApiKey::ConsumerGroupHeartbeat, 1, &consumer_join).await.unwrap();
    assert_eq!(consumer_join.error_code, not_found, "{:?}", consumer_join.error_message);
    assert_eq!(conn.commit(GROUP, "jobs", 0, 7).await.unwrap(), not_found);
    let delete = OffsetDeleteRequest::default().with_group_id(GroupId(text(GROUP))).with_topics(vec![
        offset_delete_request::OffsetDeleteRequestTopic::default()
            .with_name(TopicName(text("jobs")))
            .with_partitions(vec![offset_delete_request::OffsetDeleteRequestPartition::default()]),
    ]);
    let deleted: OffsetDeleteResponse = conn.call(ApiKey::OffsetDelete, 0, &delete).await.unwrap();
    assert_eq!(deleted.error_code, not_found);
    assert_eq!(commit_in_transaction(&mut conn, GROUP).await, not_found);
    assert_eq!(conn.committed(GROUP, "jobs", 0).await.unwrap(), (0, 0), "the start offset untouched");

    // A classic group's name is not a share group's.
    assert_eq!(join_classic(&mut conn, "classic").await, 0, "the classic group takes the member");
    let refused = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text("classic")))
        .with_member_id(text("s1"))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(text("jobs"))]));
    let refused: ShareGroupHeartbeatResponse = conn.call(ApiKey::ShareGroupHeartbeat, 1, &refused).await.unwrap();
    assert_eq!(refused.error_code, not_found, "{:?}", refused.error_message);
}

/// Offset 7 of `jobs` 0 committed for `group` in a new transaction, outside any group
/// membership (TxnOffsetCommit version 3 without a member): the partition's error code.
async fn commit_in_transaction(conn: &mut KafkaConn, group: &str) -> i16 {
    let (error, producer_id, epoch) = conn.init_transactional("share-tx").await.unwrap();
    assert_eq!(error, 0);
    let producer = TxnProducer { id: producer_id, epoch, sequence: 0 };
    assert_eq!(conn.add_offsets("share-tx", producer, group).await.unwrap(), 0);
    let partition = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default().with_committed_offset(7);
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(text("share-tx")))
        .with_group_id(GroupId(text(group)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(text("jobs")))
            .with_partitions(vec![partition])]);
    let response: TxnOffsetCommitResponse = conn.call(ApiKey::TxnOffsetCommit, 3, &request).await.unwrap();
    response.topics[0].partitions[0].error_code
}

/// A classic JoinGroup (version 4, no member id yet, then the id it is given) to `group`:
/// its error code (0 when the group takes the member).
async fn join_classic(conn: &mut KafkaConn, group: &str) -> i16 {
    let protocol = join_group_request::JoinGroupRequestProtocol::default().with_name(text("range"));
    let request = JoinGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![protocol]);
    conn.join_group(4, &request).await.unwrap().error_code
}
