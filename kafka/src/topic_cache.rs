//! What produce needs to know of a topic's config on every request, kept for a few
//! seconds so a produce costs no extra metadata call: whether it takes LogAppendTime.

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

    /// Whether `topic` stamps records with their append time; `false` when it cannot
    /// be told (the answer then carries -1, as for CreateTime).
    pub async fn is_arrival(&self, kafka: &Kafka, topic: &str) -> bool {
        if let Some(arrival) = self.arrival.get(topic).await {
            return arrival;
        }
        let Ok(config) = kafka.service.stream_config(&kafka.config.basin, &stream_of(topic, 0)).await else {
            return false;
        };
        let arrival = config.timestamp_policy().mode == TimestampingMode::Arrival;
        self.arrival.insert(topic.to_string(), arrival).await;
        arrival
    }
}
