//! Tiering: a pass writes, for each basin with the table tier on, the records that have
//! become old enough (or were compacted) since its last pass as Parquet files (one per day of their
//! timestamps), with the Iceberg manifest and manifest list naming them, then commits
//! the pass, then publishes the table metadata of what it committed.
//!
//! Exactly once: a basin's table has one commit record on the store,
//! `tables/<basin>/state.json`: the pass number, per stream the sequence number tiering
//! goes on from, the table's snapshots, manifests and decoded columns, its files and the
//! archives holding closed days' files (`archive`). It is
//! replaced only by a conditional PUT on the version it was read at, so the positions
//! advance with the snapshot in one write. Positions name each stream's creation time,
//! so a stream deleted and created again is tiered from its start.
//!
//! Pass `N` is written by an attempt with an id of its own: it declares its keys
//! (`attempts/<N>-<id>.json`), then writes `data/timestamp_day=<day>/pass-<N>-<id>.parquet`,
//! `metadata/pass-<N>-<id>-manifest.avro` and `metadata/snap-<N>-<id>.avro` before its
//! commit. Nothing names them until the commit; an attempt that failed, crashed or was
//! overtaken (a tierer paused past a takeover) never overwrites another's keys, and the
//! next commit deletes what such attempts declared (`attempts`). After the commit,
//! `metadata/v<N>.metadata.json` is made from the state alone and
//! `metadata/version-hint.text` set to `N`; a crash between the two is repaired by the
//! next pass, which publishes the committed state first. So an engine that follows the
//! version hint (or opens a metadata file) sees only committed snapshots, each naming
//! complete files; one that reads every Parquet file under `data/` may also see an
//! uncommitted attempt's file until the next commit sweeps it.
//!
//! One tierer per basin at a time is expected (the compactor shard that owns the basin);
//! a second one's commit is refused, and its files are another attempt's.
//!
//! A pass's steps: `gather` (what to tier, read from the log), the pass's files and
//! commit (here), and `maintain` (the maintenance commit, when the table needs one);
//! `state` is the commit record itself and where it lives.

mod gather;
mod maintain;
mod state;

pub(crate) use state::state_path;
pub use state::{read_state, table_root, tiered_through, version_hint_path, StreamPosition, TableState};

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, UpdateVersion};
use serde::Deserialize;
use shale_metadata_contract::{BasinRecord, MetadataApi};
use shale_reader::Reader;
use shale_storage::Clock;

use crate::archive::ArchiveCache;
use crate::attempts::Attempt;
use crate::body_columns::{self, BodyColumn};
use crate::iceberg::{self, Bounds, DataFile, EntryStatus, Manifest, Operation, Snapshot, StoreLocation};
use crate::maintenance::{self, Collected, Maintenance};
use crate::pass_stats::{PassStats, Step};
use crate::{write_parquet, TableRow, TablesError};

/// Records one pass writes for one basin at most: about 128 MiB of 1 KiB records,
/// held in memory while the file is built. The rest waits for the next pass.
pub const MAX_PASS_BYTES: u64 = 128 * 1024 * 1024;

/// Archives a tierer keeps in memory: each is a few hundred bytes per closed day.
const ARCHIVES_KEPT: u64 = 4096;

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
    maintenance: Maintenance,
    /// The archives of the tables it commits, read to keep the sweep off their files.
    archives: ArchiveCache,
    stats: Arc<PassStats>,
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
        let (maintenance, archives) = (Maintenance::default(), ArchiveCache::new(ARCHIVES_KEPT));
        let stats = Arc::default();
        Self { metadata, reader, store, location, clock, owns, maintenance, archives, stats }
    }

    /// Where its passes spent their time.
    pub fn stats(&self) -> Arc<PassStats> {
        self.stats.clone()
    }

    /// How this tierer keeps tables bounded (the default otherwise).
    pub fn with_maintenance(mut self, maintenance: Maintenance) -> Self {
        self.maintenance = maintenance;
        self
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

    /// One pass over the basin: publishes and collects what its committed state left,
    /// commits the records that became eligible, then any maintenance the table needs.
    async fn tier_basin(&self, basin: &BasinRecord) -> Result<u64, TablesError> {
        let Some(tables) = basin.config.tables else { return Ok(0) };
        let mut timer = self.stats.time_basin();
        let (mut state, mut version) = self.state(&basin.name).await?;
        self.publish(&basin.name, &state).await?;
        let collected = maintenance::collect_garbage(self.store.as_ref(), &state).await?;
        timer.done(Step::Prepare);
        let cutoff = self.clock.now_ms().saturating_sub(tables.after_secs.saturating_mul(1000));
        let (rows, positions) = self.gather(basin, &state, cutoff).await?;
        timer.done(Step::Gather);
        let count = rows.len() as u64;
        if !rows.is_empty() {
            let json = tables.body_format == shale_metadata_contract::BodyFormat::Json;
            let (next, attempt) = self.write_pass(basin, &state, collected, rows, positions, json).await?;
            timer.done(Step::Write);
            version = Some(self.commit(&basin.name, &next, version, &attempt).await?);
            timer.done(Step::Commit);
            tracing::info!(basin = %basin.name, pass = next.pass, rows = count, "tiered records into the table");
            state = next;
        }
        if let Some((next, attempt)) = self.maintain(basin, &state, collected).await? {
            self.commit(&basin.name, &next, version, &attempt).await?;
            tracing::info!(
                basin = %basin.name, pass = next.pass, files = next.files.len(),
                manifests = next.manifests.len(), "rewrote the table's small files and manifests"
            );
        }
        timer.done(Step::Maintain);
        Ok(count)
    }

    /// Commits `next`, written by `attempt`, in place of the state at `version` (none:
    /// the first commit), publishes it, and sweeps what attempts that cannot commit left;
    /// returns the committed version.
    async fn commit(
        &self,
        basin: &str,
        next: &TableState,
        version: Option<UpdateVersion>,
        attempt: &Attempt,
    ) -> Result<UpdateVersion, TablesError> {
        let mode = match version {
            Some(version) => PutMode::Update(version),
            None => PutMode::Create,
        };
        let body = Bytes::from(serde_json::to_vec_pretty(next)?);
        let put =
            self.store.put_opts(&state_path(basin), body.into(), PutOptions { mode, ..Default::default() }).await?;
        self.publish(basin, next).await?;
        // The commit stands whatever the sweep does: what it leaves, the next one finds.
        // An attempt that committed and crashed before its own sweep leaves its
        // declaration, which names files that may since have moved into an archive.
        let archived = match self.archives.archived_keys(self.store.as_ref(), next).await {
            Ok(keys) => keys,
            Err(e) => {
                tracing::warn!(basin, pass = next.pass, error = %e, "reading the table's archives failed: no sweep");
                return Ok(UpdateVersion { e_tag: put.e_tag, version: put.version });
            }
        };
        let named = |key: &str| next.names(key) || archived.contains(key);
        match attempt.sweep(self.store.as_ref(), next.pass, named, self.clock.now_ms()).await {
            Ok(0) => {}
            Ok(keys) => {
                tracing::debug!(basin, pass = next.pass, keys, "deleted what attempts that did not commit wrote")
            }
            Err(e) => tracing::warn!(basin, pass = next.pass, error = %e, "sweeping other attempts' keys failed"),
        }
        Ok(UpdateVersion { e_tag: put.e_tag, version: put.version })
    }

    /// Writes pass `state.pass + 1`'s data files, manifest and manifest list under an
    /// attempt of its own, and returns the state that commits them, and the attempt.
    async fn write_pass(
        &self,
        basin: &BasinRecord,
        state: &TableState,
        collected: Collected,
        rows: Vec<TableRow>,
        positions: BTreeMap<String, StreamPosition>,
        json: bool,
    ) -> Result<(TableState, Attempt), TablesError> {
        let root = table_root(&basin.name);
        let pass = state.pass + 1;
        let snapshot_id = pass as i64;
        let count = rows.len() as u64;
        let previous = state.body_columns.clone();
        let attempt = Attempt::new(&root, pass, self.clock.as_ref());
        let naming = attempt.clone();
        // Decoding and encoding take a pass's CPU: off the runtime's threads, which serve
        // the API in the same process.
        let (body_columns, encoded) =
            tokio::task::spawn_blocking(move || encode_pass(rows, previous, json, |day| naming.data_file(day)))
                .await
                .map_err(|e| TablesError::File(format!("encoding pass {pass}: {e}")))??;
        let schema_id = iceberg::current_schema_id(&body_columns);
        let paths: Vec<String> = encoded.iter().map(|(file, _)| file.path.clone()).collect();
        attempt.declare(self.store.as_ref(), &paths, self.clock.as_ref()).await?;
        let mut files = Vec::new();
        for (mut file, parquet) in encoded {
            file.path = format!("{root}/{}", file.path);
            file.snapshot_id = snapshot_id;
            self.store.put(&Path::from(file.path.clone()), parquet.into()).await?;
            files.push(file);
        }
        let entries: Vec<_> = files.iter().map(|f| (EntryStatus::Added, f)).collect();
        let mut manifests = state.manifests.clone();
        manifests.push(self.write_manifest(attempt.manifest(), pass, &entries, schema_id, &body_columns).await?);
        let table_uuid = match state.table_uuid.is_empty() {
            true => iceberg::table_uuid(&basin.name, basin.created_at_ms),
            false => state.table_uuid.clone(),
        };
        let next = TableState {
            pass,
            positions,
            rows: state.rows + count,
            files: state.files.iter().cloned().chain(files.iter().cloned()).collect(),
            table_uuid,
            body_columns,
            manifests,
            snapshots: state.snapshots.clone(),
            garbage: state.garbage.clone(),
            archives: state.archives.clone(),
        };
        let change =
            Change { operation: Operation::Append, schema_id, added: (files.len() as u64, count), deleted: (0, 0) };
        Ok((self.add_snapshot(next, change, collected, &attempt).await?, attempt))
    }

    /// Writes the manifest of `entries` (pass `pass`) at `path` and returns it as the
    /// manifest list names it.
    async fn write_manifest(
        &self,
        path: String,
        pass: u64,
        entries: &[(EntryStatus, &DataFile)],
        schema_id: i32,
        body_columns: &[BodyColumn],
    ) -> Result<Manifest, TablesError> {
        let snapshot_id = pass as i64;
        let avro = iceberg::manifest(entries, &self.location, snapshot_id, schema_id, body_columns);
        let length = avro.len() as u64;
        self.store.put(&Path::from(path.clone()), Bytes::from(avro).into()).await?;
        let live = || entries.iter().filter(|(status, _)| *status != EntryStatus::Deleted).map(|(_, f)| *f);
        let count = |status: EntryStatus| {
            let files = entries.iter().filter(|(s, _)| *s == status).map(|(_, f)| *f);
            files.fold((0, 0), |(n, rows), f| (n + 1, rows + f.records))
        };
        let ((files, rows), (existing_files, existing_rows), (deleted_files, deleted_rows)) =
            (count(EntryStatus::Added), count(EntryStatus::Existing), count(EntryStatus::Deleted));
        Ok(Manifest {
            path,
            length,
            snapshot_id,
            files,
            rows,
            days: (live().map(|f| f.day).min().unwrap_or(0), live().map(|f| f.day).max().unwrap_or(0)),
            existing_files,
            existing_rows,
            deleted_files,
            deleted_rows,
            min_sequence: live().map(|f| f.added_in()).min().unwrap_or(snapshot_id),
        })
    }

    /// `next` with a snapshot of `change` current: writes its manifest list (naming
    /// `next`'s manifests), expires old snapshots, and drops the garbage this pass
    /// `collected`.
    async fn add_snapshot(
        &self,
        mut next: TableState,
        change: Change,
        collected: Collected,
        attempt: &Attempt,
    ) -> Result<TableState, TablesError> {
        let snapshot = Snapshot {
            id: next.pass as i64,
            timestamp_ms: self.clock.now_ms(),
            manifest_list: attempt.manifest_list(),
            schema_id: change.schema_id,
            added_files: change.added.0,
            added_rows: change.added.1,
            operation: change.operation,
            deleted_files: change.deleted.0,
            deleted_rows: change.deleted.1,
        };
        let parent = next.snapshots.last().map(|s| s.id);
        let list = iceberg::manifest_list(&next.listed_manifests(), &self.location, snapshot.id, parent);
        self.store.put(&Path::from(snapshot.manifest_list.clone()), Bytes::from(list).into()).await?;
        next.snapshots.push(snapshot);
        next.garbage.retain(|g| !collected.covers(g));
        self.maintenance.expire_snapshots(&mut next, attempt.root(), self.clock.now_ms());
        Ok(next)
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
}

/// What a commit's snapshot did: its operation, the schema it writes under, and the files
/// and rows it added and deleted.
struct Change {
    operation: Operation,
    schema_id: i32,
    added: (u64, u64),
    deleted: (u64, u64),
}

/// A pass encoded: the decoded columns after it, and its Parquet files, each with its
/// data file entry (path relative to the table root).
type EncodedPass = (Vec<BodyColumn>, Vec<(DataFile, Bytes)>);

/// A pass's rows as Parquet files, one per day of their timestamps.
fn encode_pass(
    rows: Vec<TableRow>,
    previous: Vec<BodyColumn>,
    json: bool,
    data_file: impl Fn(&str) -> String,
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
        let path = data_file(&iceberg::day_name(day));
        let records = rows.len() as u64;
        let parquet = write_parquet(rows, &body_columns)?;
        files.push((DataFile { path, day, records, size: parquet.len() as u64, bounds, snapshot_id: 0 }, parquet));
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
    /// How long a table snapshot is kept after it stopped being current: a query of the
    /// table has at least this long before files it reads may be deleted.
    #[serde(with = "humantime_serde")]
    pub snapshot_retention: std::time::Duration,
    /// Data files smaller than this are merged with files of about their size.
    pub target_file_bytes: u64,
}

impl Default for TieringConfig {
    fn default() -> Self {
        let maintenance = Maintenance::default();
        Self {
            pass_interval: std::time::Duration::from_secs(15),
            snapshot_retention: maintenance.snapshot_retention,
            target_file_bytes: maintenance.target_file_bytes,
        }
    }
}

impl TieringConfig {
    /// The table maintenance these settings ask for.
    pub fn maintenance(&self) -> Maintenance {
        Maintenance {
            snapshot_retention: self.snapshot_retention,
            target_file_bytes: self.target_file_bytes,
            ..Maintenance::default()
        }
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
