//! [`KafkaConfig`]: the `[kafka]` settings of a process that serves Kafka's protocol.

use std::net::SocketAddr;

use serde::Deserialize;

use crate::KafkaError;

/// The Kafka listener's settings (`[kafka]` in the config file).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaConfig {
    /// Where to listen; off unless set (`--kafka 127.0.0.1:9092`).
    pub listen: Option<SocketAddr>,
    /// `host:port` that Metadata and FindCoordinator tell clients to connect to; the
    /// listener's own address when unset.
    pub advertised: Option<String>,
    /// The basin whose streams Kafka clients see as topics; created at start if missing.
    pub basin: String,
    /// Whether Metadata and Produce create unknown topics (Kafka's
    /// `auto.create.topics.enable`), with [`Self::default_partitions`] partitions.
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic, and of CreateTopics asking for the default (-1).
    pub default_partitions: u32,
    /// The largest request a connection may send; a longer frame closes the connection
    /// (Kafka's `socket.request.max.bytes`).
    pub max_request_bytes: usize,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        Self {
            listen: None,
            advertised: None,
            basin: "kafka-topics".into(),
            auto_create_topics: false,
            default_partitions: 1,
            max_request_bytes: 64 << 20,
        }
    }
}

/// Most partitions one topic may have.
pub const MAX_PARTITIONS: u32 = 10_000;

impl KafkaConfig {
    pub fn validate(&self) -> Result<(), KafkaError> {
        shale_proto::names::validate_basin(&self.basin).map_err(KafkaError::Config)?;
        if self.default_partitions == 0 || self.default_partitions > MAX_PARTITIONS {
            return Err(KafkaError::Config(format!("default_partitions must be 1 to {MAX_PARTITIONS}")));
        }
        if self.max_request_bytes < 1 << 20 {
            return Err(KafkaError::Config("max_request_bytes must be at least 1 MiB".into()));
        }
        Ok(())
    }
}
