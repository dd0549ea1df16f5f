use std::time::Duration;

use serde::Deserialize;

/// Gateway knobs. Defaults suit a single node; each field documents what it costs.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// Longest an append waits in the open segment while uploads are in flight. An
    /// append arriving while nothing uploads never waits for it. Bounds PUTs per second at
    /// low load to about `1 / linger` plus one per idle append: 20 ms means at most 50
    /// segment PUTs/s under steady trickle load, about 130 million PUTs a month.
    #[serde(with = "humantime_serde")]
    pub linger: Duration,
    /// Least time between two seals (a full segment seals anyway). 0 (the default)
    /// favours latency: a segment seals whenever nothing is in flight, so on a fast store
    /// segments stay small under load. Setting it caps segment PUTs at about
    /// `1 / min_seal_interval` per second whatever the load (25 ms: at most 40/s, about
    /// 104 million a month), at the price of up to that much wait for appends that
    /// arrive within it of the previous seal.
    #[serde(with = "humantime_serde")]
    pub min_seal_interval: Duration,
    /// A segment seals once it holds this many bytes. Larger segments mean fewer PUTs
    /// per GiB (8 MiB gives 128 segment PUTs per GiB) but more memory per upload.
    pub max_segment_bytes: usize,
    /// Sealed segments that may be uploading or committing at once.
    pub max_inflight_segments: usize,
    /// Bytes of accepted but unacknowledged appends. Past it, appends fail with
    /// `overloaded` instead of growing memory.
    pub max_inflight_bytes: usize,
    /// Sealed segments whose uploads have finished by the time the one ahead of them
    /// commits join its commit: one durable metadata write (one WAL object) for all.
    /// 1 commits every segment on its own.
    pub max_commit_group: usize,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            linger: Duration::from_millis(20),
            min_seal_interval: Duration::ZERO,
            max_segment_bytes: 8 * 1024 * 1024,
            max_inflight_segments: 4,
            max_inflight_bytes: 64 * 1024 * 1024,
            max_commit_group: 16,
        }
    }
}

impl GatewayConfig {
    /// Rejects settings the batcher cannot work with.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_inflight_segments == 0 {
            return Err("max_inflight_segments must be at least 1".into());
        }
        if self.max_commit_group == 0 {
            return Err("max_commit_group must be at least 1".into());
        }
        if self.max_segment_bytes < 1024 {
            return Err("max_segment_bytes must be at least 1 KiB".into());
        }
        if self.max_inflight_bytes < 2 * 1024 * 1024 {
            return Err("max_inflight_bytes must be at least 2 MiB (one full batch plus overhead)".into());
        }
        Ok(())
    }
}
