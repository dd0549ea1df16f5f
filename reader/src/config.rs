use serde::Deserialize;

/// Reader knobs.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ReaderConfig {
    /// Bytes of decoded segment blocks kept in memory. A hit saves one range GET (and
    /// the block's decoding). By default an eighth of the memory the process may use
    /// (its cgroup's limit, else the machine's), at least 256 MiB and at most 1 GiB
    /// ([`crate::MAX_DEFAULT_BLOCK_CACHE_BYTES`] says why). A read further behind its
    /// stream's tail than half of it holds takes the blocks it fetched back out once
    /// past them, so a catch-up does not push out the tail's blocks.
    pub block_cache_bytes: u64,
    /// Index entries kept in memory (about 100 bytes each). A hit saves one metadata scan
    /// when a reader continues where its last entry ended.
    pub index_cache_entries: u64,
    /// Tracked consumers `/metrics` shows lag for, the furthest behind first (plus the
    /// count and summed lag of all). Each costs a read of one block per scrape.
    pub consumer_lag_top: usize,
    /// Blocks smaller than half this are read through aligned chunks of their segment
    /// this big, one range GET each, shared by every stream reading the segment: a
    /// topic's 16 partitions produced together cost one GET per chunk instead of one per
    /// block per partition (at 30 ms per request, catch-up of 16 partitions went from
    /// 32 to about 150 MiB/s, GETs per GiB from 7,200 to 650). It costs copying each block
    /// out of its chunk and up to one chunk read ahead: on a local disk, where a read
    /// costs no round trip, 16 partitions caught up about 18% slower with it. 0 reads
    /// every block alone; unset, the server decides by its store
    /// ([`DEFAULT_CHUNK_BYTES`] on an object store, 0 on an undelayed local directory).
    pub chunk_bytes: Option<u64>,
    /// In a process that also writes segments (`shale serve`, `shale agent`), the last
    /// this many bytes of segments it wrote stay in memory and answer its own reads of
    /// them: a reader following the tail gets the blocks just committed without a store
    /// request (a file read on a local directory, a GET on S3). 0 turns it off.
    pub recent_write_bytes: u64,
}

/// [`ReaderConfig::chunk_bytes`] on an object store.
pub const DEFAULT_CHUNK_BYTES: u64 = 4 << 20;

impl Default for ReaderConfig {
    fn default() -> Self {
        Self {
            block_cache_bytes: crate::memory::block_cache_bytes(crate::memory::available()),
            index_cache_entries: 1_000_000,
            consumer_lag_top: 10,
            chunk_bytes: None,
            recent_write_bytes: 64 << 20,
        }
    }
}
