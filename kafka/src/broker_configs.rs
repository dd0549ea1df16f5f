//! What DescribeConfigs shows of a broker: the settings of Kafka's that mean something
//! here, at the values this listener serves, all read-only (admin tools and UIs list
//! them; a client that asks for `default.replication.factor` before creating a topic
//! finds it). As Kafka answers: the broker's own id names it, an empty name asks for the
//! cluster's dynamic defaults (none here), another broker's id is INVALID_REQUEST.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::config_entries::{entries, Described, Shown, SOURCE_DEFAULT, SOURCE_STATIC};
use crate::topics::MAX_MESSAGE_BYTES;
use crate::transactions::MAX_TIMEOUT_MS;
use crate::Kafka;
use shale_metadata_contract::DEFAULT_DELETE_RETENTION_MS;

/// Kafka's resource type for brokers in the config APIs.
pub const BROKER: i8 = 4;

/// `result` with the configs of the broker `resource` names.
pub fn describe(
    kafka: &Kafka,
    resource: &DescribeConfigsResource,
    result: DescribeConfigsResult,
    shown: Shown,
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
    let read_only = settings(kafka)
        .into_iter()
        .map(|(name, value, source)| Described { name, value, read_only: true, source, fallback: None })
        .collect();
    result.with_configs(entries(read_only, resource, shown))
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
        ("transaction.max.timeout.ms", MAX_TIMEOUT_MS.to_string(), SOURCE_DEFAULT),
        ("group.initial.rebalance.delay.ms", "0".into(), SOURCE_DEFAULT),
        ("group.min.session.timeout.ms", crate::groups::MIN_SESSION_TIMEOUT_MS.to_string(), SOURCE_DEFAULT),
        ("group.max.session.timeout.ms", crate::groups::MAX_SESSION_TIMEOUT_MS.to_string(), SOURCE_DEFAULT),
    ];
    settings.extend(topic_defaults().into_iter().map(|(_, name, value)| (name, value, SOURCE_DEFAULT)));
    if !me.rack.is_empty() {
        settings.push(("broker.rack", me.rack.clone(), SOURCE_STATIC));
    }
    settings
}

/// The broker settings topic configs fall back to, as `(topic config, broker setting,
/// value)`: a topic's defaults.
pub(crate) fn topic_defaults() -> [(&'static str, &'static str, String); 7] {
    [
        ("max.message.bytes", "message.max.bytes", MAX_MESSAGE_BYTES.to_string()),
        ("retention.ms", "log.retention.ms", "-1".into()),
        ("retention.bytes", "log.retention.bytes", "-1".into()),
        ("cleanup.policy", "log.cleanup.policy", "delete".into()),
        ("message.timestamp.type", "log.message.timestamp.type", "CreateTime".into()),
        ("delete.retention.ms", "log.cleaner.delete.retention.ms", DEFAULT_DELETE_RETENTION_MS.to_string()),
        ("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", "0".into()),
    ]
}
