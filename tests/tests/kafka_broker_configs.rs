//! DescribeConfigs of a broker over a real socket, as admin tools ask it: the broker's
//! own id lists its read-only settings at the values served (or only those asked for),
//! an empty name the cluster's dynamic defaults (none), another broker's id
//! INVALID_REQUEST.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_tests::kafka_client::KafkaConn;
use shale_tests::TestServer;

/// Kafka's resource type for brokers.
const BROKER: i8 = 4;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_describes_its_settings_and_refuses_another_brokers_id() {
    let server = TestServer::start_with(|config| {
        config.kafka.listen = Some("127.0.0.1:0".parse().unwrap());
        config.kafka.default_partitions = 3;
    })
    .await;
    let mut conn = KafkaConn::connect(server.kafka.as_ref().unwrap(), Duration::from_secs(10)).await.unwrap();

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
