//! What produce needs to know of a topic on every request, kept for a few seconds so a
//! produce costs no extra metadata call: that it exists, whether it takes LogAppendTime
//! and whether it is compacted (then every record needs a key).

use std::time::Duration;

use shale_proto::TimestampingMode;

use crate::topics::stream_of;
use crate::Kafka;

/// How long a topic's timestamp type is trusted after it was read: an AlterConfigs
/// reaches produce answers within this long.
const TRUSTED_FOR: Duration = Duration::from_secs(5);

pub struct TopicCache {
    traits: moka::future::Cache<String, TopicTraits>,
}

/// What produce needs to know of a topic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TopicTraits {
    /// Records are stamped with their append time (LogAppendTime).
    pub arrival: bool,
    /// `cleanup.policy` includes `compact`: a record without a key is refused.
    pub compacted: bool,
}

impl TopicCache {
    pub fn new() -> Self {
        Self { traits: moka::future::Cache::builder().max_capacity(100_000).time_to_live(TRUSTED_FOR).build() }
    }

    /// What produce needs to know of `topic`; `None` when its first partition cannot be
    /// found (not remembered, so a topic created since is seen).
    pub async fn traits(&self, kafka: &Kafka, topic: &str) -> Option<TopicTraits> {
        if let Some(traits) = self.traits.get(topic).await {
            return Some(traits);
        }
        // The listener's own lookup: a producer's token needs `append`, not the right to
        // read stream configs.
        let config = kafka.discovery.stream_config(&kafka.config.basin, &stream_of(topic, 0)).await.ok()?;
        let traits = TopicTraits {
            arrival: config.timestamp_policy().mode == TimestampingMode::Arrival,
            compacted: config.key_compaction_policy().is_some(),
        };
        self.traits.insert(topic.to_string(), traits).await;
        Some(traits)
    }

    /// Forgets `topic`, deleted by this process, so its next produce finds it gone.
    pub async fn forget(&self, topic: &str) {
        self.traits.invalidate(topic).await;
    }
}
