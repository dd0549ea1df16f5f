//! DescribeConfigs' entries, for topics and brokers alike: each config's value, source
//! and whether it is read-only; asked for, its synonyms (for a topic's config, the value
//! set on the topic, then the broker setting it falls back to, as Kafka lists them; for a
//! broker's, itself) and, from version 3, its type and documentation.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsSynonym};
use kafka_protocol::protocol::StrBytes;

/// Config sources as DescribeConfigs reports them: set on the topic, in this listener's
/// config, or Kafka's default kept here.
pub(crate) const SOURCE_TOPIC: i8 = 1;
pub(crate) const SOURCE_STATIC: i8 = 4;
pub(crate) const SOURCE_DEFAULT: i8 = 5;

/// One config as DescribeConfigs shows it.
pub(crate) struct Described {
    pub name: &'static str,
    pub value: String,
    pub read_only: bool,
    pub source: i8,
    /// The broker setting a topic's config falls back to, and its value here.
    pub fallback: Option<(&'static str, String)>,
}

/// What a request asks to be shown besides values.
#[derive(Clone, Copy)]
pub(crate) struct Shown {
    pub synonyms: bool,
    pub documentation: bool,
}

/// Kafka's config types (`ConfigEntry.ConfigType`'s codes).
#[derive(Clone, Copy)]
enum Type {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    List = 7,
}

/// Each config shown: its type and what it means here.
const DOCUMENTED: &[(&str, Type, &str)] = &[
    ("retention.ms", Type::Long, "How long a partition keeps records, from their timestamps: its streams' retention age, rounded up to seconds. -1 keeps them forever."),
    ("message.timestamp.type", Type::String, "CreateTime keeps the producer's timestamp (raised to the partition's last one, lowered to the arrival time); LogAppendTime stamps each record on arrival."),
    ("cleanup.policy", Type::List, "delete (retention by age), compact (key compaction, records kept whatever their age) or compact,delete (both)."),
    ("delete.retention.ms", Type::Long, "How long key compaction keeps a tombstone readable, from its timestamp."),
    ("min.compaction.lag.ms", Type::Long, "Records younger than this, by timestamp, are not compacted."),
    ("retention.bytes", Type::Long, "Retention by size is not served: -1 only."),
    ("max.message.bytes", Type::Int, "The largest record batch a produce may carry per partition, as sent."),
    ("broker.id", Type::Int, "This broker's id."),
    ("node.id", Type::Int, "This broker's id."),
    ("broker.rack", Type::String, "The zone this broker serves."),
    ("auto.create.topics.enable", Type::Boolean, "Whether Metadata creates a topic a client asks for that does not exist."),
    ("num.partitions", Type::Int, "Partitions of a topic created without a count."),
    ("socket.request.max.bytes", Type::Int, "The largest request a connection may send."),
    ("default.replication.factor", Type::Int, "1: durability is the object store's; each partition has one replica, always in sync."),
    ("min.insync.replicas", Type::Int, "1: durability is the object store's; each partition has one replica, always in sync."),
    ("message.max.bytes", Type::Int, "The largest record batch a produce may carry per partition, as sent."),
    ("log.retention.ms", Type::Long, "Topics keep their records forever unless retention.ms says otherwise."),
    ("log.cleanup.policy", Type::List, "Topics are created with cleanup.policy delete."),
    ("log.message.timestamp.type", Type::String, "Topics are created with message.timestamp.type CreateTime."),
    ("log.retention.bytes", Type::Long, "Retention by size is not served: -1 only."),
    ("log.cleaner.delete.retention.ms", Type::Long, "Topics keep tombstones readable this long unless delete.retention.ms says otherwise."),
    ("log.cleaner.min.compaction.lag.ms", Type::Long, "Topics compact records of any age unless min.compaction.lag.ms says otherwise."),
    ("transaction.max.timeout.ms", Type::Int, "The longest transaction timeout a producer may ask for."),
    ("group.initial.rebalance.delay.ms", Type::Int, "A new classic group's first round waits for no more members."),
    ("group.min.session.timeout.ms", Type::Int, "The shortest session timeout a classic member may ask for."),
    ("group.max.session.timeout.ms", Type::Int, "The longest session timeout a classic member may ask for."),
];

/// The entries of `described` configs: those `resource` asks for by name, or all when it
/// names none.
pub(crate) fn entries(
    described: Vec<Described>,
    resource: &DescribeConfigsResource,
    shown: Shown,
) -> Vec<DescribeConfigsResourceResult> {
    let wanted = resource.configuration_keys.as_ref().filter(|keys| !keys.is_empty());
    described
        .into_iter()
        .filter(|config| wanted.is_none_or(|keys| keys.iter().any(|k| &**k == config.name)))
        .map(|config| entry(config, shown))
        .collect()
}

fn entry(config: Described, shown: Shown) -> DescribeConfigsResourceResult {
    let documented = DOCUMENTED.iter().find(|(name, ..)| *name == config.name);
    let synonyms = if shown.synonyms { synonyms(&config) } else { Vec::new() };
    let mut entry = DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_static_str(config.name))
        .with_value(Some(StrBytes::from_string(config.value)))
        .with_read_only(config.read_only)
        .with_config_source(config.source)
        .with_synonyms(synonyms)
        .with_documentation(None);
    if let Some(&(_, config_type, documentation)) = documented {
        entry = entry.with_config_type(config_type as i8);
        if shown.documentation {
            entry = entry.with_documentation(Some(StrBytes::from_static_str(documentation)));
        }
    }
    entry
}

/// Where a config's value comes from, most preferred first: the value set on the topic,
/// then the broker setting it falls back to; a broker's setting is its own synonym.
fn synonyms(config: &Described) -> Vec<DescribeConfigsSynonym> {
    let synonym = |name: &'static str, value: &str, source: i8| {
        DescribeConfigsSynonym::default()
            .with_name(StrBytes::from_static_str(name))
            .with_value(Some(StrBytes::from_string(value.to_string())))
            .with_source(source)
    };
    match &config.fallback {
        Some((broker_name, default)) => {
            let set = (config.source == SOURCE_TOPIC).then(|| synonym(config.name, &config.value, SOURCE_TOPIC));
            set.into_iter().chain([synonym(broker_name, default, SOURCE_DEFAULT)]).collect()
        }
        None => vec![synonym(config.name, &config.value, config.source)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retention(value: &str, source: i8) -> Described {
        let fallback = Some(("log.retention.ms", "-1".to_string()));
        Described { name: "retention.ms", value: value.into(), read_only: false, source, fallback }
    }

    fn synonym_list(config: &Described) -> Vec<(String, String, i8)> {
        let value = |s: &DescribeConfigsSynonym| s.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
        synonyms(config).iter().map(|s| (s.name.to_string(), value(s), s.source)).collect()
    }

    #[test]
    fn a_topics_own_value_comes_before_the_broker_setting_it_falls_back_to() {
        let set = retention("60000", SOURCE_TOPIC);
        assert_eq!(
            synonym_list(&set),
            vec![
                ("retention.ms".into(), "60000".into(), SOURCE_TOPIC),
                ("log.retention.ms".into(), "-1".into(), SOURCE_DEFAULT)
            ]
        );
        let default = retention("-1", SOURCE_DEFAULT);
        assert_eq!(synonym_list(&default), vec![("log.retention.ms".into(), "-1".into(), SOURCE_DEFAULT)]);
    }

    #[test]
    fn a_broker_setting_is_its_own_synonym() {
        let setting = Described {
            name: "num.partitions",
            value: "3".into(),
            read_only: true,
            source: SOURCE_STATIC,
            fallback: None,
        };
        assert_eq!(synonym_list(&setting), vec![("num.partitions".into(), "3".into(), SOURCE_STATIC)]);
    }
}
