//! Topic configs, kept on each partition's stream config: `retention.ms` is the
//! retention age, `message.timestamp.type=LogAppendTime` is the arrival timestamping
//! mode, `cleanup.policy=compact` (or `compact,delete`) turns key compaction on, with
//! `delete.retention.ms` and `min.compaction.lag.ms`; `compact` alone keeps records
//! whatever their age (retention infinite), as Kafka does. `retention.bytes` is -1 only and
//! `max.message.bytes` is the fixed batch limit (lower values accepted, not applied); other values are INVALID_CONFIG. Settings
//! of Kafka's that have no meaning on an object store (segment and replica settings) are
//! accepted and ignored.

use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest, AlterConfigsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_metadata_contract::{
    KeyCompactionConfig, RetentionPolicy, StreamConfig, StreamPatch, TimestampingConfig, DEFAULT_DELETE_RETENTION_MS,
};
use shale_proto::TimestampingMode;

use super::{partition_count, stream_of};
use crate::config_entries::{entries, Described, Shown, SOURCE_DEFAULT, SOURCE_TOPIC};
use crate::error::code_of;
use crate::Kafka;

/// Settings as `(name, value)`; `None` resets one to its default.
type Settings = Vec<(String, Option<String>)>;
/// A refusal: its error code and message.
type Refused = (ResponseError, String);

/// Kafka's resource type for topics in the config APIs.
const TOPIC: i8 = 2;

/// The largest record batch (as sent, compressed) one produce may carry per partition:
/// 8 MiB, Kafka's default (1 MiB) raised so that a producer at object-store latency may
/// send more per commit round trip (`batch.size`); decompressed, a batch is bounded by
/// the same 8 MiB (`KAFKA_BATCH_LIMITS`).
pub const MAX_MESSAGE_BYTES: u64 = 8 << 20;

/// Kafka topic settings with no meaning here, accepted and ignored.
const IGNORED: &[&str] = &[
    "compression.type",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "segment.bytes",
    "segment.ms",
    "segment.index.bytes",
    "segment.jitter.ms",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "file.delete.delay.ms",
    "preallocate",
    "message.downconversion.enable",
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    // Key compaction runs when a stream's dirty bytes reach half its clean ones, and
    // within the compactor's interval: these tune what is fixed here.
    "min.cleanable.dirty.ratio",
    "max.compaction.lag.ms",
];

/// Settings in the order they apply: `cleanup.policy` last, so `compact` alone leaves
/// retention infinite whatever `retention.ms` the same request sets, as in Kafka.
fn in_order(settings: impl IntoIterator<Item = (String, Option<String>)>) -> Vec<(String, Option<String>)> {
    let mut settings: Vec<_> = settings.into_iter().collect();
    settings.sort_by_key(|(name, _)| name == "cleanup.policy");
    settings
}

/// The stream config a topic's settings give; `Err` names the first refused setting.
pub fn stream_config(settings: impl IntoIterator<Item = (String, Option<String>)>) -> Result<StreamConfig, String> {
    let mut config = StreamConfig::default();
    for (name, value) in in_order(settings) {
        let patch = setting(&name, value.as_deref())?;
        config = patch.apply(config, None);
    }
    Ok(config)
}

/// What one setting changes; `None` resets it to its default.
fn setting(name: &str, value: Option<&str>) -> Result<StreamPatch, String> {
    let invalid = |why: &str| Err(format!("{name}={}: {why}", value.unwrap_or("(default)")));
    let mut patch = StreamPatch::default();
    match (name, value) {
        ("retention.ms", None | Some("-1")) => patch.retention_policy = Some(RetentionPolicy::Infinite),
        ("retention.ms", Some(ms)) => match ms.parse::<u64>() {
            Ok(ms) if ms > 0 => patch.retention_policy = Some(RetentionPolicy::Age(ms.div_ceil(1000))),
            _ => return invalid("must be -1 or a positive number of milliseconds"),
        },
        ("message.timestamp.type", None | Some("CreateTime")) => patch.timestamping = Some(timestamping(false)),
        ("message.timestamp.type", Some("LogAppendTime")) => patch.timestamping = Some(timestamping(true)),
        ("message.timestamp.type", _) => return invalid("must be CreateTime or LogAppendTime"),
        ("cleanup.policy", None | Some("delete")) => patch.key_compaction = Some(compaction(Some(false), None, None)),
        ("cleanup.policy", Some(policy)) => {
            let mut parts: Vec<&str> = policy.split(',').map(str::trim).collect();
            parts.sort_unstable();
            match parts.as_slice() {
                ["compact"] => patch.retention_policy = Some(RetentionPolicy::Infinite),
                ["compact", "delete"] => {}
                _ => return invalid("must be delete, compact or compact,delete"),
            }
            patch.key_compaction = Some(compaction(Some(true), None, None));
        }
        ("delete.retention.ms", value) => match value.map_or(Ok(DEFAULT_DELETE_RETENTION_MS), str::parse::<u64>) {
            Ok(ms) => patch.key_compaction = Some(compaction(None, Some(ms), None)),
            Err(_) => return invalid("must be a number of milliseconds"),
        },
        ("min.compaction.lag.ms", value) => match value.map_or(Ok(0), str::parse::<u64>) {
            Ok(ms) => patch.key_compaction = Some(compaction(None, None, Some(ms))),
            Err(_) => return invalid("must be a number of milliseconds"),
        },
        ("retention.bytes", None | Some("-1")) => {}
        ("retention.bytes", _) => return invalid("retention by size is not supported; use retention.ms"),
        ("max.message.bytes", None) => {}
        // Tools that create topics with Kafka's default (or any value up to the limit)
        // keep working; the limit served stays MAX_MESSAGE_BYTES.
        ("max.message.bytes", Some(v)) if v.parse::<u64>().is_ok_and(|v| v > 0 && v <= MAX_MESSAGE_BYTES) => {}
        ("max.message.bytes", _) => return invalid(&format!("at most {MAX_MESSAGE_BYTES}, the fixed batch limit")),
        (name, _) if IGNORED.contains(&name) => {}
        _ => return invalid("unknown topic config"),
    }
    Ok(patch)
}

fn compaction(enabled: Option<bool>, delete_retention_ms: Option<u64>, min_lag_ms: Option<u64>) -> KeyCompactionConfig {
    KeyCompactionConfig { enabled, delete_retention_ms, min_lag_ms }
}

fn timestamping(log_append_time: bool) -> TimestampingConfig {
    let mode = if log_append_time { TimestampingMode::Arrival } else { TimestampingMode::ClientPrefer };
    TimestampingConfig { mode: Some(mode), uncapped: None }
}

/// The configs DescribeConfigs shows for a topic whose partition 0 has `config`: each
/// value set on the topic, else the broker setting it falls back to.
fn described(config: &StreamConfig) -> Vec<Described> {
    let retention = match config.retention_policy {
        Some(RetentionPolicy::Age(secs)) => Some(secs.saturating_mul(1000).to_string()),
        Some(RetentionPolicy::Infinite) | None => None,
    };
    let arrival = config.timestamp_policy().mode == TimestampingMode::Arrival;
    let compaction = config.key_compaction.unwrap_or_default();
    let cleanup = match (config.key_compaction_policy(), config.retention_policy) {
        (None, _) => None,
        (Some(_), Some(RetentionPolicy::Age(_))) => Some("compact,delete"),
        (Some(_), _) => Some("compact"),
    };
    let topic = |name: &'static str, set: Option<String>, read_only: bool| {
        let fallback = broker_default(name);
        let source = if set.is_some() { SOURCE_TOPIC } else { SOURCE_DEFAULT };
        let value = set.or_else(|| fallback.as_ref().map(|(_, value)| value.clone())).unwrap_or_default();
        Described { name, value, read_only, source, fallback }
    };
    vec![
        topic("retention.ms", retention, false),
        topic("message.timestamp.type", arrival.then(|| "LogAppendTime".to_string()), false),
        topic("cleanup.policy", cleanup.map(String::from), false),
        topic("delete.retention.ms", compaction.delete_retention_ms.map(|ms| ms.to_string()), false),
        topic("min.compaction.lag.ms", compaction.min_lag_ms.map(|ms| ms.to_string()), false),
        topic("retention.bytes", None, true),
        topic("max.message.bytes", None, true),
    ]
}

/// The broker setting a topic config falls back to (Kafka's name for it) and its value
/// here: a topic's default.
fn broker_default(topic_config: &str) -> Option<(&'static str, String)> {
    let defaults = crate::broker_configs::topic_defaults();
    defaults.into_iter().find(|(name, ..)| *name == topic_config).map(|(_, broker, value)| (broker, value))
}

pub async fn describe_configs(kafka: &Kafka, request: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let shown = Shown { synonyms: request.include_synonyms, documentation: request.include_documentation };
    let mut results = Vec::new();
    for resource in request.resources {
        let result = DescribeConfigsResult::default()
            .with_resource_type(resource.resource_type)
            .with_resource_name(resource.resource_name.clone());
        if resource.resource_type == crate::broker_configs::BROKER {
            results.push(crate::broker_configs::describe(kafka, &resource, result, shown));
            continue;
        }
        if resource.resource_type != TOPIC {
            // Broker loggers (and the rest) have no settings a client can see here.
            results.push(result);
            continue;
        }
        let topic = resource.resource_name.to_string();
        let config = match partition_count(kafka, &topic).await {
            Ok(0) => Err((ResponseError::UnknownTopicOrPartition, format!("topic `{topic}` does not exist"))),
            Ok(_) => kafka
                .service
                .stream_config(&kafka.config.basin, &stream_of(&topic, 0))
                .await
                .map_err(|e| (code_of(&e), e.to_string())),
            Err(e) => Err((code_of(&e), e.to_string())),
        };
        let config = match config {
            Ok(config) => config,
            Err((error, message)) => {
                let failed =
                    result.with_error_code(error.code()).with_error_message(Some(StrBytes::from_string(message)));
                results.push(failed);
                continue;
            }
        };
        results.push(result.with_configs(entries(described(&config), &resource, shown)));
    }
    DescribeConfigsResponse::default().with_results(results)
}

/// Applies `patch` to every partition of `topic`.
async fn apply(kafka: &Kafka, topic: &str, patch: StreamPatch, validate_only: bool) -> Result<(), Refused> {
    let partitions = partition_count(kafka, topic).await.map_err(|e| (code_of(&e), e.to_string()))?;
    if partitions == 0 {
        return Err((ResponseError::UnknownTopicOrPartition, format!("topic `{topic}` does not exist")));
    }
    if validate_only {
        return Ok(());
    }
    for partition in 0..partitions {
        let stream = stream_of(topic, partition as i32);
        kafka
            .service
            .reconfigure_stream(&kafka.config.basin, &stream, patch.clone())
            .await
            .map_err(|e| (code_of(&e), e.to_string()))?;
    }
    Ok(())
}

/// The patch a set of settings makes, after every other setting is reset (`reset`).
fn patch_of(settings: Settings, reset: bool) -> Result<StreamPatch, Refused> {
    let mut patch = StreamPatch::default();
    if reset {
        for name in
            ["retention.ms", "message.timestamp.type", "cleanup.policy", "delete.retention.ms", "min.compaction.lag.ms"]
        {
            patch = merge(patch, setting(name, None).map_err(invalid)?);
        }
    }
    for (name, value) in in_order(settings) {
        patch = merge(patch, setting(&name, value.as_deref()).map_err(invalid)?);
    }
    Ok(patch)
}

fn invalid(message: String) -> Refused {
    (ResponseError::InvalidConfig, message)
}

fn merge(mut into: StreamPatch, from: StreamPatch) -> StreamPatch {
    into.retention_policy = from.retention_policy.or(into.retention_policy);
    into.timestamping = from.timestamping.or(into.timestamping);
    into.key_compaction = match (into.key_compaction, from.key_compaction) {
        (Some(into), Some(from)) => Some(compaction(
            from.enabled.or(into.enabled),
            from.delete_retention_ms.or(into.delete_retention_ms),
            from.min_lag_ms.or(into.min_lag_ms),
        )),
        (into, from) => from.or(into),
    };
    into
}

/// The error fields of one resource's answer.
fn outcome(result: Result<(), Refused>) -> (i16, Option<StrBytes>) {
    match result {
        Ok(()) => (0, None),
        Err((error, message)) => (error.code(), Some(StrBytes::from_string(message))),
    }
}

async fn alter_one(
    kafka: &Kafka,
    resource_type: i8,
    topic: &str,
    settings: Result<Settings, Refused>,
    reset: bool,
    validate_only: bool,
) -> Result<(), Refused> {
    if resource_type != TOPIC {
        return Err((ResponseError::InvalidRequest, "only topic configs can be changed".into()));
    }
    let patch = patch_of(settings?, reset)?;
    apply(kafka, topic, patch, validate_only).await
}

pub async fn alter_configs(kafka: &Kafka, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut responses = Vec::new();
    for resource in request.resources {
        let settings = resource.configs.iter().map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())));
        let topic = resource.resource_name.to_string();
        let result =
            alter_one(kafka, resource.resource_type, &topic, Ok(settings.collect()), true, request.validate_only).await;
        let (error_code, error_message) = outcome(result);
        responses.push(
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
                .with_error_code(error_code)
                .with_error_message(error_message),
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}

/// IncrementalAlterConfigs' operations: set and delete (back to the default).
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

pub async fn incremental_alter_configs(
    kafka: &Kafka,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::new();
    for resource in request.resources {
        let settings: Result<Vec<_>, _> = resource
            .configs
            .iter()
            .map(|c| match c.config_operation {
                OP_SET => Ok((c.name.to_string(), c.value.as_ref().map(|v| v.to_string()))),
                OP_DELETE => Ok((c.name.to_string(), None)),
                _ => Err(invalid(format!("{}: only SET and DELETE apply to these configs", &*c.name))),
            })
            .collect();
        let topic = resource.resource_name.to_string();
        let result = alter_one(kafka, resource.resource_type, &topic, settings, false, request.validate_only).await;
        let (error_code, error_message) = outcome(result);
        responses.push(
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name)
                .with_error_code(error_code)
                .with_error_message(error_message),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn settings_map_onto_stream_configs_or_are_refused() {
        let config = stream_config([
            ("retention.ms".to_string(), Some("1500".to_string())),
            ("message.timestamp.type".to_string(), Some("LogAppendTime".to_string())),
            ("segment.bytes".to_string(), Some("1024".to_string())),
        ])
        .unwrap();
        assert_eq!(config.retention_policy, Some(RetentionPolicy::Age(2)));
        assert_eq!(config.timestamp_policy().mode, TimestampingMode::Arrival);
        for (name, value) in [
            ("cleanup.policy", "compact,archive"),
            ("delete.retention.ms", "-5"),
            ("retention.bytes", "100"),
            ("max.message.bytes", "8388609"),
            ("max.message.bytes", "0"),
            ("retention.ms", "0"),
            ("no.such.config", "1"),
        ] {
            let refused = stream_config([(name.to_string(), Some(value.to_string()))]).unwrap_err();
            assert!(refused.starts_with(name), "{refused}");
        }
    }

    #[test]
    fn compact_alone_keeps_records_whatever_their_age_and_compact_delete_keeps_retention() {
        let settings = |policy: &str| {
            [
                ("cleanup.policy".to_string(), Some(policy.to_string())),
                ("retention.ms".to_string(), Some("60000".to_string())),
                ("delete.retention.ms".to_string(), Some("100".to_string())),
                ("min.compaction.lag.ms".to_string(), Some("5".to_string())),
            ]
        };
        let compact = stream_config(settings("compact")).unwrap();
        assert_eq!(compact.retention_policy, Some(RetentionPolicy::Infinite), "retention.ms does not apply");
        let policy = compact.key_compaction_policy().unwrap();
        assert_eq!((policy.delete_retention_ms, policy.min_lag_ms), (100, 5));
        let both = stream_config(settings("delete, compact")).unwrap();
        assert_eq!(both.retention_policy, Some(RetentionPolicy::Age(60)));
        assert!(both.key_compaction_policy().is_some());
        let cleanup =
            |config: &StreamConfig| described(config).into_iter().find(|c| c.name == "cleanup.policy").unwrap().value;
        assert_eq!((cleanup(&compact), cleanup(&both)), ("compact".to_string(), "compact,delete".to_string()));
        // Back to delete: key compaction off, its settings kept.
        let off = patch_of(vec![("cleanup.policy".into(), Some("delete".into()))], false).unwrap().apply(compact, None);
        assert_eq!(off.key_compaction_policy(), None);
        assert_eq!(cleanup(&off), "delete");
    }
}
