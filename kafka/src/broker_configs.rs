//! What DescribeConfigs shows of a broker: the settings of Kafka's that mean something
//! here, at the values this listener serves, all read-only (admin tools and UIs list
//! them; a client that asks for `default.replication.factor` before creating a topic
//! finds it). As Kafka answers: the broker's own id names it, an empty name asks for the
//! cluster's dynamic defaults (none here), another broker's id is INVALID_REQUEST.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::topics::{config_entries, MAX_MESSAGE_BYTES, SOURCE_DEFAULT};
use crate::transactions::MAX_TIMEOUT_MS;
use crate::Kafka;

/// Kafka's resource type for brokers in the config APIs.
pub const BROKER: i8 = 4;
/// The config source DescribeConfigs reports for a setting of this listener's config.
const SOURCE_STATIC: i8 = 4;

/// `result` with the configs of the broker `resource` names.
pub fn describe(
    kafka: &Kafka,
    resource: &DescribeConfigsResource,
    result: DescribeConfigsResult,
) -> DescribeConfigsResult {
    let me = kafka.brokers.me().id;
    let name = resource.resource_name.trim();
    if name.is_empty() {
        return result;
    }
    if name.parse::<i32>().ok() != Some(me) {
        let message = format!("broker `{name}` is not this one: ask broker {me}, or give an empty name for defaults");
        return result
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(StrBytes::from_string(message)));
    }
    let read_only = settings(kafka).into_iter().map(|(name, value, source)| (name, value, true, source)).collect();
    result.with_configs(config_entries(read_only, resource))
}

/// The settings shown, as `(name, value, source)`.
fn settings(kafka: &Kafka) -> Vec<(&'static str, String, i8)> {
    let config = &kafka.config;
    let me = kafka.brokers.me();
    let mut settings = vec![
        ("broker.id", me.id.to_string(), SOURCE_STATIC),
        ("node.id", me.id.to_string(), SOURCE_STATIC),
        ("auto.create.topics.enable", config.auto_create_topics.to_string(), SOURCE_STATIC),
        ("num.partitions", config.default_partitions.to_string(), SOURCE_STATIC),
        ("socket.request.max.bytes", config.max_request_bytes.to_string(), SOURCE_STATIC),
        // Durability is the object store's: every partition has one replica, always in sync.
        ("default.replication.factor", "1".into(), SOURCE_DEFAULT),
        ("min.insync.replicas", "1".into(), SOURCE_DEFAULT),
        ("message.max.bytes", MAX_MESSAGE_BYTES.to_string(), SOURCE_DEFAULT),
        ("log.retention.ms", "-1".into(), SOURCE_DEFAULT),
        ("log.cleanup.policy", "delete".into(), SOURCE_DEFAULT),
        ("log.message.timestamp.type", "CreateTime".into(), SOURCE_DEFAULT),
        ("transaction.max.timeout.ms", MAX_TIMEOUT_MS.to_string(), SOURCE_DEFAULT),
        ("group.initial.rebalance.delay.ms", "0".into(), SOURCE_DEFAULT),
        ("group.min.session.timeout.ms", crate::groups::MIN_SESSION_TIMEOUT_MS.to_string(), SOURCE_DEFAULT),
        ("group.max.session.timeout.ms", crate::groups::MAX_SESSION_TIMEOUT_MS.to_string(), SOURCE_DEFAULT),
    ];
    if !me.rack.is_empty() {
        settings.push(("broker.rack", me.rack.clone(), SOURCE_STATIC));
    }
    settings
}
