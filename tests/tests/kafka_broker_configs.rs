//! DescribeConfigs of a broker over a real socket, as admin tools ask it: the broker's
//! own id lists its read-only settings at the values served (or only those asked for),
//! an empty name the cluster's dynamic defaults (none), another broker's id
//! INVALID_REQUEST. Asked for, synonyms (a topic's own value, then the broker setting it
//! falls back to), types and documentation, for topics and brokers.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_tests::kafka_client::KafkaConn;
use shale_tests::TestServer;

/// Kafka's resource types for topics and brokers.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// Config sources: set on the topic, in the broker's config, a default.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
/// Kafka's config types INT and LONG.
const INT: i8 = 3;
const LONG: i8 = 5;

/// DescribeConfigs of broker `name` (only `keys` if any): the error code and each
/// config's name, value and whether it is read-only.
async fn describe(conn: &mut KafkaConn, name: &str, keys: &[&str]) -> (i16, Vec<(String, String, bool)>) {
    let keys = (!keys.is_empty()).then(|| keys.iter().map(|k| StrBytes::from_string(k.to_string())).collect());
    let resource = DescribeConfigsResource::default()
        .with_resource_type(BROKER)
        .with_resource_name(StrBytes::from_string(name.into()))
        .with_configuration_keys(keys);
    let request = DescribeConfigsRequest::default().with_resources(vec![resource]);
    let response: DescribeConfigsResponse = conn.call(ApiKey::DescribeConfigs, 4, &request).await.unwrap();
    let result = &response.results[0];
    let configs = result
        .configs
        .iter()
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(), c.read_only))
        .collect();
    (result.error_code, configs)
}

/// A server whose Kafka listener creates topics with three partitions by default, and a
/// connection to it.
async fn server_with_three_default_partitions() -> (TestServer, KafkaConn) {
    let server = TestServer::start_with(|config| {
        config.kafka.listen = Some("127.0.0.1:0".parse().unwrap());
        config.kafka.default_partitions = 3;
    })
    .await;
    let conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(10)).await.unwrap();
    (server, conn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_describes_its_settings_and_refuses_another_brokers_id() {
    let (server, mut conn) = server_with_three_default_partitions().await;

    let (error, configs) = describe(&mut conn, "0", &[]).await;
    assert_eq!(error, 0);
    let value = |name: &str| configs.iter().find(|c| c.0 == name).map(|c| c.1.clone());
    assert_eq!(value("broker.id").as_deref(), Some("0"));
    assert_eq!(value("num.partitions").as_deref(), Some("3"), "the listener's own default partitions");
    assert_eq!(value("default.replication.factor").as_deref(), Some("1"));
    assert_eq!(value("message.max.bytes").as_deref(), Some("8388608"));
    assert_eq!(value("auto.create.topics.enable").as_deref(), Some("false"));
    assert!(configs.iter().all(|c| c.2), "every broker setting is read-only: {configs:?}");

    let (error, configs) = describe(&mut conn, "0", &["min.insync.replicas", "no.such.setting"]).await;
    assert_eq!((error, configs), (0, vec![("min.insync.replicas".to_string(), "1".to_string(), true)]));

    assert_eq!(describe(&mut conn, "", &[]).await, (0, vec![]), "no dynamic defaults");
    let (error, configs) = describe(&mut conn, "5", &[]).await;
    assert_eq!((error, configs.len()), (ResponseError::InvalidRequest.code(), 0));
    server.stop().await;
}

/// DescribeConfigs 4 of one resource, asking for synonyms and documentation or not: the
/// entries.
async fn entries(
    conn: &mut KafkaConn,
    resource_type: i8,
    name: &str,
    asked: bool,
) -> Vec<DescribeConfigsResourceResult> {
    let resource = DescribeConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(StrBytes::from_string(name.into()))
        .with_configuration_keys(None);
    let request = DescribeConfigsRequest::default()
        .with_resources(vec![resource])
        .with_include_synonyms(asked)
        .with_include_documentation(asked);
    let response: DescribeConfigsResponse = conn.call(ApiKey::DescribeConfigs, 4, &request).await.unwrap();
    assert_eq!(response.results[0].error_code, 0, "{:?}", response.results[0].error_message);
    response.results[0].configs.clone()
}

/// `name`'s synonyms as (name, value, source), its type and whether it is documented.
fn shown(entries: &[DescribeConfigsResourceResult], name: &str) -> (Vec<(String, String, i8)>, i8, bool) {
    let entry = entries.iter().find(|e| &*e.name == name).unwrap();
    let value = |v: &Option<StrBytes>| v.as_ref().map(|v| v.to_string()).unwrap_or_default();
    let synonyms = entry.synonyms.iter().map(|s| (s.name.to_string(), value(&s.value), s.source)).collect();
    let documented = entry.documentation.as_ref().is_some_and(|d| !d.is_empty());
    (synonyms, entry.config_type, documented)
}

fn synonym(name: &str, value: &str, source: i8) -> (String, String, i8) {
    (name.to_string(), value.to_string(), source)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synonyms_types_and_documentation_are_shown_when_asked() {
    let (server, mut conn) = server_with_three_default_partitions().await;
    let retention = CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("retention.ms"))
        .with_value(Some(StrBytes::from_static_str("60000")));
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("described")))
        .with_num_partitions(1)
        .with_replication_factor(-1)
        .with_configs(vec![retention]);
    let request = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let created: CreateTopicsResponse = conn.call(ApiKey::CreateTopics, 5, &request).await.unwrap();
    assert_eq!(created.topics[0].error_code, 0);

    // A topic's own value comes first, then the broker setting it falls back to; a
    // config left at its default has the broker setting alone.
    let topic = entries(&mut conn, TOPIC, "described", true).await;
    let own = vec![synonym("retention.ms", "60000", SOURCE_TOPIC), synonym("log.retention.ms", "-1", SOURCE_DEFAULT)];
    assert_eq!(shown(&topic, "retention.ms"), (own, LONG, true));
    let fallback = vec![synonym("log.cleanup.policy", "delete", SOURCE_DEFAULT)];
    assert_eq!(shown(&topic, "cleanup.policy"), (fallback, 7, true));
    let limit = vec![synonym("message.max.bytes", "8388608", SOURCE_DEFAULT)];
    assert_eq!(shown(&topic, "max.message.bytes"), (limit, INT, true));
    // A broker setting is its own synonym; each fallback a topic names is a broker setting.
    let broker = entries(&mut conn, BROKER, "0", true).await;
    assert_eq!(shown(&broker, "num.partitions"), (vec![synonym("num.partitions", "3", SOURCE_STATIC)], INT, true));
    for entry in &topic {
        for fallback in entry.synonyms.iter().filter(|s| s.source == SOURCE_DEFAULT) {
            let listed = broker.iter().find(|b| b.name == fallback.name);
            assert_eq!(listed.map(|b| &b.value), Some(&fallback.value), "{} is a broker setting", &*fallback.name);
        }
    }

    // Not asked: no synonyms and no documentation; the type is there from version 3.
    for entry in entries(&mut conn, TOPIC, "described", false).await {
        assert!(entry.synonyms.is_empty() && entry.documentation.is_none(), "{entry:?}");
        assert_ne!(entry.config_type, 0, "{} has a type", &*entry.name);
    }
    server.stop().await;
}
