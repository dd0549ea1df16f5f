//! The metadata service: Shale's sequencer and index, on SlateDB.
//!
//! It is the only writer of one SlateDB database on the object store. It owns:
//! - [`catalog`](Metadata::create_basin_idempotent): basins and streams (create, get, list by
//!   prefix, reconfigure, delete);
//! - [`commit`](Metadata::sequence): the commit of sealed segments, which checks each
//!   append's conditions against the latest state, assigns dense sequence numbers and
//!   never-decreasing timestamps, and writes index entries and new tails in one write
//!   batch; a retried segment gets its first outcome back; `poison` fails what a gateway
//!   pipelined after a failed append of the same stream;
//! - `durability`: group commit. Writes are applied under the writer lock, which is
//!   released before the WAL upload; one task makes everything applied durable with one
//!   WAL flush and answers the calls in apply order. `halt` latches a fenced or failed
//!   instance; `fence_check` has a busy writer read the manifest so a newer instance's
//!   open is not held up;
//! - [`lookup`](Metadata::entries_from): index entries by sequence number or time, and
//!   stream tails, for readers; plus per-stream tail notifications (`tails`);
//! - [`MetadataApi`]: what gateways, readers and handlers call, implemented in process by
//!   [`Metadata`] and over gRPC (`shale.metadata.v1`) by [`RemoteMetadata`], served by
//!   [`MetadataService`] (`rpc`);
//! - the leader lease of a standalone metadata process or of `shale serve` on a shared
//!   store (`leader`; `leased`, the in-process API refused while the lease is not held)
//!   and orphan collection
//!   of segments no commit made visible (`gc`);
//! - reclaiming space (`reclaim`): trims, retention, `delete_on_empty` and deletes
//!   remove index entries; `refs` counts each segment's referenced blocks exactly, and
//!   released segments are deleted; `gc_stats` reports both collectors;
//! - compaction bookkeeping (`compaction`): plans for compactors and the atomic swap of
//!   rewritten index entries;
//! - idempotent producers (`producers`): each producer's latest acks per stream, checked
//!   at commit; tracked consumers (`consumers`): named positions per stream.
//!
//! - the registry of Kafka-serving agents (`agents`) and the processes watching its tails
//!   (`watchers`), in the leader's memory;
//! - Kafka transactions (`transactional`): each transactional id's epoch and open
//!   transaction; appends staged in a commit (`staging`) made visible with the group
//!   offsets in one write batch at the end, or dropped; timeouts.
//!
//! Other modules: `keys` (the SlateDB key families), `agenda` (what the background
//! passes visit: the reclaim agenda and uncompacted marks), `idle` (flushing an idle
//! database's memtable), `halt` (the latch of a failed instance), `poison` (streams
//! failed after a failed append), `overlay` (what a commit call changed so far), `service` (the gRPC server of `shale.metadata.v1`), `tokens` (access tokens by secret). Stored records,
//! wire-neutral types, `tails` and the error enum live in `shale-metadata-contract`.
//!
//! A second instance opened on the same database fences this one: from the first failed
//! write on, every call returns [`MetadataError::Fenced`] and nothing is written again.

mod agenda;
#[cfg(test)]
mod agenda_tests;
mod agents;
mod watchers;
pub use watchers::Watching;
mod catalog;
mod commit;
#[cfg(test)]
mod commit_tests;
mod compaction;
mod consumers;
mod defragment;
mod durability;
mod fence_check;
mod gc;
mod gc_stats;
mod halt;
mod idle;
mod key_compaction;
mod keys;
mod leader;
mod leased;
mod lookup;
mod overlay;
mod poison;
#[cfg(test)]
mod producer_tests;
mod producers;
mod reclaim;
#[cfg(test)]
mod reclaim_tests;
mod refs;
mod rpc;
mod service;
mod staging;
#[cfg(test)]
mod takeover_tests;
mod tokens;
#[cfg(test)]
mod transaction_tests;
mod transactional;

use std::sync::Arc;
use std::time::Duration;

use shale_storage::object_store::ObjectStore;
use shale_storage::Clock;
use slatedb::config::{DurabilityLevel, ReadOptions, ScanOptions};
use slatedb::Db;
use tokio::sync::{watch, Mutex};

use durability::DurabilityQueue;
use halt::Halt;

pub use durability::CommitStats;
pub use gc::{run_collection, GcReport};
pub use gc_stats::GcStats;
pub use halt::HaltReason;
pub use leader::{hold_leadership, LeaderLease};
pub use leased::LeasedMetadata;
pub use reclaim::ReclaimReport;
pub use rpc::MetadataService;
/// The contract this crate implements, re-exported so in-process callers (the binary,
/// tests, benchmarks) name one crate.
pub use shale_metadata_contract::*;
pub use transactional::{run_transaction_timeouts, TIMEOUT_CHECK_INTERVAL};

/// Where the metadata database lives inside the object store.
pub const DEFAULT_DB_PATH: &str = "metadata";

/// Level-0 SSTs SlateDB keeps before memtable flushes (and so writes) wait for its
/// compactor: four times SlateDB's default, so a compactor that looks for work every
/// `db_poll_interval` (120 s) still leaves 4 MiB/s of metadata writes before a stall.
/// Point reads consult each level-0 SST's bloom filter, so more of them cost little.
pub const LEVEL0_MAX_SSTS: usize = 32;

/// The sequencer and index. Cheap to share behind an `Arc`.
pub struct Metadata {
    db: Db,
    clock: Arc<dyn Clock>,
    config: MetadataConfig,
    /// A fresh id per open, named in the leader record and `m/writer`.
    instance: String,
    /// Serialises applying writes: the single-writer discipline inside one process. Held
    /// while a call is checked and applied in memory, not while it uploads.
    writer: Mutex<WriterState>,
    /// Makes applied writes durable, a WAL flush for many calls.
    durability: DurabilityQueue,
    commit_stats: Arc<CommitStats>,
    /// Wakes waiting reads of the streams each durable commit moved.
    tails: Arc<TailWatch>,
    halt: Arc<Halt>,
    gc_stats: Arc<GcStats>,
    /// The live Kafka-serving agents (in memory: see `agents`).
    agents: agents::AgentRegistry,
    /// The processes watching its tails (in memory: see `watchers`).
    watchers: Arc<watchers::Watchers>,
    /// Set by whatever adds, removes or releases segment references: the next reclaim
    /// pass refreshes the space gauges (an idle database is not surveyed).
    segments_changed: std::sync::atomic::AtomicBool,
    /// Bytes of the index entries this instance committed (appends, not compactions).
    indexed_bytes: std::sync::atomic::AtomicU64,
    /// Compaction plans answered from their last walk while their compactor waits.
    waiting_plans: compaction::WaitingPlans,
    /// Opened with no stream ever created: every stream it holds was scheduled by this
    /// instance, so the agenda needs no seeding (`agenda`).
    fresh: std::sync::atomic::AtomicBool,
    /// Writes counted for flushing an idle memtable (`idle`).
    idle: idle::IdleFlush,
}

/// What only the writer touches, under the writer lock.
pub(crate) struct WriterState {
    next_stream_id: u64,
    /// Latest (applied, maybe not yet durable) records of recently used streams: the
    /// sequencer's working set, so a commit reads no SSTs while holding the lock.
    streams: moka::sync::Cache<(String, String), StreamRecord>,
    /// Latest state of recently active idempotent producers, bounded like `streams`.
    producers: moka::sync::Cache<overlay::ProducerKey, producers::ProducerState>,
    poison: poison::Poison,
    /// Writes that removed index entries or released segment references, counted as
    /// they are applied: a compaction swap prepared without the lock checks it.
    removals: u64,
    /// What the writer wrote of the reclaim agenda and uncompacted marks (`agenda`).
    scheduled: agenda::Scheduled,
}

/// Memory the metadata database may use. Both bounds hold whatever the stream count.
#[derive(Clone, Debug, serde::Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct MetadataConfig {
    /// SlateDB block and index cache. Hits save GETs of metadata SSTs.
    pub cache_bytes: u64,
    /// Writes held in memory before they reach level-0 SSTs; past it writes wait.
    pub max_unflushed_bytes: usize,
    /// Size at which the in-memory table is written out as a level-0 SST.
    pub l0_sst_size_bytes: usize,
    /// A segment sealed longer ago than this is not committed: its appends fail with a
    /// retryable error. This is what makes deleting orphans safe.
    #[serde(with = "humantime_serde")]
    pub max_commit_age: Duration,
    /// Uploaded segments that no commit made visible are deleted once this old. Must
    /// exceed `max_commit_age`.
    #[serde(with = "humantime_serde")]
    pub orphan_grace: Duration,
    /// How often garbage collection runs: reclaiming trimmed, expired and deleted data,
    /// and at most every quarter of `orphan_grace`, orphan collection (one LIST of new
    /// segment keys). A reclaim pass reads only the streams whose trim, retention or
    /// `delete_on_empty` deadline fell due, so an idle stream costs it nothing; expired
    /// data is reclaimed within this interval.
    #[serde(with = "humantime_serde")]
    pub gc_interval: Duration,
    /// How long a segment no index entry references any more is kept before it is
    /// deleted: reads that looked its entries up just before finish meanwhile.
    #[serde(with = "humantime_serde")]
    pub delete_grace: Duration,
    /// Stream records the sequencer keeps in memory (about 200 bytes each). A miss
    /// costs one SlateDB read under the writer lock.
    pub sequencer_streams: u64,
    /// Retries of one failed object-store request before SlateDB gives up (100 ms
    /// doubling to 1 s apart: 5 retries is about 2.5 s). A WAL write that still fails
    /// halts the instance, so a standby takes over instead of every call waiting.
    pub store_retries: u32,
    /// How often SlateDB's own garbage collector deletes the metadata database's obsolete
    /// WAL objects, SSTs, manifests and compaction files. Each pass lists those
    /// directories and reads every manifest it keeps (30 to 55 requests at rest), so the
    /// default (15 min) keeps it to 2 to 4 requests a minute.
    #[serde(with = "humantime_serde")]
    pub db_gc_interval: Duration,
    /// How often SlateDB looks for work in the metadata database: the writer's manifest
    /// poll (newly compacted data), its compactor's poll and the commit of finished
    /// compactions each read an object or two per interval, whether or not anything
    /// changed: at 1 s (SlateDB's default) about 200 GETs a minute on an idle database,
    /// at 60 s about 8, at 120 s (the default) about 4. Longer leaves level-0 SSTs
    /// uncompacted that much longer; writes stall only past [`LEVEL0_MAX_SSTS`] of them
    /// (32 x `l0_sst_size_bytes` of metadata writes within one interval, 4 MiB/s at 120
    /// s, ten times the heaviest loads measured). Fencing is seen at the next write
    /// whatever this is, and a writer that keeps committing reads the manifest about
    /// once a second anyway (`fence_check`), so a newer instance's open never waits for
    /// this poll.
    #[serde(with = "humantime_serde")]
    pub db_poll_interval: Duration,
    /// Compression of the metadata database's SST blocks: `lz4` (default), `zstd` or
    /// `none`. Every commit writes a WAL object of a few KiB compressed with it, so its
    /// cost per commit counts: zstd sets up a compression context for each block (about
    /// 2% of a loaded server's CPU under a producer committing 150 times a second)
    /// where lz4 costs a tenth of that; zstd packs index entries a little tighter. Reads
    /// decompress a block only when it is not in `cache_bytes`. Objects written under
    /// another setting stay readable: each SST names its own codec.
    pub compression: MetadataCompression,
    /// Writes applied and not yet in a level-0 SST are flushed to one after a
    /// `gc_interval` without commits, so an idle database's WAL objects can be collected
    /// and its data compacted (one PUT per idle spell).
    pub flush_when_idle: bool,
    /// How old an obsolete metadata object must be before SlateDB's collector deletes it;
    /// longer keeps more garbage, shorter risks deleting what a stalled process still
    /// reads.
    #[serde(with = "humantime_serde")]
    pub db_gc_min_age: Duration,
    /// How long an idempotent producer's state on a stream outlives its last append. A
    /// retry arriving later is applied again; each active producer costs about 300
    /// bytes per stream it writes.
    #[serde(with = "humantime_serde")]
    pub producer_expiry: Duration,
    /// The shortest time between two WAL flushes. 0 (the default) flushes as soon as the
    /// last flush is done, which costs a WAL PUT per store round trip while commits keep
    /// coming (about 20-30/s at S3 latency: 50-80 million a month, and at a few hundred
    /// PUTs per GiB the largest part of a loaded cluster's PUTs). Setting it caps WAL
    /// PUTs at `1 / min_flush_interval` per second (100 ms: 10/s, about 26 million a
    /// month) at the price of up to that much more wait for a commit.
    #[serde(with = "humantime_serde")]
    pub min_flush_interval: Duration,
}

/// How the metadata database compresses its SSTs.
#[derive(Clone, Copy, Debug, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MetadataCompression {
    Lz4,
    Zstd,
    None,
}

impl MetadataConfig {
    /// How long a segment's commit outcome is kept for retried commits: long enough that
    /// a retry after it expired finds the segment too old to commit, even when the
    /// segment was stamped up to `max_commit_age` ahead and metadata instances' clocks
    /// differ by less than `max_commit_age` (see `commit::segment_outcomes`).
    fn outcome_ttl_ms(&self) -> u64 {
        3 * self.max_commit_age.as_millis() as u64
    }

    fn producer_expiry_ms(&self) -> u64 {
        self.producer_expiry.as_millis() as u64
    }

    /// SlateDB's compactor, polling every `db_poll_interval`.
    fn db_compactor_options(&self) -> slatedb::config::CompactorOptions {
        let defaults = slatedb::config::CompactorOptions::default();
        let worker = defaults.worker.clone().map(|worker| slatedb::config::CompactionWorkerOptions {
            compactions_poll_interval: self.db_poll_interval,
            ..worker
        });
        slatedb::config::CompactorOptions {
            poll_interval: self.db_poll_interval,
            commit_compacted_interval: self.db_poll_interval,
            worker,
            ..defaults
        }
    }

    /// SlateDB's collector on every directory it manages except WAL fences, which it
    /// advises never to delete.
    fn db_gc_options(&self) -> slatedb::config::GarbageCollectorOptions {
        let directory = Some(slatedb::config::GarbageCollectorDirectoryOptions {
            interval: Some(self.db_gc_interval),
            min_age: self.db_gc_min_age,
            dry_run: false,
        });
        slatedb::config::GarbageCollectorOptions {
            manifest_options: directory,
            wal_options: directory,
            wal_fence_options: None,
            compacted_options: directory,
            compactions_options: directory,
            ..Default::default()
        }
    }
}

impl Default for MetadataConfig {
    fn default() -> Self {
        Self {
            cache_bytes: 64 * 1024 * 1024,
            max_unflushed_bytes: 128 * 1024 * 1024,
            l0_sst_size_bytes: 16 * 1024 * 1024,
            max_commit_age: Duration::from_secs(120),
            orphan_grace: Duration::from_secs(600),
            gc_interval: Duration::from_secs(60),
            delete_grace: Duration::from_secs(30),
            sequencer_streams: 200_000,
            store_retries: 5,
            db_gc_interval: Duration::from_secs(900),
            db_poll_interval: Duration::from_secs(120),
            flush_when_idle: true,
            compression: MetadataCompression::Lz4,
            db_gc_min_age: Duration::from_secs(120),
            producer_expiry: Duration::from_secs(24 * 3600),
            min_flush_interval: Duration::ZERO,
        }
    }
}

impl Metadata {
    /// Opens (or creates) the database at `path` in `store`, fencing any previous writer.
    pub async fn open(store: Arc<dyn ObjectStore>, path: &str, clock: Arc<dyn Clock>) -> Result<Self> {
        Self::open_with(store, path, clock, &MetadataConfig::default()).await
    }

    /// [`Self::open`] with explicit memory bounds.
    pub async fn open_with(
        store: Arc<dyn ObjectStore>,
        path: &str,
        clock: Arc<dyn Clock>,
        config: &MetadataConfig,
    ) -> Result<Self> {
        if config.orphan_grace <= config.max_commit_age {
            return Err(MetadataError::InvalidArgument(format!(
                "orphan_grace ({:?}) must exceed max_commit_age ({:?})",
                config.orphan_grace, config.max_commit_age
            )));
        }
        let settings = slatedb::Settings {
            max_unflushed_bytes: config.max_unflushed_bytes,
            l0_sst_size_bytes: config.l0_sst_size_bytes,
            object_store_max_retries: Some(config.store_retries),
            // The durability task flushes the WAL explicitly, once per round of calls; a
            // timer flush in between would split a round into two WAL objects uploaded
            // one after the other.
            flush_interval: None,
            manifest_poll_interval: config.db_poll_interval,
            l0_max_ssts: LEVEL0_MAX_SSTS,
            l0_max_ssts_per_key: LEVEL0_MAX_SSTS,
            compression_codec: match config.compression {
                MetadataCompression::Lz4 => Some(slatedb::config::CompressionCodec::Lz4),
                MetadataCompression::Zstd => Some(slatedb::config::CompressionCodec::Zstd),
                MetadataCompression::None => None,
            },
            compactor_options: Some(config.db_compactor_options()),
            garbage_collector_options: Some(config.db_gc_options()),
            ..slatedb::Settings::default()
        };
        let cache = slatedb::db_cache::foyer::FoyerCache::new_with_opts(slatedb::db_cache::foyer::FoyerCacheOptions {
            max_capacity: config.cache_bytes,
            ..Default::default()
        });
        let db = Db::builder(path, store.clone())
            .with_settings(settings)
            .with_db_cache(Arc::new(cache), 0)
            .build()
            .await
            .map_err(MetadataError::storage)?;
        let stored_next_stream_id = db.get(keys::NEXT_STREAM_ID).await.map_err(MetadataError::storage)?;
        let fresh = stored_next_stream_id.is_none();
        let next_stream_id = match stored_next_stream_id {
            Some(bytes) => decode_u64(keys::NEXT_STREAM_ID, &bytes)?,
            None => 1,
        };
        tracing::info!(path, next_stream_id, "metadata opened");
        let tails = Arc::new(TailWatch::default());
        let halt = Arc::new(Halt::default());
        let commit_stats = Arc::new(CommitStats::default());
        let fence_check = fence_check::FenceCheck::new(
            slatedb::admin::Admin::builder(path, store.clone()).build(),
            db.manifest().writer_epoch(),
            commit_stats.clone(),
        );
        let durability = DurabilityQueue::start(
            db.clone(),
            fence_check,
            tails.clone(),
            halt.clone(),
            commit_stats.clone(),
            config.min_flush_interval,
        );
        let streams = moka::sync::Cache::new(config.sequencer_streams);
        let instance = shale_storage::ids::unique_id(clock.as_ref()).to_string();
        let agents = agents::AgentRegistry::new(clock.now_ms());
        Ok(Self {
            db,
            clock,
            config: config.clone(),
            instance,
            writer: Mutex::new(WriterState {
                next_stream_id,
                streams,
                producers: moka::sync::Cache::new(config.sequencer_streams),
                poison: Default::default(),
                removals: 0,
                scheduled: agenda::Scheduled::new(config.sequencer_streams),
            }),
            durability,
            commit_stats,
            tails,
            halt,
            gc_stats: Arc::default(),
            agents,
            watchers: Arc::default(),
            segments_changed: std::sync::atomic::AtomicBool::new(true),
            indexed_bytes: std::sync::atomic::AtomicU64::new(0),
            waiting_plans: compaction::WaitingPlans::default(),
            fresh: std::sync::atomic::AtomicBool::new(fresh),
            idle: idle::IdleFlush::default(),
        })
    }

    /// Flushes and closes the database. Later calls fail.
    pub async fn close(&self) -> Result<()> {
        let _writer = self.writer.lock().await;
        // Calls applied before the lock was taken are made durable and answered first:
        // closing must not leave one answered as failed that the close then writes.
        if !self.halt.is_halted() {
            let _ = self.durability.push(Vec::new()).wait().await;
        }
        let fenced = self.halt.is_fenced();
        self.halt.close();
        if fenced {
            return Ok(());
        }
        match self.db.close().await {
            Ok(()) => Ok(()),
            Err(e) if is_fenced(&e) => Ok(()),
            Err(e) => Err(MetadataError::storage(e)),
        }
    }

    /// Every durable commit's tail updates from now on (the `Watch` RPC's source).
    pub fn tail_feed(&self) -> tokio::sync::broadcast::Receiver<Arc<Vec<TailUpdate>>> {
        self.tails.feed()
    }

    /// A receiver that becomes `Some` when this instance must stop serving: a newer one
    /// fenced it, or a durable write failed. A server waits on it to stop and exit.
    pub fn watch_halted(&self) -> watch::Receiver<Option<HaltReason>> {
        self.halt.subscribe()
    }

    /// Whether a newer instance fenced this one.
    pub fn is_fenced(&self) -> bool {
        self.halt.is_fenced()
    }

    /// Whether this instance stopped serving (fenced, or a durable write failed).
    pub fn is_halted(&self) -> bool {
        self.halt.is_halted()
    }

    /// Group-commit counters: calls made durable and the WAL flushes that did it.
    pub fn commit_stats(&self) -> Arc<CommitStats> {
        self.commit_stats.clone()
    }

    /// A durable write whose only purpose is to learn whether a newer instance fenced
    /// this one ([`MetadataError::Fenced`] if so).
    pub(crate) async fn confirm_writer(&self) -> Result<()> {
        self.check_usable()?;
        let writer = self.writer.lock().await;
        let mut batch = slatedb::WriteBatch::new();
        batch.put(keys::WRITER, self.instance.as_bytes());
        self.write_durably(writer, batch).await
    }

    pub(crate) fn check_usable(&self) -> Result<()> {
        self.halt.check()
    }

    /// Maps a storage error, latching the fenced state when slatedb reports it.
    fn storage_error(&self, error: slatedb::Error) -> MetadataError {
        if is_fenced(&error) {
            self.halt.fence();
            return MetadataError::Fenced;
        }
        MetadataError::storage(error)
    }

    /// Applies `batch` to SlateDB's memory (not yet durable). Call under the writer lock,
    /// then queue the call with `self.durability`. A failed apply halts the instance: what
    /// it holds in memory is unknown.
    async fn apply(&self, batch: slatedb::WriteBatch) -> Result<()> {
        // SlateDB refuses an empty batch, and a refused write halts the instance.
        if batch.is_empty() {
            return Ok(());
        }
        self.idle.applied.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.db.write(batch).await {
            Ok(_handle) => Ok(()),
            Err(e) if is_fenced(&e) => Err(self.storage_error(e)),
            Err(e) => {
                self.halt.stop(&e.to_string());
                Err(MetadataError::Indefinite(e.to_string()))
            }
        }
    }

    /// Applies `batch`, releases the writer lock, and waits until the batch is durable
    /// (sharing a WAL write with whatever else was applied meanwhile).
    async fn write_durably(
        &self,
        writer: tokio::sync::MutexGuard<'_, WriterState>,
        batch: slatedb::WriteBatch,
    ) -> Result<()> {
        self.apply(batch).await?;
        self.settle(writer).await
    }

    /// Releases the writer lock and waits until everything applied so far is durable: a call that answers from
    /// the latest state, without writing, must not answer before that state is durable.
    async fn settle(&self, writer: tokio::sync::MutexGuard<'_, WriterState>) -> Result<()> {
        let durable = self.durability.push(Vec::new());
        drop(writer);
        durable.wait().await
    }

    /// Reads of state other callers will act on see only what is durable.
    fn durable_read() -> ReadOptions {
        ReadOptions { durability_filter: DurabilityLevel::Remote, ..ReadOptions::default() }
    }

    /// Options for every scan of metadata's keys: its blocks go through SlateDB's block
    /// cache like a point read's (SlateDB leaves a scan's blocks uncached by default, so
    /// each scan of a stream's entries, cursor or listing page fetched its blocks from
    /// the store again).
    fn scan_options(durability_filter: DurabilityLevel) -> ScanOptions {
        ScanOptions { durability_filter, cache_blocks: true, ..ScanOptions::default() }
    }

    async fn get_durable<T: Stored>(&self, key: &[u8]) -> Result<Option<T>> {
        let bytes = self.db.get_with_options(key, &Self::durable_read()).await.map_err(|e| self.storage_error(e))?;
        bytes.map(|b| T::from_stored(key, &b)).transpose()
    }

    /// The latest value, durable or not: only the writer reads this way, under its lock.
    async fn get_latest<T: Stored>(&self, key: &[u8]) -> Result<Option<T>> {
        let bytes = self.db.get(key).await.map_err(|e| self.storage_error(e))?;
        bytes.map(|b| T::from_stored(key, &b)).transpose()
    }

    /// The latest record of a stream, from the sequencer's working set or the database.
    async fn latest_stream(&self, writer: &WriterState, basin: &str, stream: &str) -> Result<Option<StreamRecord>> {
        let key = (basin.to_string(), stream.to_string());
        if let Some(record) = writer.streams.get(&key) {
            return Ok(Some(record));
        }
        let record = self.get_latest::<StreamRecord>(&keys::stream(basin, stream)).await?;
        if let Some(record) = &record {
            writer.streams.insert(key, record.clone());
        }
        Ok(record)
    }
}

fn decode_u64(key: &[u8], bytes: &[u8]) -> Result<u64> {
    let array: [u8; 8] = bytes.try_into().map_err(|_| MetadataError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: "expected 8 bytes".into(),
    })?;
    Ok(u64::from_be_bytes(array))
}

/// Whether slatedb reports that a newer writer fenced this one.
fn is_fenced(error: &slatedb::Error) -> bool {
    matches!(error.kind(), slatedb::ErrorKind::Closed(slatedb::CloseReason::Fenced))
}
