//! Byte-weighed caches of decoded blocks, segment chunks and index entries. Blocks and
//! chunks are immutable: the bytes an index entry points at never change. Index entries
//! are replaced by compaction: a merged one holds the same records, a key-compacted one
//! fewer (superseded values gone), so a cached entry is never wrong to serve but may show
//! what key compaction has since dropped; cached entries expire after [`INDEX_TTL`], which
//! bounds how long.
//!
//! The block cache lets the least recently used block go. What a read fetches stays
//! there for the readers after it, unless the read is further behind its stream's tail
//! than half the cache holds ([`Reach`]): a catch-up over history takes the blocks it
//! fetched back out once it has read past them, so it holds no more room than its
//! read-ahead. Were they kept, each one would evict the oldest block cached, which is the
//! next one it reads: catching up over a little more than the cache holds would miss on
//! every block and push out what readers near the tail use.
//!
//! A small block is read through its segment's aligned chunk (`chunk_bytes`), fetched
//! with one range GET and kept a while: a segment holds the blocks of many streams side
//! by side (a Kafka topic's partitions, produced together), and reading them one range
//! GET each costs a store round trip per block. Blocks of half a chunk or more are read
//! with a range GET of their own.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use moka::future::Cache;
use shale_metadata_contract::IndexEntry;
use shale_proto::segment::{decode_block, DecodedBlock};
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt};

use crate::{ReaderConfig, ReaderError};

/// Hit and miss counts, for `/metrics`.
#[derive(Debug, Default)]
pub struct CacheStats {
    pub block_hits: AtomicU64,
    pub block_misses: AtomicU64,
    pub index_hits: AtomicU64,
    pub index_misses: AtomicU64,
    pub chunk_fetches: AtomicU64,
}

impl CacheStats {
    pub fn render(&self, out: &mut String) {
        let counters = [
            ("shale_cache_block_hits_total", "Block reads served from cache", &self.block_hits),
            ("shale_cache_block_misses_total", "Block reads that needed a range GET", &self.block_misses),
            ("shale_cache_index_hits_total", "Index entries served from cache", &self.index_hits),
            ("shale_cache_index_misses_total", "Index lookups that went to metadata", &self.index_misses),
            ("shale_cache_chunk_fetches_total", "Segment chunks fetched for small blocks", &self.chunk_fetches),
        ];
        shale_storage::render_counters(&counters, out);
    }
}

/// How long a cached index entry is used: a key compaction reaches reads within this.
pub const INDEX_TTL: std::time::Duration = std::time::Duration::from_secs(30);

/// How long the blocks a read fetches stay cached, by how far behind its stream's tail
/// the read is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Near the tail: until evicted, for live followers and readers close behind.
    Tail,
    /// Further behind than half the cache holds: until the read has passed them.
    History,
}

/// A cached block, and whether a read of [`Reach::History`] fetched it.
#[derive(Clone)]
struct Kept {
    block: Arc<DecodedBlock>,
    by_history: bool,
}

#[derive(Clone)]
pub(crate) struct Caches {
    store: Arc<dyn ObjectStore>,
    blocks: Cache<(u128, u64), Kept>,
    /// `(segment, chunk index)` -> the chunk's bytes (the last one may be shorter).
    chunks: Cache<(u128, u64), Bytes>,
    /// [`ReaderConfig::chunk_bytes`]: 0 reads every block alone.
    chunk_bytes: u64,
    /// `(stream id, first seq)` -> entry: continuing reads start exactly at an entry.
    index: Cache<(u64, u64), IndexEntry>,
    /// Stream id -> the entries of its last index scan, so a read continuing from inside
    /// an entry (a batch cut by a limit) finds it without another scan.
    last_scan: Cache<u64, Arc<Vec<IndexEntry>>>,
    pub stats: Arc<CacheStats>,
}

impl Caches {
    pub fn new(config: &ReaderConfig, store: Arc<dyn ObjectStore>) -> Self {
        tracing::debug!(block_cache_bytes = config.block_cache_bytes, "reader caches");
        // Least recently used, not frequency-admitted: the tail's newest blocks are what
        // its followers read next, and moka's admission turned them away once the cache
        // was full (the new block's count tied the oldest one's), keeping older blocks.
        let blocks = Cache::builder()
            .max_capacity(config.block_cache_bytes)
            .eviction_policy(moka::policy::EvictionPolicy::lru())
            .weigher(|_key, kept: &Kept| block_weight(&kept.block))
            .build();
        // Least recently used, not frequency-admitted: a chunk is wanted by the partitions
        // reading it within moments of its fetch, and rarely again.
        let chunks = Cache::builder()
            .max_capacity(chunk_cache_bytes(config.block_cache_bytes))
            .eviction_policy(moka::policy::EvictionPolicy::lru())
            .weigher(|_key, chunk: &Bytes| u32::try_from(chunk.len()).unwrap_or(u32::MAX))
            .build();
        let index = Cache::builder().max_capacity(config.index_cache_entries).time_to_live(INDEX_TTL).build();
        let last_scan = Cache::builder()
            .max_capacity(config.index_cache_entries)
            .time_to_live(INDEX_TTL)
            .weigher(|_stream, entries: &Arc<Vec<IndexEntry>>| u32::try_from(entries.len()).unwrap_or(u32::MAX))
            .build();
        let chunk_bytes = config.chunk_bytes.unwrap_or(crate::DEFAULT_CHUNK_BYTES);
        Self { store, blocks, chunks, chunk_bytes, index, last_scan, stats: Arc::default() }
    }

    pub async fn entry(&self, stream_id: u64, first_seq: u64) -> Option<IndexEntry> {
        let entry = self.index.get(&(stream_id, first_seq)).await;
        let counter = if entry.is_some() { &self.stats.index_hits } else { &self.stats.index_misses };
        counter.fetch_add(1, Ordering::Relaxed);
        entry
    }

    /// Caches the entries of an index scan.
    pub async fn remember(&self, stream_id: u64, entries: &[IndexEntry]) {
        for entry in entries {
            self.index.insert((stream_id, entry.first_seq), *entry).await;
        }
        self.last_scan.insert(stream_id, Arc::new(entries.to_vec())).await;
    }

    /// The entries of the stream's last scan from the one holding `seq`, if it holds it.
    pub async fn scanned(&self, stream_id: u64, seq: u64) -> Option<Vec<IndexEntry>> {
        let entries = self.last_scan.get(&stream_id).await?;
        let at = entries.iter().position(|entry| entry.first_seq <= seq && seq < entry.end_seq())?;
        self.stats.index_hits.fetch_add(1, Ordering::Relaxed);
        Some(entries[at..].to_vec())
    }

    /// Forgets what is cached about a stream's index from `first_seq` on: an entry there
    /// named an object that is gone.
    pub async fn forget(&self, stream_id: u64, first_seq: u64) {
        self.index.invalidate(&(stream_id, first_seq)).await;
        self.last_scan.invalidate(&stream_id).await;
    }

    /// The reach of a read at `seq` of a stream whose tail is `tail_seq`, `entry` (the
    /// one holding `seq`) standing for the size of the records between: history when they
    /// would weigh more than half the cache, whose blocks that far back are likely gone
    /// and would each evict one ahead of the read.
    pub fn reach(&self, entry: &IndexEntry, seq: u64, tail_seq: u64) -> Reach {
        let per_record = u64::from(entry.len) / u64::from(entry.record_count.max(1)) + RECORD_WEIGHT;
        let behind = tail_seq.saturating_sub(seq).saturating_mul(per_record);
        if behind > self.block_bytes() / 2 {
            Reach::History
        } else {
            Reach::Tail
        }
    }

    /// The weight the block cache holds at most.
    fn block_bytes(&self) -> u64 {
        self.blocks.policy().max_capacity().unwrap_or(u64::MAX)
    }

    /// The decoded block an entry points at, from the cache or by one range GET (cached,
    /// marked with the read's reach).
    pub async fn block(&self, entry: &IndexEntry, reach: Reach) -> Result<Arc<DecodedBlock>, ReaderError> {
        let key = block_key(entry);
        let entry = *entry;
        let by_history = reach == Reach::History;
        let cached = self
            .blocks
            .entry(key)
            .or_try_insert_with(async move {
                let block = self.fetch_block(&entry).await?;
                Ok(Kept { block: Arc::new(block), by_history })
            })
            .await
            .map_err(|e: Arc<ReaderError>| clone_error(&e))?;
        let counter = if cached.is_fresh() { &self.stats.block_misses } else { &self.stats.block_hits };
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(cached.into_value().block)
    }

    /// A read of `reach` has read past `entry`'s block: one a read of
    /// [`Reach::History`] fetched leaves the cache.
    pub async fn passed(&self, entry: &IndexEntry, reach: Reach) {
        if reach == Reach::History {
            let key = block_key(entry);
            if self.blocks.get(&key).await.is_some_and(|kept| kept.by_history) {
                self.blocks.invalidate(&key).await;
            }
        }
    }

    /// Fetches the blocks of `entries` not yet cached into the cache in the background,
    /// all at once, for a read of `reach`: a session's next batch then finds them there
    /// (or joins their fetch). Blocks already cached are not looked up, so the hit counts
    /// stay those of reads. Errors are left for that read to meet. Returns the background
    /// fetch, if any.
    pub fn warm(&self, entries: &[IndexEntry], reach: Reach) -> Option<tokio::task::JoinHandle<()>> {
        let missing: Vec<IndexEntry> =
            entries.iter().filter(|e| !self.blocks.contains_key(&block_key(e))).copied().collect();
        if missing.is_empty() {
            return None;
        }
        let caches = self.clone();
        Some(tokio::spawn(async move {
            let fetches = missing.iter().map(|entry| caches.block(entry, reach));
            let _ = futures::future::join_all(fetches).await;
        }))
    }
}

impl Caches {
    async fn fetch_block(&self, entry: &IndexEntry) -> Result<DecodedBlock, ReaderError> {
        let object = shale_proto::segment::object_path(entry.segment_id);
        let range = entry.offset..entry.offset + u64::from(entry.len);
        let bytes = if self.chunk_bytes > 0 && 2 * u64::from(entry.len) <= self.chunk_bytes {
            self.read_through_chunks(&object, entry.segment_id, range).await?
        } else {
            get_block(self.store.as_ref(), &object, range).await?
        };
        let block = decode_block(&object, &bytes).map_err(|e| shale_proto::segment::at_offset(e, entry.offset))?;
        if !entry.fits(&block) {
            return Err(ReaderError::Segment(shale_proto::SegmentError::Malformed {
                object,
                offset: entry.offset,
                detail: "record count differs from index entry",
            }));
        }
        Ok(block)
    }

    /// `range` of the segment, from its chunks (fetched once each, concurrent readers
    /// joining one fetch). Copied out, so a cached block does not hold its chunk. The
    /// chunk after the last one used is fetched in the background when the object goes
    /// on: readers of a segment go through it in order.
    async fn read_through_chunks(
        &self,
        object: &str,
        segment_id: u128,
        range: Range<u64>,
    ) -> Result<Bytes, ReaderError> {
        let mut out = BytesMut::with_capacity((range.end - range.start) as usize);
        let last = (range.end - 1) / self.chunk_bytes;
        for index in range.start / self.chunk_bytes..=last {
            let chunk_start = index * self.chunk_bytes;
            let chunk = self.chunk(object, segment_id, index).await?;
            let from = range.start.max(chunk_start) - chunk_start;
            let to = range.end.min(chunk_start + self.chunk_bytes) - chunk_start;
            let slice = chunk.get(from as usize..to as usize).ok_or_else(|| ReaderError::Fetch {
                object: object.to_string(),
                reason: format!("object ends before {}, inside a block", chunk_start + to),
            })?;
            out.extend_from_slice(slice);
            if index == last
                && chunk.len() as u64 == self.chunk_bytes
                && !self.chunks.contains_key(&(segment_id, index + 1))
            {
                let (caches, object) = (self.clone(), object.to_string());
                tokio::spawn(async move {
                    let _ = caches.chunk(&object, segment_id, index + 1).await;
                });
            }
        }
        Ok(out.freeze())
    }

    /// Chunk `index` of the segment, from the cache or by one range GET.
    async fn chunk(&self, object: &str, segment_id: u128, index: u64) -> Result<Bytes, ReaderError> {
        let start = index * self.chunk_bytes;
        let chunk = self
            .chunks
            .entry((segment_id, index))
            .or_try_insert_with(async {
                self.stats.chunk_fetches.fetch_add(1, Ordering::Relaxed);
                // The last chunk of an object is shorter: the store answers what there is.
                get_range(self.store.as_ref(), object, start..start + self.chunk_bytes).await
            })
            .await
            .map_err(|e: Arc<ReaderError>| clone_error(&e))?;
        Ok(chunk.into_value())
    }
}

/// The chunk cache's share of the block cache's budget: a quarter, between 16 and 512 MiB.
fn chunk_cache_bytes(block_cache_bytes: u64) -> u64 {
    (block_cache_bytes / 4).clamp(16 << 20, 512 << 20)
}

/// Where the block cache keeps an entry's block: `(segment, offset)`.
fn block_key(entry: &IndexEntry) -> (u128, u64) {
    (entry.segment_id, entry.offset)
}

/// What a decoded record weighs besides its bytes.
const RECORD_WEIGHT: u64 = 64;

/// Decoded records share the fetched buffer, so a block weighs about its encoded size.
fn block_weight(block: &DecodedBlock) -> u32 {
    let bytes: usize = block
        .records
        .iter()
        .map(|r| {
            RECORD_WEIGHT as usize
                + r.body.len()
                + r.headers.iter().map(|h| 32 + h.name.len() + h.value.len()).sum::<usize>()
        })
        .sum();
    u32::try_from(bytes).unwrap_or(u32::MAX)
}

/// `range` of the object, up to its end (a chunk may pass it).
async fn get_range(store: &dyn ObjectStore, object: &str, range: Range<u64>) -> Result<Bytes, ReaderError> {
    store.get_range(&Path::from(object), range).await.map_err(|e| fetch_error(object, e))
}

/// Exactly `range` of the object (a block, where its index entry says it is). Asked as
/// `get_ranges` of one range: the same one request on S3, and on a local directory one
/// blocking-pool task that opens and reads the file, where `get_range` takes two (its
/// open, then its read), each a thread hand-off.
async fn get_block(store: &dyn ObjectStore, object: &str, range: Range<u64>) -> Result<Bytes, ReaderError> {
    let mut read = store
        .get_ranges(&Path::from(object), std::slice::from_ref(&range))
        .await
        .map_err(|e| fetch_error(object, e))?;
    read.pop().ok_or_else(|| ReaderError::Fetch { object: object.to_string(), reason: "no range answered".into() })
}

fn fetch_error(object: &str, error: shale_storage::object_store::Error) -> ReaderError {
    match error {
        shale_storage::object_store::Error::NotFound { .. } => ReaderError::Gone { object: object.to_string() },
        e => {
            tracing::warn!(%object, error = %e, "segment fetch failed");
            ReaderError::Fetch { object: object.to_string(), reason: shale_storage::describe(&e).to_string() }
        }
    }
}

/// Errors shared by coalesced loads reach every waiter; rebuild an owned one.
fn clone_error(error: &ReaderError) -> ReaderError {
    match error {
        ReaderError::Fetch { object, reason } => ReaderError::Fetch { object: object.clone(), reason: reason.clone() },
        ReaderError::Gone { object } => ReaderError::Gone { object: object.clone() },
        ReaderError::Segment(e) => ReaderError::Segment(e.clone()),
        other => ReaderError::Fetch { object: String::new(), reason: other.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use shale_proto::segment::{encode_block, object_path};
    use shale_proto::{Record, SegmentBuilder, TimestampPolicy, TimestampingMode};
    use shale_storage::object_store::memory::InMemory;
    use shale_storage::object_store::PutPayload;

    use super::*;

    /// One segment of `blocks` one-record blocks on `store`, and their index entries.
    async fn segment(store: &dyn ObjectStore, blocks: u64) -> Vec<IndexEntry> {
        let segment_id = 7;
        let mut builder = SegmentBuilder::new();
        let mut entries = Vec::new();
        for seq in 0..blocks {
            let record =
                Record { timestamp: None, headers: Default::default(), body: Bytes::from(format!("record {seq}")) };
            let info = builder.push_block(Bytes::from_static(b"b/s"), 1, encode_block(100, &[record]));
            entries.push(IndexEntry {
                segment_id,
                offset: info.offset,
                len: info.len,
                first_seq: seq,
                record_count: 1,
                first_timestamp: 100,
                last_timestamp: 100,
                timestamp_floor: 0,
                timestamp_policy: TimestampPolicy { mode: TimestampingMode::Arrival, uncapped: false },
                arrival_cap: None,
                metered_end: None,
            });
        }
        let payload = PutPayload::from_iter(builder.finish_parts());
        store.put(&Path::from(object_path(segment_id)), payload).await.unwrap();
        entries
    }

    /// Warming fetches only what is not cached, and a read after it hits the cache: the
    /// miss count is the GETs made, the hit count the reads served from memory.
    #[tokio::test]
    async fn warming_fetches_only_uncached_blocks_and_reads_then_hit() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let entries = segment(store.as_ref(), 3).await;
        let caches = Caches::new(&ReaderConfig::default(), store);
        caches.block(&entries[0], Reach::Tail).await.unwrap();
        let counts = |caches: &Caches| {
            (caches.stats.block_hits.load(Ordering::Relaxed), caches.stats.block_misses.load(Ordering::Relaxed))
        };
        assert_eq!(counts(&caches), (0, 1));

        assert!(caches.warm(&entries[..1], Reach::Tail).is_none(), "nothing to fetch: no background task");
        caches.warm(&entries, Reach::Tail).expect("two blocks to fetch").await.unwrap();
        assert_eq!(counts(&caches), (0, 3), "the cached block was not looked up again");
        for entry in &entries[1..] {
            assert_eq!(caches.block(entry, Reach::Tail).await.unwrap().records.len(), 1);
        }
        assert_eq!(counts(&caches), (2, 3), "the warmed blocks are read from the cache");
    }

    /// The small blocks of one segment (a topic's partitions side by side) are read with
    /// one range GET of their chunk, not one each; each block still decodes to its own.
    #[tokio::test]
    async fn small_blocks_of_one_segment_share_one_chunk_fetch() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let entries = segment(store.as_ref(), 16).await;
        let caches = Caches::new(&ReaderConfig::default(), store);
        let reads = entries.iter().map(|entry| caches.block(entry, Reach::Tail));
        let blocks = futures::future::join_all(reads).await;
        for (seq, block) in blocks.into_iter().enumerate() {
            assert_eq!(block.unwrap().records[0].body, Bytes::from(format!("record {seq}")));
        }
        assert_eq!(caches.stats.chunk_fetches.load(Ordering::Relaxed), 1, "16 blocks, one chunk GET");
        assert_eq!(caches.stats.block_misses.load(Ordering::Relaxed), 16);
    }

    /// A config whose cache holds `blocks` of [`segment`]'s one-record blocks.
    fn holding(blocks: u64) -> ReaderConfig {
        let weight = RECORD_WEIGHT + "record 000".len() as u64;
        ReaderConfig { block_cache_bytes: blocks * weight, chunk_bytes: Some(0), ..ReaderConfig::default() }
    }

    /// A catch-up far behind over more than the cache holds, after a tail read left the
    /// newest blocks there: it fetches only those the cache had let go, takes each back
    /// out once past it, and leaves the tail's blocks in place.
    #[tokio::test]
    async fn a_catch_up_takes_back_what_it_fetched_and_finds_what_the_tail_left() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let entries = segment(store.as_ref(), 100).await;
        let caches = Caches::new(&holding(40), store);
        for entry in &entries {
            caches.block(entry, Reach::Tail).await.unwrap();
            caches.blocks.run_pending_tasks().await;
        }
        let kept: Vec<bool> = entries.iter().map(|e| caches.blocks.contains_key(&block_key(e))).collect();
        let first_kept = kept.iter().position(|&k| k).expect("the tail left blocks");
        assert!(kept[first_kept..].iter().all(|&k| k), "the newest are kept, the oldest gone: {kept:?}");

        let misses = caches.stats.block_misses.load(Ordering::Relaxed);
        for entry in &entries {
            caches.block(entry, Reach::History).await.unwrap();
            caches.passed(entry, Reach::History).await;
            caches.blocks.run_pending_tasks().await;
        }
        let fetched = caches.stats.block_misses.load(Ordering::Relaxed) - misses;
        assert_eq!(fetched, first_kept as u64, "only the blocks the cache had let go");
        assert!(entries[..first_kept].iter().all(|e| !caches.blocks.contains_key(&block_key(e))), "taken back out");
        assert!(entries[first_kept..].iter().all(|e| caches.blocks.contains_key(&block_key(e))), "the tail's stay");
    }

    /// A read is history once the records between it and the tail would weigh more
    /// than half the cache, as the block holding it measures them.
    #[tokio::test]
    async fn a_read_is_history_past_half_the_cache() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let entries = segment(store.as_ref(), 1).await;
        let caches = Caches::new(&holding(40), store);
        let per_record = u64::from(entries[0].len) + RECORD_WEIGHT;
        let half = caches.block_bytes() / 2 / per_record;
        assert_eq!(caches.reach(&entries[0], 0, half), Reach::Tail);
        assert_eq!(caches.reach(&entries[0], 0, half + 1), Reach::History);
        assert_eq!(caches.reach(&entries[0], 10, half + 10), Reach::Tail, "only the distance counts");
        assert_eq!(caches.reach(&entries[0], 5, 0), Reach::Tail, "a read past the tail is at it");
    }

    /// A block a read near the tail fetched stays when a read far behind passes it.
    #[tokio::test]
    async fn passing_a_tail_block_leaves_it_cached() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let entries = segment(store.as_ref(), 2).await;
        let caches = Caches::new(&holding(40), store);
        caches.block(&entries[0], Reach::Tail).await.unwrap();
        caches.block(&entries[1], Reach::History).await.unwrap();
        caches.block(&entries[0], Reach::History).await.unwrap();
        for entry in &entries {
            caches.passed(entry, Reach::History).await;
            caches.passed(entry, Reach::Tail).await;
        }
        caches.blocks.run_pending_tasks().await;
        assert!(caches.blocks.contains_key(&block_key(&entries[0])));
        assert!(!caches.blocks.contains_key(&block_key(&entries[1])));
    }
}
