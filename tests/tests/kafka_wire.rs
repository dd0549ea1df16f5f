//! Kafka's wire protocol with bad input, byte by byte over a real socket: malformed and
//! oversized frames and unknown APIs close the connection; unsupported ApiVersions,
//! corrupt and oversized batches, unknown and invalid topics each get Kafka's error
//! code; nothing is half applied, and a topic of many partitions appears and goes whole.
//! Describe calls answer authorized operations only when asked; ACL calls are answered
//! SECURITY_DISABLED.

#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateAclsRequest, CreateAclsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse,
    DescribeClusterRequest, DescribeClusterResponse, DescribeGroupsRequest, DescribeGroupsResponse, GroupId,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use shale_tests::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn server() -> TestServer {
    TestServer::start_with_kafka().await
}

/// The tests' Kafka client connected to `server`.
async fn client(server: &TestServer) -> shale_tests::kafka_client::KafkaConn {
    let address = server.kafka.as_ref().unwrap();
    shale_tests::kafka_client::KafkaConn::connect(address, std::time::Duration::from_secs(60)).await.unwrap()
}

async fn connect(server: &TestServer) -> TcpStream {
    TcpStream::connect(server.kafka.as_ref().unwrap()).await.unwrap()
}

/// Sends `request` as `api` at `version`; the response body, or `None` if the server
/// closed the connection instead.
async fn call<Req: Encodable>(socket: &mut TcpStream, api: ApiKey, version: i16, request: &Req) -> Option<Bytes> {
    send_frame(socket, &encode_request(api, version, 42, request)).await;
    let mut frame = read_frame(socket).await?;
    let header_version = if api == ApiKey::ApiVersions { 0 } else { api.response_header_version(version) };
    let response_header = ResponseHeader::decode(&mut frame, header_version).unwrap();
    assert_eq!(response_header.correlation_id, 42);
    Some(frame)
}

/// `request`'s header and body as `api` at `version`, without the frame's length.
fn encode_request<Req: Encodable>(api: ApiKey, version: i16, correlation_id: i32, request: &Req) -> BytesMut {
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("wire-test")));
    let mut body = BytesMut::new();
    header.encode(&mut body, api.request_header_version(version)).unwrap();
    request.encode(&mut body, version).unwrap();
    body
}

async fn send_frame(socket: &mut TcpStream, body: &[u8]) {
    socket.write_all(&(body.len() as i32).to_be_bytes()).await.unwrap();
    socket.write_all(body).await.unwrap();
}

async fn read_frame(socket: &mut TcpStream) -> Option<Bytes> {
    let mut len = [0u8; 4];
    socket.read_exact(&mut len).await.ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    socket.read_exact(&mut body).await.ok()?;
    Some(Bytes::from(body))
}

/// Whether the server closed the connection (rather than answering).
async fn closed(socket: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(socket.read(&mut byte).await, Ok(0) | Err(_))
}

fn batch(values: &[&'static [u8]], compression: Compression) -> Bytes {
    let values: Vec<Bytes> = values.iter().map(|v| Bytes::from_static(v)).collect();
    shale_tests::kafka_client::batch(&values, compression).unwrap()
}

async fn produce(socket: &mut TcpStream, topic: &str, records: Bytes) -> (i16, i64) {
    let partition = PartitionProduceData::default().with_index(0).with_records(Some(records));
    let topic = TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_partition_data(vec![partition]);
    let request = ProduceRequest::default().with_acks(-1).with_timeout_ms(5000).with_topic_data(vec![topic]);
    let mut body = call(socket, ApiKey::Produce, 9, &request).await.unwrap();
    let response = ProduceResponse::decode(&mut body, 9).unwrap();
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

async fn latest(socket: &mut TcpStream, topic: &str) -> i64 {
    let partition = ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-1);
    let topic = ListOffsetsTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_partitions(vec![partition]);
    let request = ListOffsetsRequest::default().with_topics(vec![topic]);
    let mut body = call(socket, ApiKey::ListOffsets, 5, &request).await.unwrap();
    let response = ListOffsetsResponse::decode(&mut body, 5).unwrap();
    let p = &response.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

/// ListOffsets' special timestamps from the version that brought each on: the earliest
/// local offset (version 8) is the earliest, as a log kept whole in the object store has
/// no local part; the latest tiered offset (version 9) is -1, as Kafka answers for a
/// topic without remote storage; an older version asking for either, or for the max
/// timestamp before version 7, is UNSUPPORTED_VERSION, as Kafka's brokers answer.
#[tokio::test]
async fn list_offsets_answers_each_special_timestamp_from_its_version_on() {
    let server = server().await;
    let mut conn = client(&server).await;
    assert_eq!(conn.create_topic("special", 1).await.unwrap(), 0);
    let values: Vec<String> = (0..5).map(|i| format!("v{i}")).collect();
    assert_eq!(conn.produce("special", 0, &values).await.unwrap(), (0, 0));
    assert_eq!(conn.delete_records("special", 0, 2).await.unwrap(), 0);
    let unsupported = ResponseError::UnsupportedVersion.code();
    for version in [8, 9, 10] {
        assert_eq!(conn.list_offsets("special", 0, -4, version).await.unwrap(), (0, 2), "earliest local at {version}");
        assert_eq!(conn.list_offsets("special", 0, -2, version).await.unwrap(), (0, 2), "earliest at {version}");
        assert_eq!(conn.list_offsets("special", 0, -3, version).await.unwrap(), (0, 4), "max timestamp at {version}");
    }
    for version in [9, 10] {
        assert_eq!(conn.list_offsets("special", 0, -5, version).await.unwrap(), (0, -1), "latest tiered at {version}");
    }
    assert_eq!(conn.list_offsets("special", 0, -5, 8).await.unwrap(), (unsupported, -1));
    assert_eq!(conn.list_offsets("special", 0, -4, 7).await.unwrap(), (unsupported, -1));
    assert_eq!(conn.list_offsets("special", 0, -3, 6).await.unwrap(), (unsupported, -1));
    assert_eq!(conn.list_offsets("special", 0, -3, 7).await.unwrap(), (0, 4));
    // A partition holding only a trim's command record has no record to answer with.
    assert_eq!(conn.create_topic("only-trimmed", 1).await.unwrap(), 0);
    assert_eq!(conn.delete_records("only-trimmed", 0, 0).await.unwrap(), 0);
    assert_eq!(conn.list_offsets("only-trimmed", 0, -3, 7).await.unwrap(), (0, -1));
}

/// DescribeCluster lists the brokers (at version 1 when asked for brokers); asked for
/// controllers it is MISMATCHED_ENDPOINT_TYPE and for an unknown endpoint type
/// UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers.
#[tokio::test]
async fn describe_cluster_answers_for_brokers_only() {
    let server = server().await;
    let mut conn = client(&server).await;
    let describe = |endpoint_type: i8| DescribeClusterRequest::default().with_endpoint_type(endpoint_type);
    for (version, endpoint_type) in [(0, 1), (1, 1)] {
        let answer: DescribeClusterResponse =
            conn.call(ApiKey::DescribeCluster, version, &describe(endpoint_type)).await.unwrap();
        assert_eq!((answer.error_code, answer.brokers.len()), (0, 1), "version {version}");
    }
    for (endpoint_type, error) in
        [(2, ResponseError::MismatchedEndpointType), (7, ResponseError::UnsupportedEndpointType)]
    {
        let answer: DescribeClusterResponse =
            conn.call(ApiKey::DescribeCluster, 1, &describe(endpoint_type)).await.unwrap();
        assert_eq!((answer.error_code, answer.brokers.len()), (error.code(), 0), "endpoint type {endpoint_type}");
    }
}

/// Every operation Kafka supports on a topic (READ, WRITE, CREATE, DELETE, ALTER,
/// DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS), on the cluster (CREATE, ALTER, DESCRIBE,
/// CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE) and on a group
/// (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS), as bits of their codes:
/// what a Kafka broker without an authorizer answers, and Shale with access control off.
const TOPIC_OPERATIONS: i32 = 1 << 3 | 1 << 4 | 1 << 5 | 1 << 6 | 1 << 7 | 1 << 8 | 1 << 10 | 1 << 11;
const CLUSTER_OPERATIONS: i32 = 1 << 5 | 1 << 7 | 1 << 8 | 1 << 9 | 1 << 10 | 1 << 11 | 1 << 12;
const GROUP_OPERATIONS: i32 = 1 << 3 | 1 << 6 | 1 << 8 | 1 << 10 | 1 << 11;

#[tokio::test]
async fn authorized_operations_are_answered_only_when_asked() {
    let server = server().await;
    let mut conn = client(&server).await;
    assert_eq!(conn.create_topic("granted", 1).await.unwrap(), 0);
    let topics = |names: &[&str]| {
        let topic = |name: &str| {
            MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        };
        let named = names.iter().map(|n| topic(n)).collect();
        MetadataRequest::default().with_topics(Some(named)).with_allow_auto_topic_creation(false)
    };
    // Asked of the topics (an existing one and one the caller may see that does not
    // exist, as Kafka answers both) and, up to version 10, of the cluster.
    for version in [8, 10, 12] {
        let asked = topics(&["granted", "missing"])
            .with_include_topic_authorized_operations(true)
            .with_include_cluster_authorized_operations(version <= 10);
        let answer: MetadataResponse = conn.call(ApiKey::Metadata, version, &asked).await.unwrap();
        let found: Vec<(i16, i32)> =
            answer.topics.iter().map(|t| (t.error_code, t.topic_authorized_operations)).collect();
        let missing = ResponseError::UnknownTopicOrPartition.code();
        assert_eq!(found, vec![(0, TOPIC_OPERATIONS), (missing, TOPIC_OPERATIONS)], "version {version}");
        let cluster = if version <= 10 { CLUSTER_OPERATIONS } else { i32::MIN };
        assert_eq!(answer.cluster_authorized_operations, cluster, "version {version}");
        let unasked: MetadataResponse = conn.call(ApiKey::Metadata, version, &topics(&["granted"])).await.unwrap();
        assert_eq!(unasked.topics[0].topic_authorized_operations, i32::MIN, "version {version}");
        assert_eq!(unasked.cluster_authorized_operations, i32::MIN, "version {version}");
    }

    for (asked, expected) in [(false, i32::MIN), (true, CLUSTER_OPERATIONS)] {
        let request = DescribeClusterRequest::default().with_include_cluster_authorized_operations(asked);
        let answer: DescribeClusterResponse = conn.call(ApiKey::DescribeCluster, 1, &request).await.unwrap();
        assert_eq!((answer.error_code, answer.cluster_authorized_operations), (0, expected));
    }

    // A group with offsets only (`Empty`) and one with nothing (`Dead`): both answered
    // without error, so both get their operations, as Kafka answers.
    assert_eq!(conn.produce("granted", 0, &["one".to_string()]).await.unwrap(), (0, 0));
    assert_eq!(conn.commit("offsets-only", "granted", 0, 1).await.unwrap(), 0);
    let groups = |asked: bool| {
        let ids = ["offsets-only", "nobody"].map(|g| GroupId(StrBytes::from_static_str(g)));
        DescribeGroupsRequest::default().with_groups(ids.to_vec()).with_include_authorized_operations(asked)
    };
    for (asked, expected) in [(false, i32::MIN), (true, GROUP_OPERATIONS)] {
        let answer: DescribeGroupsResponse = conn.call(ApiKey::DescribeGroups, 5, &groups(asked)).await.unwrap();
        let found: Vec<(&str, i32)> =
            answer.groups.iter().map(|g| (g.group_state.as_str(), g.authorized_operations)).collect();
        assert_eq!(found, vec![("Empty", expected), ("Dead", expected)]);
    }
    server.stop().await;
}

/// Kafka's ACL calls get a Kafka broker's answer without an authorizer: SECURITY_DISABLED
/// for a listing, and for each creation and deletion asked.
#[tokio::test]
async fn acl_calls_are_answered_as_by_a_broker_without_an_authorizer() {
    let server = server().await;
    let mut conn = client(&server).await;
    let disabled = ResponseError::SecurityDisabled.code();
    let (any, topic, literal, read, allow) = (1, 2, 3, 3, 3);
    for version in 1..=3 {
        let listing = DescribeAclsRequest::default()
            .with_resource_type_filter(any)
            .with_pattern_type_filter(any)
            .with_operation(any)
            .with_permission_type(any);
        let listed: DescribeAclsResponse = conn.call(ApiKey::DescribeAcls, version, &listing).await.unwrap();
        assert_eq!((listed.error_code, listed.resources.len()), (disabled, 0), "version {version}");

        let creation = AclCreation::default()
            .with_resource_type(topic)
            .with_resource_name(StrBytes::from_static_str("orders"))
            .with_resource_pattern_type(literal)
            .with_principal(StrBytes::from_static_str("User:alice"))
            .with_host(StrBytes::from_static_str("*"))
            .with_operation(read)
            .with_permission_type(allow);
        let create = CreateAclsRequest::default().with_creations(vec![creation.clone(), creation]);
        let created: CreateAclsResponse = conn.call(ApiKey::CreateAcls, version, &create).await.unwrap();
        let codes: Vec<i16> = created.results.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, vec![disabled, disabled], "version {version}");

        let filter = DeleteAclsFilter::default()
            .with_resource_type_filter(any)
            .with_pattern_type_filter(any)
            .with_operation(any)
            .with_permission_type(any);
        let delete = DeleteAclsRequest::default().with_filters(vec![filter]);
        let deleted: DeleteAclsResponse = conn.call(ApiKey::DeleteAcls, version, &delete).await.unwrap();
        let codes: Vec<i16> = deleted.filter_results.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, vec![disabled], "version {version}");
    }
    server.stop().await;
}

#[tokio::test]
async fn malformed_frames_and_unknown_apis_close_the_connection() {
    let server = server().await;
    for frame_len in [i32::MAX, -5, 3] {
        let mut socket = connect(&server).await;
        socket.write_all(&frame_len.to_be_bytes()).await.unwrap();
        assert!(closed(&mut socket).await, "a frame of {frame_len} bytes must close the connection");
    }
    let mut socket = connect(&server).await;
    send_frame(&mut socket, &[0x30, 0x39, 0, 0, 0, 0, 0, 1, 0, 0]).await;
    assert!(closed(&mut socket).await, "unknown api key 12345");
    // A known API at a version not served (Produce v2: before record batch v2).
    let mut socket = connect(&server).await;
    let header = RequestHeader::default().with_request_api_key(ApiKey::Produce as i16).with_request_api_version(2);
    let mut request = BytesMut::new();
    header.encode(&mut request, 1).unwrap();
    request.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 0]);
    send_frame(&mut socket, &request).await;
    assert!(closed(&mut socket).await, "produce v2");
    // A body that does not decode at its version.
    let mut socket = connect(&server).await;
    let header = RequestHeader::default().with_request_api_key(ApiKey::Metadata as i16).with_request_api_version(9);
    let mut body = BytesMut::new();
    header.encode(&mut body, ApiKey::Metadata.request_header_version(9)).unwrap();
    body.extend_from_slice(&[0xff, 0xff, 0xff]);
    send_frame(&mut socket, &body).await;
    assert!(closed(&mut socket).await, "a truncated metadata body");
    // The server is still there for everyone else.
    let mut socket = connect(&server).await;
    let mut body = call(&mut socket, ApiKey::Metadata, 9, &MetadataRequest::default()).await.unwrap();
    assert!(MetadataResponse::decode(&mut body, 9).is_ok());
    server.stop().await;
}

#[tokio::test]
async fn an_unsupported_api_versions_gets_version_0_with_the_list() {
    let server = server().await;
    let mut socket = connect(&server).await;
    // Version 99's header is laid out as version 3's (flexible); its body is empty.
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(99)
        .with_correlation_id(42);
    let mut request = BytesMut::new();
    header.encode(&mut request, ApiKey::ApiVersions.request_header_version(3)).unwrap();
    ApiVersionsRequest::default().encode(&mut request, 3).unwrap();
    send_frame(&mut socket, &request).await;
    let mut body = read_frame(&mut socket).await.unwrap();
    assert_eq!(ResponseHeader::decode(&mut body, 0).unwrap().correlation_id, 42);
    let response = ApiVersionsResponse::decode(&mut body, 0).unwrap();
    assert_eq!(response.error_code, ResponseError::UnsupportedVersion.code());
    let produce = response.api_keys.iter().find(|k| k.api_key == ApiKey::Produce as i16).unwrap();
    assert_eq!((produce.min_version, produce.max_version), (3, 11));
    let end_txn = response.api_keys.iter().find(|k| k.api_key == ApiKey::EndTxn as i16).unwrap();
    assert_eq!((end_txn.min_version, end_txn.max_version), (0, 3), "transactions' first version only");
    assert!(
        response.api_keys.iter().all(|k| k.api_key != ApiKey::DescribeClientQuotas as i16),
        "nothing unbuilt is listed"
    );
    server.stop().await;
}

#[tokio::test]
async fn bad_batches_and_topics_get_their_error_codes_and_apply_nothing() {
    let server = server().await;
    let mut socket = connect(&server).await;
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("wire")))
        .with_num_partitions(1)
        .with_replication_factor(-1);
    let invalid =
        CreatableTopic::default().with_name(TopicName(StrBytes::from_static_str("no/slash"))).with_num_partitions(1);
    let request = CreateTopicsRequest::default().with_topics(vec![topic, invalid]).with_timeout_ms(5000);
    let mut body = call(&mut socket, ApiKey::CreateTopics, 5, &request).await.unwrap();
    let created = CreateTopicsResponse::decode(&mut body, 5).unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    assert_eq!(created.topics[1].error_code, ResponseError::InvalidTopicException.code());

    assert_eq!(produce(&mut socket, "wire", batch(&[b"a", b"b"], Compression::Gzip)).await, (0, 0));
    // A flipped byte inside the batch fails its CRC.
    let mut corrupt = batch(&[b"c", b"d"], Compression::None).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x55;
    assert_eq!(produce(&mut socket, "wire", Bytes::from(corrupt)).await.0, ResponseError::CorruptMessage.code());
    // Two batches in one partition's records.
    let mut two = batch(&[b"e"], Compression::None).to_vec();
    two.extend_from_slice(&batch(&[b"f"], Compression::None));
    assert_eq!(produce(&mut socket, "wire", Bytes::from(two)).await.0, ResponseError::InvalidRecord.code());
    // A batch over max.message.bytes.
    let big: &'static [u8] = Box::leak(vec![7u8; 8_500_000].into_boxed_slice());
    assert_eq!(
        produce(&mut socket, "wire", batch(&[big], Compression::None)).await.0,
        ResponseError::MessageTooLarge.code()
    );
    // A small batch whose records, decompressed, are metered over the 8 MiB one append
    // takes.
    let over: &'static [u8] = Box::leak(vec![0u8; 9 << 20].into_boxed_slice());
    assert_eq!(
        produce(&mut socket, "wire", batch(&[over], Compression::Zstd)).await.0,
        ResponseError::MessageTooLarge.code()
    );
    // A small zstd batch that decompresses past the bound (a decompression bomb).
    let bomb: &'static [u8] = Box::leak(vec![0u8; 65 << 20].into_boxed_slice());
    let bomb = batch(&[bomb], Compression::Zstd);
    assert!(bomb.len() < 1 << 20, "{} bytes compressed", bomb.len());
    assert_eq!(produce(&mut socket, "wire", bomb).await.0, ResponseError::MessageTooLarge.code());
    // Garbage where the records go.
    assert_eq!(
        produce(&mut socket, "wire", Bytes::from_static(b"not a batch")).await.0,
        ResponseError::CorruptMessage.code()
    );
    assert_eq!(
        produce(&mut socket, "no-such-topic", batch(&[b"x"], Compression::None)).await.0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(
        produce(&mut socket, "bad/name", batch(&[b"x"], Compression::None)).await.0,
        ResponseError::InvalidTopicException.code()
    );
    assert_eq!(latest(&mut socket, "wire").await, 2, "only the good batch was applied");
    assert_eq!(produce(&mut socket, "wire", batch(&[b"g"], Compression::Lz4)).await, (0, 2));
    server.stop().await;
}

/// A fetch over many partitions stays within its `max_bytes`, however many partitions
/// are read at once: a client refuses an answer past its receive bound.
#[tokio::test]
async fn a_fetch_over_many_partitions_stays_within_its_byte_bound() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, FetchResponse};
    const PARTITIONS: i32 = 16;
    let server = server().await;
    let mut socket = connect(&server).await;
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("wide")))
        .with_num_partitions(PARTITIONS)
        .with_replication_factor(-1);
    let request = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(5000);
    let mut body = call(&mut socket, ApiKey::CreateTopics, 5, &request).await.unwrap();
    assert_eq!(CreateTopicsResponse::decode(&mut body, 5).unwrap().topics[0].error_code, 0);
    // 200 KiB on each partition, in 10 KiB records.
    let value: &'static [u8] = Box::leak(vec![1u8; 10 << 10].into_boxed_slice());
    for partition in 0..PARTITIONS {
        let data = PartitionProduceData::default()
            .with_index(partition)
            .with_records(Some(batch(&[value; 20], Compression::None)));
        let produced = TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("wide")))
            .with_partition_data(vec![data]);
        let request = ProduceRequest::default().with_acks(-1).with_timeout_ms(5000).with_topic_data(vec![produced]);
        let mut body = call(&mut socket, ApiKey::Produce, 9, &request).await.unwrap();
        let response = ProduceResponse::decode(&mut body, 9).unwrap();
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    }
    let max_bytes = 1 << 20;
    let partitions = (0..PARTITIONS)
        .map(|p| FetchPartition::default().with_partition(p).with_fetch_offset(0).with_partition_max_bytes(150 << 10))
        .collect();
    let topic =
        FetchTopic::default().with_topic(TopicName(StrBytes::from_static_str("wide"))).with_partitions(partitions);
    let request = FetchRequest::default().with_max_bytes(max_bytes).with_min_bytes(1).with_topics(vec![topic]);
    let mut body = call(&mut socket, ApiKey::Fetch, 12, &request).await.unwrap();
    let response = FetchResponse::decode(&mut body, 12).unwrap();
    let sizes: Vec<usize> =
        response.responses[0].partitions.iter().map(|p| p.records.as_ref().map_or(0, |r| r.len())).collect();
    let total: usize = sizes.iter().sum();
    // At most the bound plus one record for each partition that found the bound spent.
    assert!(total <= max_bytes as usize + PARTITIONS as usize * (11 << 10), "{total} bytes: {sizes:?}");
    assert!(total >= (max_bytes as usize) / 2, "the bound is used, not starved: {sizes:?}");
    assert!(sizes.iter().all(|s| *s <= (150 << 10) + (11 << 10)), "each partition within its own bound: {sizes:?}");
    server.stop().await;
}

/// A server with Kafka on and `delay` added to every store request, and a connection to
/// it with the one-partition topic `topic` created.
async fn slow_server_with_topic(
    delay_ms: u64,
    topic: &'static str,
    configure: impl FnOnce(&mut shale::ServeConfig),
) -> (TestServer, TcpStream) {
    let server = TestServer::start_with(|config| {
        config.kafka.listen = Some("127.0.0.1:0".parse().unwrap());
        config.store_delay = std::time::Duration::from_millis(delay_ms);
        configure(config);
    })
    .await;
    let mut socket = connect(&server).await;
    let created = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str(topic)))
        .with_num_partitions(1)
        .with_replication_factor(-1);
    let request = CreateTopicsRequest::default().with_topics(vec![created]).with_timeout_ms(5000);
    let mut body = call(&mut socket, ApiKey::CreateTopics, 5, &request).await.unwrap();
    assert_eq!(CreateTopicsResponse::decode(&mut body, 5).unwrap().topics[0].error_code, 0);
    (server, socket)
}

/// Sends one produce request per batch to partition 0 of `topic`, all in one write, then
/// reads the answers, which must come in the order sent: each one's error code and base
/// offset.
async fn produce_pipelined(socket: &mut TcpStream, topic: &'static str, batches: Vec<Bytes>) -> Vec<(i16, i64)> {
    let mut wire = BytesMut::new();
    for (i, records) in batches.iter().enumerate() {
        let partition = PartitionProduceData::default().with_index(0).with_records(Some(records.clone()));
        let data = TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_partition_data(vec![partition]);
        let request = ProduceRequest::default().with_acks(-1).with_timeout_ms(5000).with_topic_data(vec![data]);
        let body = encode_request(ApiKey::Produce, 9, 100 + i as i32, &request);
        wire.extend_from_slice(&(body.len() as i32).to_be_bytes());
        wire.extend_from_slice(&body);
    }
    socket.write_all(&wire).await.unwrap();
    let mut answers = Vec::new();
    for i in 0..batches.len() {
        let mut frame = read_frame(socket).await.unwrap();
        let header = ResponseHeader::decode(&mut frame, ApiKey::Produce.response_header_version(9)).unwrap();
        assert_eq!(header.correlation_id, 100 + i as i32, "answers in the order sent");
        let response = ProduceResponse::decode(&mut frame, 9).unwrap();
        let p = &response.responses[0].partition_responses[0];
        answers.push((p.error_code, p.base_offset));
    }
    answers
}

/// Produce requests sent back to back on one connection, each waiting a slow store's
/// commit: all are submitted before the first commits, so they share segment objects
/// (one commit each would make one segment each), and the answers come back in the
/// order sent, with contiguous offsets; a request that runs alone (ListOffsets) sent
/// after them sees every one applied.
#[tokio::test]
async fn pipelined_produce_requests_share_commits_and_answer_in_order() {
    const REQUESTS: i64 = 8;
    let (server, mut socket) = slow_server_with_topic(150, "piped", |_| {}).await;
    let segments = || async {
        let text = server.client.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("shale_segments_written_total "))
            .map(|v| v.trim().parse::<f64>().unwrap() as u64)
            .unwrap()
    };
    let before = segments().await;
    let batches = (0..REQUESTS).map(|_| batch(&[b"one", b"two"], Compression::None)).collect();
    let answers = produce_pipelined(&mut socket, "piped", batches).await;
    let expected: Vec<(i16, i64)> = (0..REQUESTS).map(|i| (0, i * 2)).collect();
    assert_eq!(answers, expected, "every request applied, with contiguous offsets");
    let written = segments().await - before;
    assert!(written < REQUESTS as u64, "{written} segments for {REQUESTS} pipelined requests: none overlapped");
    assert_eq!(latest(&mut socket, "piped").await, REQUESTS * 2);
    server.stop().await;
}

/// Pipelined batches past what the gateway may hold at once (2 MiB here, each batch
/// 1.5 MiB decompressed): a batch the gateway refuses as full waits for the connection's
/// earlier requests to commit and goes in then, so none fails while a later one of the
/// same partition succeeds.
#[tokio::test]
async fn a_pipelined_batch_that_finds_the_gateway_full_waits_for_the_earlier_ones() {
    let (server, mut socket) =
        slow_server_with_topic(100, "full", |config| config.gateway.max_inflight_bytes = 2 << 20).await;
    let value: &'static [u8] = Box::leak(vec![7u8; 3 << 19].into_boxed_slice());
    let batches = (0..3).map(|_| batch(&[value], Compression::Gzip)).collect();
    let answers = produce_pipelined(&mut socket, "full", batches).await;
    assert_eq!(answers, [(0, 0), (0, 1), (0, 2)], "every batch applied in order");
    assert_eq!(latest(&mut socket, "full").await, 3);
    server.stop().await;
}

/// Fetches partition 0 of `topic` from `offset` on `socket`: its error code and the
/// values of the records answered.
async fn fetch_values(socket: &mut TcpStream, topic: &'static str, offset: i64) -> (i16, Vec<Bytes>) {
    let (error, records, _) = fetch_within(socket, topic, offset, 1 << 20).await;
    (error, records.into_iter().map(|(_, value)| value).collect())
}

/// A connection keeps a read cursor per partition across fetches; a topic deleted and
/// created again between two fetches on the same connection is read anew: the second
/// fetch answers the new topic's record, not the deleted topic's.
#[tokio::test]
async fn a_fetch_after_a_topic_is_deleted_and_created_again_reads_the_new_topic() {
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
    let (server, mut socket) = slow_server_with_topic(0, "again", |_| {}).await;
    assert_eq!(produce(&mut socket, "again", batch(&[b"old-0", b"old-1"], Compression::None)).await, (0, 0));
    assert_eq!(fetch_values(&mut socket, "again", 0).await, (0, vec![Bytes::from("old-0"), Bytes::from("old-1")]));

    let delete = DeleteTopicsRequest::default()
        .with_topics(vec![DeleteTopicState::default().with_name(Some(TopicName(StrBytes::from_static_str("again"))))])
        .with_timeout_ms(5000);
    let mut body = call(&mut socket, ApiKey::DeleteTopics, 6, &delete).await.unwrap();
    assert_eq!(DeleteTopicsResponse::decode(&mut body, 6).unwrap().responses[0].error_code, 0);
    let created = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("again")))
        .with_num_partitions(1)
        .with_replication_factor(-1);
    let request = CreateTopicsRequest::default().with_topics(vec![created]).with_timeout_ms(5000);
    let mut body = call(&mut socket, ApiKey::CreateTopics, 5, &request).await.unwrap();
    assert_eq!(CreateTopicsResponse::decode(&mut body, 5).unwrap().topics[0].error_code, 0);
    assert_eq!(produce(&mut socket, "again", batch(&[b"new-0"], Compression::None)).await, (0, 0));

    assert_eq!(fetch_values(&mut socket, "again", 0).await, (0, vec![Bytes::from("new-0")]));
    server.stop().await;
}

/// Bad transaction calls get Kafka's codes and stage nothing: a timeout out of range, an
/// empty or unknown transactional id, a transactional batch outside an open
/// transaction or under an empty transactional id.
#[tokio::test]
async fn bad_transaction_calls_get_their_error_codes_and_stage_nothing() {
    use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId, TransactionalId};
    use shale_tests::kafka_client::{KafkaConn, TxnProducer};

    let server = server().await;
    let mut socket = connect(&server).await;
    let addr = server.kafka.as_ref().unwrap().to_string();
    let mut conn = KafkaConn::connect(&addr, std::time::Duration::from_secs(10)).await.unwrap();
    assert_eq!(conn.create_topic("txn-wire", 1).await.unwrap(), 0);

    let init = |id: &str, timeout_ms: i32| {
        InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_string(id.into()))))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    for timeout_ms in [0, 900_001] {
        let mut body = call(&mut socket, ApiKey::InitProducerId, 4, &init("t", timeout_ms)).await.unwrap();
        let response = InitProducerIdResponse::decode(&mut body, 4).unwrap();
        assert_eq!(response.error_code, ResponseError::InvalidTransactionTimeout.code(), "timeout {timeout_ms}");
    }
    let mut body = call(&mut socket, ApiKey::InitProducerId, 4, &init("", 60_000)).await.unwrap();
    let response = InitProducerIdResponse::decode(&mut body, 4).unwrap();
    assert_eq!(response.error_code, ResponseError::InvalidRequest.code(), "an empty transactional id");

    let stranger = TxnProducer { id: 77, epoch: 0, sequence: 0 };
    let unknown = conn.end_transaction("never-initialised", stranger, true).await.unwrap();
    assert_eq!(unknown, ResponseError::InvalidProducerIdMapping.code());

    let (code, id, epoch) = conn.init_transactional("wire-tx").await.unwrap();
    assert_eq!(code, 0);
    let producer = TxnProducer { id, epoch, sequence: 0 };
    let values = ["staged?".to_string()];
    let (code, _) = conn.produce_transactional("wire-tx", producer, "txn-wire", 0, &values).await.unwrap();
    assert_eq!(code, ResponseError::InvalidTxnState.code(), "no partition was added: no open transaction");
    let (code, _) = conn.produce_transactional("", producer, "txn-wire", 0, &values).await.unwrap();
    assert_eq!(code, ResponseError::InvalidProducerIdMapping.code(), "a batch under an empty transactional id");
    let not_open = conn.end_transaction("wire-tx", producer, true).await.unwrap();
    assert_eq!(not_open, ResponseError::InvalidTxnState.code());
    assert_eq!(latest(&mut socket, "txn-wire").await, 0, "nothing staged became visible");
    server.stop().await;
}

/// One fetch of partition 0 of `topic` from `offset` within `partition_max` bytes: its
/// error code, its records' offsets and values, and the size of its record batches.
async fn fetch_within(
    socket: &mut TcpStream,
    topic: &'static str,
    offset: i64,
    partition_max: i32,
) -> (i16, Vec<(i64, Bytes)>, usize) {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, FetchResponse};
    use kafka_protocol::records::RecordBatchDecoder;
    let partition =
        FetchPartition::default().with_partition(0).with_fetch_offset(offset).with_partition_max_bytes(partition_max);
    let wanted =
        FetchTopic::default().with_topic(TopicName(StrBytes::from_static_str(topic))).with_partitions(vec![partition]);
    let request = FetchRequest::default().with_max_bytes(1 << 20).with_min_bytes(1).with_topics(vec![wanted]);
    let mut body = call(socket, ApiKey::Fetch, 12, &request).await.unwrap();
    let response = FetchResponse::decode(&mut body, 12).unwrap();
    let answer = &response.responses[0].partitions[0];
    let mut records = Vec::new();
    let size = answer.records.as_ref().map_or(0, |r| r.len());
    if let Some(mut batches) = answer.records.clone() {
        for set in RecordBatchDecoder::decode_all(&mut batches).unwrap() {
            records.extend(set.records.into_iter().map(|r| (r.offset, r.value.unwrap())));
        }
    }
    (answer.error_code, records, size)
}

/// A consumer behind the tail is answered fetch after fetch from what its connection
/// read ahead while it took in the last answer: every record once and in order, each
/// answer within the partition bound it asked for (bounds that shrink and grow between
/// fetches), and a trim between two fetches seen by the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_read_ahead_answer_every_record_once_within_their_bounds_and_see_trims() {
    use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
    const RECORDS: i64 = 200;
    let (server, mut socket) = slow_server_with_topic(0, "ahead", |_| {}).await;
    let value = |i: i64| Bytes::from(format!("{i:04}").repeat(256));
    for first in (0..RECORDS).step_by(5) {
        let values: Vec<Bytes> = (first..first + 5).map(value).collect();
        let records = shale_tests::kafka_client::batch(&values, Compression::None).unwrap();
        assert_eq!(produce(&mut socket, "ahead", records).await, (0, first));
    }

    let bounds = [8 << 10, 8 << 10, 3 << 10, 8 << 10, 20 << 10, 2 << 10, 8 << 10];
    let (mut offset, mut fetches, mut bound) = (0, 0, 0);
    while offset < 100 {
        bound = bounds[fetches % bounds.len()];
        let (error, records, size) = fetch_within(&mut socket, "ahead", offset, bound).await;
        assert_eq!(error, 0, "fetch {fetches} at {offset}");
        assert!(!records.is_empty(), "fetch {fetches} at {offset} answered nothing");
        // The bound is soft by one record, as Kafka's is by one batch.
        assert!(size <= bound as usize + (1 << 10) + 128, "fetch {fetches}: {size} bytes within {bound}");
        for (at, value_read) in records {
            assert_eq!((at, value_read), (offset, value(offset)), "fetch {fetches}");
            offset += 1;
        }
        fetches += 1;
    }

    let trim = DeleteRecordsPartition::default().with_partition_index(0).with_offset(150);
    let topic = DeleteRecordsTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("ahead")))
        .with_partitions(vec![trim]);
    let request = DeleteRecordsRequest::default().with_topics(vec![topic]).with_timeout_ms(5000);
    let mut body = call(&mut socket, ApiKey::DeleteRecords, 2, &request).await.unwrap();
    let response = DeleteRecordsResponse::decode(&mut body, 2).unwrap();
    assert_eq!(response.topics[0].partitions[0].error_code, 0);
    // A fetch below the trim point starts at it (as S2's reads do): the connection's
    // next fetch, which had records read ahead from below it, answers what a fetch on a
    // new connection answers.
    let mut fresh = connect(&server).await;
    let (error, on_fresh, _) = fetch_within(&mut fresh, "ahead", offset, bound).await;
    assert_eq!((error, on_fresh.first().map(|r| r.0)), (0, Some(150)), "a fresh fetch below the trim");
    let (error, on_socket, _) = fetch_within(&mut socket, "ahead", offset, bound).await;
    assert_eq!((error, &on_socket), (0, &on_fresh), "below the trim at {offset}, on the connection that read ahead");
    let mut offset = 150 + on_socket.len() as i64;
    while offset < RECORDS {
        let (error, records, _) = fetch_within(&mut socket, "ahead", offset, 8 << 10).await;
        assert_eq!(error, 0, "at {offset}");
        assert!(!records.is_empty(), "at {offset}");
        for (at, value_read) in records {
            assert_eq!((at, value_read), (offset, value(offset)));
            offset += 1;
        }
    }
    server.stop().await;
}

/// The partitions Metadata lists for `topic` on `socket`: 0 when it does not exist.
async fn listed_partitions(socket: &mut TcpStream, topic: &'static str) -> usize {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let wanted = MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_static_str(topic))));
    let request = MetadataRequest::default().with_topics(Some(vec![wanted])).with_allow_auto_topic_creation(false);
    let mut body = call(socket, ApiKey::Metadata, 9, &request).await.unwrap();
    let response = MetadataResponse::decode(&mut body, 9).unwrap();
    let listed = &response.topics[0];
    if listed.error_code == ResponseError::UnknownTopicOrPartition.code() {
        return 0;
    }
    assert_eq!(listed.error_code, 0);
    listed.partitions.len()
}

/// Runs `action` while another connection asks Metadata for `topic` again and again,
/// from one look before `action` starts until it has finished: `action`'s output and
/// every partition count seen.
async fn while_watched<T>(
    server: &TestServer,
    topic: &'static str,
    action: impl std::future::Future<Output = T>,
) -> (T, Vec<usize>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = AtomicBool::new(false);
    let (started, watching) = tokio::sync::oneshot::channel();
    let act = async {
        watching.await.unwrap();
        let output = action.await;
        done.store(true, Ordering::SeqCst);
        output
    };
    let watch = async {
        let mut socket = connect(server).await;
        let mut seen = vec![listed_partitions(&mut socket, topic).await];
        started.send(()).unwrap();
        while !done.load(Ordering::SeqCst) {
            seen.push(listed_partitions(&mut socket, topic).await);
        }
        seen
    };
    tokio::join!(act, watch)
}

/// A topic of many partitions, created mostly at once, appears whole and goes whole:
/// another connection asking Metadata throughout sees no partitions or all of them.
#[tokio::test]
async fn a_topic_of_many_partitions_appears_and_goes_whole() {
    use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
    const PARTITIONS: usize = 128;
    let (server, mut socket) = slow_server_with_topic(10, "other", |_| {}).await;
    let created = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("wide")))
        .with_num_partitions(PARTITIONS as i32)
        .with_replication_factor(-1);
    let request = CreateTopicsRequest::default().with_topics(vec![created]).with_timeout_ms(30_000);
    let (body, seen) = while_watched(&server, "wide", call(&mut socket, ApiKey::CreateTopics, 5, &request)).await;
    assert_eq!(CreateTopicsResponse::decode(&mut body.unwrap(), 5).unwrap().topics[0].error_code, 0);
    assert_eq!(seen[0], 0, "the watcher's first look came before the create");
    assert!(seen.iter().all(|&n| n == 0 || n == PARTITIONS), "partition counts seen while creating: {seen:?}");
    assert_eq!(listed_partitions(&mut socket, "wide").await, PARTITIONS);

    let request = DeleteTopicsRequest::default()
        .with_topic_names(vec![TopicName(StrBytes::from_static_str("wide"))])
        .with_timeout_ms(30_000);
    let (body, seen) = while_watched(&server, "wide", call(&mut socket, ApiKey::DeleteTopics, 4, &request)).await;
    assert_eq!(DeleteTopicsResponse::decode(&mut body.unwrap(), 4).unwrap().responses[0].error_code, 0);
    assert_eq!(seen[0], PARTITIONS, "the watcher's first look came before the delete");
    assert!(seen.iter().all(|&n| n == 0 || n == PARTITIONS), "partition counts seen while deleting: {seen:?}");
    assert_eq!(listed_partitions(&mut socket, "wide").await, 0);
    server.stop().await;
}
