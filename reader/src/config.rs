use serde::Deserialize;

/// Reader knobs.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ReaderConfig {
    /// Bytes of decoded segment blocks kept in memory. A hit saves one range GET (and
    /// the block's decoding). By default an eighth of the memory the process may use
    /// (its cgroup's limit, else the machine's), at least 256 MiB: a catch-up over more
    /// than the cache holds misses on nearly every block.
    pub block_cache_bytes: u64,
    /// Index entries kept in memory (about 100 bytes each). A hit saves one metadata scan
    /// when a reader continues where its last entry ended.
    pub index_cache_entries: u64,
    /// Tracked consumers `/metrics` shows lag for, the furthest behind first (plus the
    /// count and summed lag of all). Each costs a read of one block per scrape.
    pub consumer_lag_top: usize,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        Self {
            block_cache_bytes: crate::memory::block_cache_bytes(crate::memory::available()),
            index_cache_entries: 1_000_000,
            consumer_lag_top: 10,
        }
    }
}
