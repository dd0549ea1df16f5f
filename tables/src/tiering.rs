//! Tiering: a pass writes, for each basin with the table tier on, the records that have
//! become old enough (or were compacted) since its last pass as Parquet files (one per day of their
//! timestamps), with the Iceberg manifest and manifest list naming them, then commits
//! the pass, then publishes the table metadata of what it committed.
//!
//! Exactly once: a basin's table has one commit record on the store,
//! `tables/<basin>/state.json`: the pass number, per stream the sequence number tiering
//! goes on from, and the table's snapshots, manifests and decoded columns. It is
//! replaced only by a conditional PUT on the version it was read at, so the positions
//! advance with the snapshot in one write. Positions name each stream's creation time,
//! so a stream deleted and created again is tiered from its start.
//!
//! Pass `N` writes `data/timestamp_day=<day>/pass-<N>.parquet`, `metadata/pass-<N>-manifest.avro`
//! and `metadata/snap-<N>.avro` before its commit: a pass that crashed before committing
//! is done again under the same number and names, from the same positions, so its files
//! are replaced, never doubled, and nothing names them until the commit. After the
//! commit, `metadata/v<N>.metadata.json` is made from the state alone and
//! `metadata/version-hint.text` set to `N`; a crash between the two is repaired by the
//! next pass, which publishes the committed state first. So an engine that follows the
//! version hint (or opens a metadata file) sees only committed snapshots, each naming
//! complete files.
//!
//! One tierer per basin at a time is assumed (the compactor shard that owns the basin);
//! a second one's commit is refused.

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

use crate::body_columns::{self, BodyColumn};
use crate::iceberg::{self, Bounds, DataFile, Manifest, Snapshot, StoreLocation};
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
    pub files: Vec<DataFile>,
    /// The Iceberg table's id.
    #[serde(default)]
    pub table_uuid: String,
    /// The decoded body columns, in the order they were added.
    #[serde(default)]
    pub body_columns: Vec<BodyColumn>,
    /// Every manifest, oldest first: the current snapshot's manifest list names them all.
    #[serde(default)]
    pub manifests: Vec<Manifest>,
    /// The last [`iceberg::KEPT_SNAPSHOTS`] snapshots, oldest first.
    #[serde(default)]
    pub snapshots: Vec<Snapshot>,
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

/// The key engines follow to the current table metadata (Iceberg's file-system catalog
/// convention): the number `N` of `v<N>.metadata.json`.
pub fn version_hint_path(basin: &str) -> String {
    format!("{}/metadata/version-hint.text", table_root(basin))
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
    /// The store's URL, which the table metadata names files by.
    location: StoreLocation,
    clock: Arc<dyn Clock>,
    /// Whether this tierer owns a basin (the compactor shards split basins).
    owns: Box<dyn Fn(&str) -> bool + Send + Sync>,
}

impl Tierer {
    pub fn new(
        metadata: Arc<dyn MetadataApi>,
        reader: Arc<Reader>,
        store: Arc<dyn ObjectStore>,
        location: StoreLocation,
        clock: Arc<dyn Clock>,
        owns: Box<dyn Fn(&str) -> bool + Send + Sync>,
    ) -> Self {
        Self { metadata, reader, store, location, clock, owns }
    }

    /// One pass over every owned basin with the table tier on; returns the rows written,
    /// or the first basin's failure once every basin was tried (one basin's failing
    /// store request does not hold the others back).
    pub async fn run_pass(&self) -> Result<u64, TablesError> {
        let (mut written, mut failed) = (0, None);
        let mut start_after = String::new();
        loop {
            let page = self.metadata.list_basins("", &start_after, 1000).await?;
            for basin in &page.items {
                if basin.config.tables.is_some() && (self.owns)(&basin.name) {
                    match self.tier_basin(basin).await {
                        Ok(rows) => written += rows,
                        Err(e) => {
                            tracing::warn!(basin = %basin.name, error = %e, "tiering the basin failed");
                            failed.get_or_insert(e);
                        }
                    }
                }
            }
            match page.items.last() {
                Some(last) if page.has_more => start_after = last.name.clone(),
                _ => break,
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(written),
        }
    }

    /// The basin's committed state, and the version a commit must replace (none yet).
    pub async fn state(&self, basin: &str) -> Result<(TableState, Option<UpdateVersion>), TablesError> {
        read_state(self.store.as_ref(), basin).await
    }

    async fn tier_basin(&self, basin: &BasinRecord) -> Result<u64, TablesError> {
        let Some(tables) = basin.config.tables else { return Ok(0) };
        let (state, version) = self.state(&basin.name).await?;
        self.publish(&basin.name, &state).await?;
        let cutoff = self.clock.now_ms().saturating_sub(tables.after_secs.saturating_mul(1000));
        let (rows, positions) = self.gather(basin, &state, cutoff).await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let count = rows.len() as u64;
        let json = tables.body_format == shale_metadata_contract::BodyFormat::Json;
        let next = self.write_pass(basin, &state, rows, positions, json).await?;
        let mode = match version {
            Some(version) => PutMode::Update(version),
            None => PutMode::Create,
        };
        let body = Bytes::from(serde_json::to_vec_pretty(&next)?);
        self.store.put_opts(&state_path(&basin.name), body.into(), PutOptions { mode, ..Default::default() }).await?;
        tracing::info!(basin = %basin.name, pass = next.pass, rows = count, "tiered records into the table");
        self.publish(&basin.name, &next).await?;
        Ok(count)
    }

    /// The records of the basin's streams that are below `cutoff` and not yet tiered,
    /// up to [`MAX_PASS_BYTES`], and the positions after them.
    async fn gather(
        &self,
        basin: &BasinRecord,
        state: &TableState,
        cutoff: u64,
    ) -> Result<(Vec<TableRow>, BTreeMap<String, StreamPosition>), TablesError> {
        let mut positions = state.positions.clone();
        let mut rows = Vec::new();
        let mut bytes = 0;
        let mut start_after = String::new();
        let mut listed = std::collections::BTreeSet::new();
        'streams: loop {
            let page = self.metadata.list_streams(&basin.name, "", &start_after, 1000).await?;
            listed.extend(page.items.iter().map(|s| s.name.clone()));
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
                    let created_at_ms = stream.created_at_ms;
                    let name = &stream.name;
                    rows.extend(records.into_iter().map(|record| TableRow {
                        stream: name.clone(),
                        created_at_ms,
                        record,
                    }));
                }
            }
            match page.items.last() {
                Some(last) if page.has_more => start_after = last.name.clone(),
                _ => {
                    // Every stream was listed: positions of deleted ones go.
                    positions.retain(|name, _| listed.contains(name));
                    break;
                }
            }
        }
        Ok((rows, positions))
    }

    /// Writes pass `state.pass + 1`'s data files, manifest and manifest list, and returns
    /// the state that commits them.
    async fn write_pass(
        &self,
        basin: &BasinRecord,
        state: &TableState,
        rows: Vec<TableRow>,
        positions: BTreeMap<String, StreamPosition>,
        json: bool,
    ) -> Result<TableState, TablesError> {
        let root = table_root(&basin.name);
        let pass = state.pass + 1;
        let snapshot_id = pass as i64;
        let count = rows.len() as u64;
        let previous = state.body_columns.clone();
        // Decoding and encoding take a pass's CPU: off the runtime's threads, which serve
        // the API in the same process.
        let (body_columns, encoded) = tokio::task::spawn_blocking(move || encode_pass(rows, previous, json, pass))
            .await
            .map_err(|e| TablesError::File(format!("encoding pass {pass}: {e}")))??;
        let schema_id = iceberg::current_schema_id(&body_columns);
        let mut files = Vec::new();
        for (mut file, parquet) in encoded {
            file.path = format!("{root}/{}", file.path);
            self.store.put(&Path::from(file.path.clone()), parquet.into()).await?;
            files.push(file);
        }
        let manifest_path = format!("{root}/metadata/pass-{pass:012}-manifest.avro");
        let manifest = iceberg::manifest(&files, &self.location, snapshot_id, schema_id, &body_columns);
        let length = manifest.len() as u64;
        self.store.put(&Path::from(manifest_path.clone()), Bytes::from(manifest).into()).await?;
        let days = (files.iter().map(|f| f.day).min().unwrap_or(0), files.iter().map(|f| f.day).max().unwrap_or(0));
        let mut manifests = state.manifests.clone();
        manifests.push(Manifest {
            path: manifest_path,
            length,
            snapshot_id,
            files: files.len() as u64,
            rows: count,
            days,
        });
        let list_path = format!("{root}/metadata/snap-{pass:012}.avro");
        let parent = state.snapshots.last().map(|s| s.id);
        let list = iceberg::manifest_list(&manifests, &self.location, snapshot_id, parent);
        self.store.put(&Path::from(list_path.clone()), Bytes::from(list).into()).await?;
        let mut snapshots = state.snapshots.clone();
        snapshots.push(Snapshot {
            id: snapshot_id,
            timestamp_ms: self.clock.now_ms(),
            manifest_list: list_path,
            schema_id,
            added_files: files.len() as u64,
            added_rows: count,
        });
        let expired = snapshots.len().saturating_sub(iceberg::KEPT_SNAPSHOTS);
        snapshots.drain(..expired);
        let table_uuid = match state.table_uuid.is_empty() {
            true => iceberg::table_uuid(&basin.name, basin.created_at_ms),
            false => state.table_uuid.clone(),
        };
        Ok(TableState {
            pass,
            positions,
            rows: state.rows + count,
            files: state.files.iter().cloned().chain(files).collect(),
            table_uuid,
            body_columns,
            manifests,
            snapshots,
        })
    }

    /// Makes the table metadata of the committed `state` current: writes its
    /// `v<pass>.metadata.json` and points the version hint at it, unless the hint
    /// already does.
    async fn publish(&self, basin: &str, state: &TableState) -> Result<(), TablesError> {
        if state.snapshots.is_empty() {
            return Ok(());
        }
        let hint = Path::from(version_hint_path(basin));
        let published = match self.store.get(&hint).await {
            Ok(found) => found.bytes().await?.as_ref() == state.pass.to_string().as_bytes(),
            Err(object_store::Error::NotFound { .. }) => false,
            Err(e) => return Err(e.into()),
        };
        if published {
            return Ok(());
        }
        let root = table_root(basin);
        let metadata = iceberg::table_metadata(state, &root, &self.location);
        let path = Path::from(iceberg::metadata_file(&root, state.pass));
        self.store.put(&path, Bytes::from(serde_json::to_vec_pretty(&metadata)?).into()).await?;
        self.store.put(&hint, Bytes::from(state.pass.to_string()).into()).await?;
        Ok(())
    }

    /// A stream's records from `start` that are in compacted objects or have timestamps
    /// below `cutoff`, up to about `share` metered bytes; none when the stream was
    /// deleted since it was listed.
    async fn read_eligible(
        &self,
        basin: &str,
        stream: &str,
        start: u64,
        cutoff: u64,
        share: u64,
    ) -> Result<Vec<SequencedRecord>, TablesError> {
        let compacted = match self.metadata.compacted_through(basin, stream).await {
            Ok(compacted) => compacted,
            Err(MetadataError::StreamNotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let (mut records, mut next, mut bytes) = (Vec::new(), start, 0);
        while bytes < share {
            // Records in compacted objects are tiered whatever their age, the rest once
            // they are old enough.
            let (count, until) = match next < compacted {
                true => ((compacted - next).min(READ_RECORDS), None),
                false => (READ_RECORDS, Some(cutoff)),
            };
            let request = ReadRequest {
                basin: basin.into(),
                stream: stream.into(),
                start: ReadStart::SeqNum(next),
                limits: ReadLimits { count: Some(count), bytes: None },
                until,
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

/// A pass encoded: the decoded columns after it, and its Parquet files, each with its
/// data file entry (path relative to the table root).
type EncodedPass = (Vec<BodyColumn>, Vec<(DataFile, Bytes)>);

/// A pass's rows as Parquet files, one per day of their timestamps.
fn encode_pass(
    rows: Vec<TableRow>,
    previous: Vec<BodyColumn>,
    json: bool,
    pass: u64,
) -> Result<EncodedPass, TablesError> {
    // A pass that adds columns adds them under one new schema.
    let schema_id = iceberg::current_schema_id(&previous) + 1;
    let body_columns = match json {
        true => body_columns::evolve(&previous, rows.iter().map(|r| r.record.body.as_ref()), schema_id),
        false => previous,
    };
    let body_columns =
        body_columns::with_key_column(body_columns, rows.iter().map(|r| &r.record.headers[..]), schema_id);
    let mut by_day: BTreeMap<i32, Vec<TableRow>> = BTreeMap::new();
    for row in rows {
        by_day.entry(iceberg::day_of(row.record.timestamp)).or_default().push(row);
    }
    let mut files = Vec::new();
    for (day, rows) in by_day {
        let Some(bounds) = Bounds::of(&rows) else { continue };
        let path = format!("data/timestamp_day={}/pass-{pass:012}.parquet", iceberg::day_name(day));
        let records = rows.len() as u64;
        let parquet = write_parquet(rows, &body_columns)?;
        files.push((DataFile { path, day, records, size: parquet.len() as u64, bounds }, parquet));
    }
    Ok((body_columns, files))
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
    crate::fnv1a(basin.as_bytes(), 0) % u64::from(shards.max(1)) == u64::from(shard)
}
