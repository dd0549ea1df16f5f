//! What produce needs to know of a topic on every request, kept for a few seconds so a
//! produce costs no extra metadata call: that it exists, and whether it takes
//! LogAppendTime.

use std::time::Duration;

use shale_proto::TimestampingMode;

use crate::topics::stream_of;
use crate::Kafka;

/// How long a topic's timestamp type is trusted after it was read: an AlterConfigs
/// reaches produce answers within this long.
const TRUSTED_FOR: Duration = Duration::from_secs(5);

pub struct TopicCache {
    arrival: moka::future::Cache<String, bool>,
}

impl TopicCache {
    pub fn new() -> Self {
        Self { arrival: moka::future::Cache::builder().max_capacity(100_000).time_to_live(TRUSTED_FOR).build() }
    }

    /// Whether `topic` stamps records with their append time; `None` when its first
    /// partition cannot be found (not remembered, so a topic created since is seen).
    pub async fn arrival(&self, kafka: &Kafka, topic: &str) -> Option<bool> {
        if let Some(arrival) = self.arrival.get(topic).await {
            return Some(arrival);
        }
        // The listener's own lookup: a producer's token needs `append`, not the right to
        // read stream configs.
        let config = kafka.discovery.stream_config(&kafka.config.basin, &stream_of(topic, 0)).await.ok()?;
        let arrival = config.timestamp_policy().mode == TimestampingMode::Arrival;
        self.arrival.insert(topic.to_string(), arrival).await;
        Some(arrival)
    }

    /// Forgets `topic`, deleted by this process, so its next produce finds it gone.
    pub async fn forget(&self, topic: &str) {
        self.arrival.invalidate(topic).await;
    }
}
