//! Timing between roles, `[cluster]` in the configuration file: the metadata leader's
//! lease and the metadata client's patience. One definition, read by both sides.

use std::time::Duration;

use serde::Deserialize;

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterTiming {
    /// How long a metadata instance may answer after it last saw itself in the leader
    /// record; a new leader waits this long (plus `renew_interval`) before answering.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
    /// How often the leader renews its lease.
    #[serde(with = "humantime_serde")]
    pub renew_interval: Duration,
    /// One attempt of one metadata call.
    #[serde(with = "humantime_serde")]
    pub call_timeout: Duration,
    /// All attempts of one metadata call, across failovers.
    #[serde(with = "humantime_serde")]
    pub failover_timeout: Duration,
}

impl Default for ClusterTiming {
    fn default() -> Self {
        Self {
            lease: Duration::from_millis(1500),
            renew_interval: Duration::from_millis(250),
            call_timeout: Duration::from_secs(10),
            failover_timeout: Duration::from_secs(30),
        }
    }
}
