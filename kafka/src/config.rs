//! [`KafkaConfig`]: the `[kafka]` settings of a process that serves Kafka's protocol.

use std::net::SocketAddr;
use std::time::Duration;

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
    /// The broker id clients know this process by. `shale serve`: 0; an agent: derived
    /// from its advertised address (stable across restarts at the same address).
    pub node_id: Option<i32>,
    /// This broker's zone (Kafka's `broker.rack`): a client whose `client.id` holds
    /// `shale_az=<zone>` is told only of the agents of its zone, when any is live.
    pub rack: String,
    /// An agent renews its registration with metadata this often.
    #[serde(with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    /// An agent not heard from for this long drops out of Metadata answers and its
    /// groups move (the bound after a `kill -9`: this plus one `heartbeat_interval`).
    /// Keep it above a metadata failover (the `[cluster] lease` plus its renewal).
    #[serde(with = "humantime_serde")]
    pub agent_ttl: Duration,
    /// A member of a consumer-protocol group (KIP-848) not heard from for this long is
    /// removed (Kafka's `group.consumer.session.timeout.ms`).
    #[serde(with = "humantime_serde")]
    pub consumer_session_timeout: Duration,
    /// How often such a member heartbeats (`group.consumer.heartbeat.interval.ms`).
    #[serde(with = "humantime_serde")]
    pub consumer_heartbeat_interval: Duration,
    /// How long a record handed to a share group's member stays locked to it unless it
    /// acknowledges it (Kafka's `group.share.record.lock.duration.ms`).
    #[serde(with = "humantime_serde")]
    pub share_record_lock_duration: Duration,
    /// Where a share group starts on a partition it has not read: `latest` (Kafka's
    /// default, `share.auto.offset.reset`) or `earliest`.
    pub share_auto_offset_reset: ShareReset,
    /// The most share sessions one broker holds at once (Kafka's
    /// `group.share.max.share.sessions`): a member opening one more is answered
    /// SHARE_SESSION_LIMIT_REACHED, and retries.
    pub max_share_sessions: usize,
}

/// Where a share group starts reading a partition it has no start offset on.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ShareReset {
    /// Records appended from the group's first fetch of the partition on.
    #[default]
    Latest,
    /// Every record still in the partition.
    Earliest,
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
            node_id: None,
            rack: String::new(),
            heartbeat_interval: Duration::from_secs(1),
            agent_ttl: Duration::from_secs(4),
            consumer_session_timeout: Duration::from_secs(45),
            consumer_heartbeat_interval: Duration::from_secs(5),
            share_record_lock_duration: Duration::from_secs(30),
            share_auto_offset_reset: ShareReset::Latest,
            max_share_sessions: 2_000,
        }
    }
}

/// Most partitions one topic may have.
pub const MAX_PARTITIONS: u32 = 10_000;

impl KafkaConfig {
    /// `consumer_session_timeout` in milliseconds.
    pub fn consumer_session_ms(&self) -> u64 {
        u64::try_from(self.consumer_session_timeout.as_millis()).unwrap_or(u64::MAX)
    }

    pub fn validate(&self) -> Result<(), KafkaError> {
        shale_proto::names::validate_basin(&self.basin).map_err(KafkaError::Config)?;
        if self.default_partitions == 0 || self.default_partitions > MAX_PARTITIONS {
            return Err(KafkaError::Config(format!("default_partitions must be 1 to {MAX_PARTITIONS}")));
        }
        if self.max_request_bytes < 1 << 20 {
            return Err(KafkaError::Config("max_request_bytes must be at least 1 MiB".into()));
        }
        if self.node_id.is_some_and(|id| id < 0) {
            return Err(KafkaError::Config("node_id must not be negative".into()));
        }
        if self.consumer_heartbeat_interval.is_zero()
            || self.consumer_session_timeout <= self.consumer_heartbeat_interval
        {
            return Err(KafkaError::Config(
                "consumer_session_timeout must be longer than consumer_heartbeat_interval, which must not be 0".into(),
            ));
        }
        if self.share_record_lock_duration < Duration::from_secs(1)
            || self.share_record_lock_duration > Duration::from_secs(3600)
        {
            return Err(KafkaError::Config("share_record_lock_duration must be 1 s to 1 h".into()));
        }
        if self.max_share_sessions == 0 {
            return Err(KafkaError::Config("max_share_sessions must be at least 1".into()));
        }
        if self.heartbeat_interval.is_zero() || self.agent_ttl < 2 * self.heartbeat_interval {
            return Err(KafkaError::Config(
                "agent_ttl must be at least twice heartbeat_interval, which must not be 0".into(),
            ));
        }
        if self.agent_ttl > Duration::from_millis(shale_metadata_contract::MAX_AGENT_TTL_MS) {
            return Err(KafkaError::Config(format!(
                "agent_ttl must be at most {} s",
                shale_metadata_contract::MAX_AGENT_TTL_MS / 1000
            )));
        }
        Ok(())
    }

    pub(crate) fn membership(&self) -> crate::brokers::Membership {
        crate::brokers::Membership { interval: self.heartbeat_interval, ttl: self.agent_ttl }
    }

    /// The host and port clients are told to connect to: `advertised`, else `local`.
    pub(crate) fn advertised_address(&self, local: SocketAddr) -> Result<(String, i32), KafkaError> {
        let Some(advertised) = &self.advertised else {
            return Ok((local.ip().to_string(), i32::from(local.port())));
        };
        let (host, port) = advertised
            .rsplit_once(':')
            .ok_or_else(|| KafkaError::Config(format!("advertised `{advertised}` is not host:port")))?;
        let port: u16 =
            port.parse().map_err(|_| KafkaError::Config(format!("advertised `{advertised}` has no valid port")))?;
        Ok((host.trim_start_matches('[').trim_end_matches(']').to_string(), i32::from(port)))
    }
}
