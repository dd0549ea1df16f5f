use std::time::Duration;

use serde::Deserialize;

/// Compaction knobs; each says what it costs.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct CompactorConfig {
    /// Whether this process compacts at all.
    pub enabled: bool,
    /// Time between passes when the last one found nothing to do.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Entries are compacted once their segment was sealed this long ago: recent data
    /// stays where live readers find it in their caches.
    #[serde(with = "humantime_serde")]
    pub min_age: Duration,
    /// The most bytes one compacted object holds (also the memory one pass needs).
    pub object_bytes: u64,
    /// A pass waits until this many bytes are eligible, so objects at rest stay large;
    /// past `max_wait` it compacts whatever is eligible.
    pub min_object_bytes: u64,
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// Consecutive entries of a stream are merged into blocks of about this size: one
    /// range GET per block when reading history.
    pub block_bytes: u64,
    /// Pacing: after a pass that wrote an object, the next waits until the passes have
    /// averaged at most this many bytes written per second (0: no pacing). A backlog then
    /// drains beside live appends instead of taking the disk and cores from them.
    pub max_bytes_per_second: u64,
    /// This compactor handles streams whose id modulo `shards` is `shard`.
    pub shard: u32,
    pub shards: u32,
}

impl Default for CompactorConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            interval: Duration::from_secs(30),
            min_age: Duration::from_secs(60),
            object_bytes: 64 * 1024 * 1024,
            min_object_bytes: 8 * 1024 * 1024,
            max_wait: Duration::from_secs(600),
            block_bytes: 1024 * 1024,
            max_bytes_per_second: 64 * 1024 * 1024,
            shard: 0,
            shards: 1,
        }
    }
}

impl CompactorConfig {
    /// How long to wait after a pass that wrote `bytes` in `took`, so passes average at most
    /// `max_bytes_per_second`.
    pub fn pause_after(&self, bytes: u64, took: Duration) -> Duration {
        if self.max_bytes_per_second == 0 {
            return Duration::ZERO;
        }
        let budget = Duration::from_secs_f64(bytes as f64 / self.max_bytes_per_second as f64);
        budget.saturating_sub(took)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_waits_out_the_rest_of_its_byte_budget() {
        let paced = CompactorConfig { max_bytes_per_second: 32 << 20, ..CompactorConfig::default() };
        // 64 MiB at 32 MiB/s is two seconds' budget; the pass itself took half a second.
        assert_eq!(paced.pause_after(64 << 20, Duration::from_millis(500)), Duration::from_millis(1500));
        assert_eq!(paced.pause_after(64 << 20, Duration::from_secs(3)), Duration::ZERO, "a slow pass waits not at all");
        let unpaced = CompactorConfig { max_bytes_per_second: 0, ..CompactorConfig::default() };
        assert_eq!(unpaced.pause_after(64 << 20, Duration::ZERO), Duration::ZERO);
    }
}
