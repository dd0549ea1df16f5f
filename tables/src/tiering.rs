//! Tiering: a pass writes, for each basin with the table tier on, the records that have
//! become old enough since its last pass as one Parquet file, then commits the pass.
//!
//! Exactly once: a basin's table has one commit record on the store,
//! `tables/<basin>/state.json` (the pass number and, per stream, the sequence number
//! tiering goes on from), replaced only by a conditional PUT on the version it was read
//! at. Positions name each stream's creation time, so a stream deleted and created again
//! is tiered from its start. Pass `N`'s file is `tables/<basin>/data/pass-<N>.parquet`: a pass that crashed
//! after writing its file but before its commit is done again under the same number and
//! name, from the same positions, so the file is replaced, never doubled. One tierer per
//! basin at a time is assumed (the compactor shard that owns the basin); a second one's
//! commit is refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, UpdateVersion};
use serde::{Deserialize, Serialize};
use shale_metadata_contract::{BasinRecord, MetadataApi, MetadataError};
use shale_proto::record::SequencedRecord;
use shale_reader::{ReadLimits, ReadRequest, ReadStart, Reader, ReaderError};
use shale_storage::Clock;

use crate::{write_parquet, TableRow, TablesError};

/// Records one pass writes for one basin at most: about 128 MiB of 1 KiB records,
/// held in memory while the file is built. The rest waits for the next pass.
pub const MAX_PASS_BYTES: u64 = 128 * 1024 * 1024;

/// Records read per call.
const READ_RECORDS: u64 = 1000;

/// Streams of a basin read at once during a pass: at store latency a pass waits on
/// reads, not on the CPU.
const CONCURRENT_STREAMS: usize = 16;

/// A basin table's commit record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableState {
    /// Passes committed.
    pub pass: u64,
    /// Per stream, where tiering goes on from.
    pub positions: BTreeMap<String, StreamPosition>,
    /// Rows in the committed files.
    pub rows: u64,
    /// The committed files, oldest first.
    pub files: Vec<String>,
}

/// Where tiering goes on from in one stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamPosition {
    /// The stream's creation time: a stream deleted and created again under the same
    /// name is another stream, tiered from its start.
    pub created_at_ms: u64,
    /// The sequence number of the next record to tier.
    pub next_seq: u64,
}

/// Where a basin's table lives.
pub fn table_root(basin: &str) -> String {
    format!("tables/{basin}")
}

fn state_path(basin: &str) -> Path {
    Path::from(format!("{}/state.json", table_root(basin)))
}

/// A basin table's committed state on `store`, and the version a commit must replace
/// (none before the first commit).
pub async fn read_state(
    store: &dyn ObjectStore,
    basin: &str,
) -> Result<(TableState, Option<UpdateVersion>), TablesError> {
    match store.get(&state_path(basin)).await {
        Ok(found) => {
            let version = UpdateVersion { e_tag: found.meta.e_tag.clone(), version: found.meta.version.clone() };
            let state = serde_json::from_slice(&found.bytes().await?)?;
            Ok((state, Some(version)))
        }
        Err(object_store::Error::NotFound { .. }) => Ok((TableState::default(), None)),
        Err(e) => Err(e.into()),
    }
}

/// Runs tiering passes over the basins a [`Self::owns`] filter gives it.
pub struct Tierer {
    metadata: Arc<dyn MetadataApi>,
    reader: Arc<Reader>,
    store: Arc<dyn ObjectStore>,
    clock: Arc<dyn Clock>,
    /// Whether this tierer owns a basin (the compactor shards split basins).
    owns: Box<dyn Fn(&str) -> bool + Send + Sync>,
}

impl Tierer {
    pub fn new(
        metadata: Arc<dyn MetadataApi>,
        reader: Arc<Reader>,
        store: Arc<dyn ObjectStore>,
        clock: Arc<dyn Clock>,
        owns: Box<dyn Fn(&str) -> bool + Send + Sync>,
    ) -> Self {
        Self { metadata, reader, store, clock, owns }
    }

    /// One pass over every owned basin with the table tier on; returns the rows written.
    pub async fn run_pass(&self) -> Result<u64, TablesError> {
        let mut written = 0;
        let mut start_after = String::new();
        loop {
            let page = self.metadata.list_basins("", &start_after, 1000).await?;
            for basin in &page.items {
                if basin.config.tables.is_some() && (self.owns)(&basin.name) {
                    written += self.tier_basin(basin).await?;
                }
            }
            match page.items.last() {
                Some(last) if page.has_more => start_after = last.name.clone(),
                _ => return Ok(written),
            }
        }
    }

    /// The basin's committed state, and the version a commit must replace (none yet).
    pub async fn state(&self, basin: &str) -> Result<(TableState, Option<UpdateVersion>), TablesError> {
        read_state(self.store.as_ref(), basin).await
    }

    async fn tier_basin(&self, basin: &BasinRecord) -> Result<u64, TablesError> {
        let Some(tables) = basin.config.tables else { return Ok(0) };
        let (state, version) = self.state(&basin.name).await?;
        let cutoff = self.clock.now_ms().saturating_sub(tables.after_secs.saturating_mul(1000));
        let mut positions = state.positions.clone();
        let mut rows = Vec::new();
        let mut bytes = 0;
        let mut start_after = String::new();
        'streams: loop {
            let page = self.metadata.list_streams(&basin.name, "", &start_after, 1000).await?;
            // Streams are read several at a time, each up to its share of what the pass
            // may still take.
            for chunk in page.items.chunks(CONCURRENT_STREAMS) {
                if bytes >= MAX_PASS_BYTES {
                    break 'streams;
                }
                let share = (MAX_PASS_BYTES - bytes) / chunk.len() as u64;
                let reads = chunk.iter().map(|stream| {
                    let start = match positions.get(&stream.name) {
                        Some(position) if position.created_at_ms == stream.created_at_ms => position.next_seq,
                        _ => 0,
                    };
                    self.read_eligible(&basin.name, &stream.name, start, cutoff, share)
                });
                let read = futures::future::join_all(reads).await;
                for (stream, records) in chunk.iter().zip(read) {
                    let records = records?;
                    let Some(last) = records.last() else { continue };
                    let position = StreamPosition { created_at_ms: stream.created_at_ms, next_seq: last.seq_num + 1 };
                    positions.insert(stream.name.clone(), position);
                    bytes += records.iter().map(|r| r.metered_bytes()).sum::<u64>();
                    rows.extend(records.into_iter().map(|record| TableRow { stream: stream.name.clone(), record }));
                }
            }
            match page.items.last() {
                Some(last) if page.has_more => start_after = last.name.clone(),
                _ => break,
            }
        }
        if rows.is_empty() {
            return Ok(0);
        }
        let count = rows.len() as u64;
        let pass = state.pass + 1;
        let file = format!("{}/data/pass-{pass:012}.parquet", table_root(&basin.name));
        self.store.put(&Path::from(file.clone()), write_parquet(rows)?.into()).await?;
        let mut files = state.files.clone();
        files.push(file);
        let next = TableState { pass, positions, rows: state.rows + count, files };
        let mode = match version {
            Some(version) => PutMode::Update(version),
            None => PutMode::Create,
        };
        let body = Bytes::from(serde_json::to_vec_pretty(&next)?);
        self.store.put_opts(&state_path(&basin.name), body.into(), PutOptions { mode, ..Default::default() }).await?;
        tracing::info!(basin = %basin.name, pass, rows = count, "tiered records into the table");
        Ok(count)
    }

    /// A stream's records from `start` with timestamps below `cutoff`, up to about
    /// `share` metered bytes; none when the stream was deleted since it was listed.
    async fn read_eligible(
        &self,
        basin: &str,
        stream: &str,
        start: u64,
        cutoff: u64,
        share: u64,
    ) -> Result<Vec<SequencedRecord>, TablesError> {
        let (mut records, mut next, mut bytes) = (Vec::new(), start, 0);
        while bytes < share {
            let request = ReadRequest {
                basin: basin.into(),
                stream: stream.into(),
                start: ReadStart::SeqNum(next),
                limits: ReadLimits { count: Some(READ_RECORDS), bytes: None },
                until: Some(cutoff),
                clamp: false,
                wait: std::time::Duration::ZERO,
            };
            let read = match self.reader.read(&request).await {
                Ok(output) => output.records,
                Err(ReaderError::Metadata(MetadataError::StreamNotFound { .. })) => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            let Some(last) = read.last() else { break };
            next = last.seq_num + 1;
            bytes += read.iter().map(|r| r.metered_bytes()).sum::<u64>();
            records.extend(read);
        }
        Ok(records)
    }
}

/// The table tier's settings (`[tables]` in the server's TOML).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TieringConfig {
    /// How often tiering passes run: a basin with `after_secs` 0 has its records in the
    /// table within this (plus a pass's time).
    #[serde(with = "humantime_serde")]
    pub pass_interval: std::time::Duration,
}

impl Default for TieringConfig {
    fn default() -> Self {
        Self { pass_interval: std::time::Duration::from_secs(15) }
    }
}

/// Runs a pass every `pass_interval` until the task is dropped; a failed pass is logged
/// and tried again at the next.
pub async fn run_tiering(tierer: Arc<Tierer>, config: TieringConfig) {
    let mut ticks = tokio::time::interval(config.pass_interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(e) = tierer.run_pass().await {
            tracing::warn!(error = %e, "tiering pass failed; trying again at the next");
        }
    }
}

/// Whether compactor shard `shard` of `shards` tiers `basin`: basins split by a hash of
/// their name, so each has one tierer.
pub fn shard_owns(basin: &str, shard: u32, shards: u32) -> bool {
    // FNV-1a: stable across processes and releases, unlike the standard hasher.
    let hash = basin.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    hash % u64::from(shards.max(1)) == u64::from(shard)
}
