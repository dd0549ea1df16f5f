//! One compaction pass: plan, fetch, merge, upload, swap.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use shale_metadata_contract::{CatalogCall, CompactionRun, MetadataApi, MetadataError, Replacement};
use shale_proto::segment::object_path;
use shale_proto::SegmentBuilder;
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use shale_storage::Clock;

use crate::merge::{lay_out, merge_run};
use crate::tiered::TieredThrough;
use crate::{CompactorConfig, CompactorError, CompactorStats};

/// Source objects read at once: at store latency a pass waits about one round trip per
/// this many objects.
const FETCH_CONCURRENCY: usize = 16;

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Bytes eligible at the plan.
    pub pending_bytes: u64,
    /// 0 when the pass waited for more data or found none.
    pub objects_written: u64,
    pub bytes_written: u64,
    /// Merged entries swapped in (each replaces one or more old entries).
    pub entries_written: u64,
    /// Merged entries not swapped in: a trim or delete changed their stream meanwhile, or
    /// their blocks were gone.
    pub entries_dropped: u64,
}

/// Rewrites small segments into large ones sorted by stream (see the crate docs).
pub struct Compactor {
    pub(crate) metadata: Arc<dyn MetadataApi>,
    store: Arc<dyn ObjectStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: CompactorConfig,
    pub(crate) stats: Arc<CompactorStats>,
    /// Where the table tier holds each stream through, for key compaction.
    pub(crate) tiered_through: Option<TieredThrough>,
}

impl Compactor {
    pub fn new(
        config: CompactorConfig,
        metadata: Arc<dyn MetadataApi>,
        store: Arc<dyn ObjectStore>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self { metadata, store, clock, config, stats: Arc::default(), tiered_through: None }
    }

    /// Key compaction drops no record the table tier has not got (see [`TieredThrough`]).
    pub fn with_tiered_through(mut self, tiered_through: TieredThrough) -> Self {
        self.tiered_through = Some(tiered_through);
        self
    }

    pub fn stats(&self) -> Arc<CompactorStats> {
        self.stats.clone()
    }

    /// One pass: compacts up to `object_bytes` if enough is eligible (or it waited long
    /// enough), else does nothing.
    pub async fn run_once(&self) -> Result<CompactionReport, CompactorError> {
        let config = &self.config;
        let call = CatalogCall::PlanCompaction {
            shard: config.shard,
            shards: config.shards,
            min_age_ms: config.min_age.as_millis() as u64,
            max_bytes: config.object_bytes,
            remerge_below: config.block_bytes / 2,
            min_bytes: config.min_object_bytes,
            max_wait_ms: config.max_wait.as_millis() as u64,
        };
        let plan = self.metadata.catalog(call).await?.into_compaction_plan()?;
        let now = self.clock.now_ms();
        let lag_ms = if plan.oldest_sealed_ms == 0 { 0 } else { now.saturating_sub(plan.oldest_sealed_ms) };
        self.stats.pending_bytes.store(plan.pending_bytes, Ordering::Relaxed);
        self.stats.uncompacted_bytes.store(plan.uncompacted_bytes, Ordering::Relaxed);
        self.stats.lag_seconds.store(lag_ms / 1000, Ordering::Relaxed);
        let mut report = CompactionReport { pending_bytes: plan.pending_bytes, ..CompactionReport::default() };
        let planned: u64 = plan.runs.iter().flat_map(|run| &run.entries).map(|e| u64::from(e.len)).sum();
        let waited_enough = lag_ms >= config.max_wait.as_millis() as u64 + config.min_age.as_millis() as u64;
        if planned == 0 || (planned < config.min_object_bytes && !waited_enough) {
            return Ok(report);
        }
        self.rewrite_runs(plan.runs, &mut report).await?;
        self.stats.passes.fetch_add(report.objects_written, Ordering::Relaxed);
        Ok(report)
    }

    /// Rewrites the shard's entries that lie in fragmented compacted objects (less than
    /// half their bytes still named), so those objects are released: one object of up
    /// to `object_bytes`.
    pub async fn run_defragment(&self) -> Result<CompactionReport, CompactorError> {
        let config = &self.config;
        let call =
            CatalogCall::PlanDefragment { shard: config.shard, shards: config.shards, max_bytes: config.object_bytes };
        let plan = self.metadata.catalog(call).await?.into_compaction_plan()?;
        let mut report = CompactionReport { pending_bytes: plan.pending_bytes, ..CompactionReport::default() };
        if plan.runs.is_empty() {
            return Ok(report);
        }
        self.rewrite_runs(plan.runs, &mut report).await?;
        self.stats.defragment_passes.fetch_add(report.objects_written, Ordering::Relaxed);
        Ok(report)
    }

    /// Fetches the runs' blocks, merges each run into one object, uploads it and swaps
    /// its entries in, counting what was written and dropped in `report`.
    async fn rewrite_runs(
        &self,
        runs: Vec<CompactionRun>,
        report: &mut CompactionReport,
    ) -> Result<(), CompactorError> {
        let blocks = self.fetch(&runs).await?;
        // Decoding and re-encoding up to `object_bytes` takes a pass's CPU: off the
        // runtime's threads, which serve appends and reads in the same process.
        let block_bytes = self.config.block_bytes;
        let built = tokio::task::spawn_blocking(move || build_object(&runs, &blocks, block_bytes))
            .await
            .map_err(|e| CompactorError::Merge(e.to_string()))??;
        report.entries_dropped += built.runs_dropped;
        if let Some(swapped) = self.upload_and_swap(built.parts, built.replacements).await? {
            report.entries_dropped += swapped.dropped;
            if swapped.accepted > 0 {
                report.objects_written = 1;
                report.bytes_written = swapped.bytes;
                report.entries_written = swapped.accepted;
            }
        }
        Ok(())
    }

    /// Uploads a built object and asks metadata to swap its entries in; deletes it again
    /// when none was accepted. `None` when there was nothing to swap.
    pub(crate) async fn upload_and_swap(
        &self,
        parts: Vec<Bytes>,
        mut replacements: Vec<Replacement>,
    ) -> Result<Option<Swapped>, CompactorError> {
        if replacements.is_empty() {
            return Ok(None);
        }
        // Stamped just before the upload: metadata refuses commits of objects older than
        // its max_commit_age, which is what lets orphan collection delete unclaimed ones.
        let segment_id = shale_storage::ids::segment_id(self.clock.as_ref());
        for replacement in &mut replacements {
            replacement.new.segment_id = segment_id;
        }
        let path = Path::from(object_path(segment_id));
        let payload = PutPayload::from_iter(parts);
        let size = payload.content_length() as u64;
        self.store.put(&path, payload).await.map_err(|e| store_error(&path, &e))?;
        let proposed = replacements.len() as u64;
        let call = CatalogCall::CommitCompaction { segment_id, replacements };
        let accepted = u64::from(self.metadata.catalog(call).await?.into_compaction_accepted()?).min(proposed);
        let stats = &self.stats;
        stats.entries_dropped.fetch_add(proposed - accepted, Ordering::Relaxed);
        if accepted == 0 {
            // Nothing names the object: delete it now rather than leave it to orphan collection.
            let _ = self.store.delete(&path).await;
            return Ok(Some(Swapped { accepted: 0, dropped: proposed, bytes: 0 }));
        }
        stats.objects_written.fetch_add(1, Ordering::Relaxed);
        stats.bytes_written.fetch_add(size, Ordering::Relaxed);
        stats.entries_written.fetch_add(accepted, Ordering::Relaxed);
        tracing::info!(object = %path, bytes = size, proposed, accepted, "compacted");
        Ok(Some(Swapped { accepted, dropped: proposed - accepted, bytes: size }))
    }

    /// The blocks of every planned entry, keyed by (segment, offset): one `get_ranges`
    /// per segment (adjacent ranges coalesce into one request). A segment gone since the
    /// plan (trimmed, deleted) leaves its entries out.
    pub(crate) async fn fetch(&self, runs: &[CompactionRun]) -> Result<HashMap<(u128, u64), Bytes>, CompactorError> {
        use futures::{StreamExt, TryStreamExt};
        let mut by_segment: HashMap<u128, Vec<Range<u64>>> = HashMap::new();
        for entry in runs.iter().flat_map(|run| &run.entries) {
            by_segment.entry(entry.segment_id).or_default().push(entry.offset..entry.offset + u64::from(entry.len));
        }
        let fetches = futures::stream::iter(by_segment).map(|(segment_id, mut ranges)| async move {
            ranges.sort_by_key(|range| range.start);
            let path = Path::from(object_path(segment_id));
            match self.store.get_ranges(&path, &ranges).await {
                Ok(fetched) => {
                    self.stats.get_requests.fetch_add(shale_storage::coalesced_requests(&ranges), Ordering::Relaxed);
                    Ok(ranges
                        .into_iter()
                        .zip(fetched)
                        .map(|(range, bytes)| ((segment_id, range.start), bytes))
                        .collect())
                }
                Err(shale_storage::object_store::Error::NotFound { .. }) => Ok(Vec::new()),
                Err(e) => Err(store_error(&path, &e)),
            }
        });
        let fetched: Vec<Vec<((u128, u64), Bytes)>> = fetches.buffer_unordered(FETCH_CONCURRENCY).try_collect().await?;
        let blocks: HashMap<(u128, u64), Bytes> = fetched.into_iter().flatten().collect();
        let bytes: u64 = blocks.values().map(|b| b.len() as u64).sum();
        self.stats.bytes_read.fetch_add(bytes, Ordering::Relaxed);
        Ok(blocks)
    }
}

/// What one upload and swap did.
pub(crate) struct Swapped {
    pub accepted: u64,
    pub dropped: u64,
    pub bytes: u64,
}

/// A compacted object before its upload: its bytes and the swaps that name it (their
/// `segment_id` still 0).
struct BuiltObject {
    parts: Vec<Bytes>,
    replacements: Vec<Replacement>,
    /// Runs left out because some of their blocks were gone.
    runs_dropped: u64,
}

/// Merges each run's fetched blocks into blocks of about `block_bytes` and lays them out
/// in one object, in run order.
fn build_object(
    runs: &[CompactionRun],
    blocks: &HashMap<(u128, u64), Bytes>,
    block_bytes: u64,
) -> Result<BuiltObject, CompactorError> {
    let mut builder = SegmentBuilder::new();
    let mut replacements = Vec::new();
    let mut runs_dropped = 0;
    for run in runs {
        let Some(inputs) = run
            .entries
            .iter()
            .map(|e| blocks.get(&(e.segment_id, e.offset)).map(|b| (*e, b.clone())))
            .collect::<Option<Vec<_>>>()
        else {
            runs_dropped += 1;
            continue;
        };
        lay_out(&mut builder, &mut replacements, run, merge_run(&inputs, block_bytes)?);
    }
    Ok(BuiltObject { parts: builder.finish_parts(), replacements, runs_dropped })
}

fn store_error(path: &Path, error: &shale_storage::object_store::Error) -> CompactorError {
    tracing::warn!(object = %path, %error, "compaction store request failed");
    CompactorError::Store { object: path.to_string(), reason: shale_storage::describe(error).to_string() }
}

/// Runs passes until `shutdown` resolves: again after a pass that wrote an object (there
/// may be more) as soon as its `max_bytes_per_second` budget allows, else after
/// `interval`. Stops for good when metadata says this instance or its peer is fenced or
/// stopped.
pub async fn run_compactor(compactor: Arc<Compactor>, shutdown: impl std::future::Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        let started_ms = compactor.clock.now_ms();
        // Key compaction after each pass: it rewrites only streams with it on.
        let pass = compactor.run_once().await;
        if let Err(error) = compactor.run_key_pass().await {
            tracing::warn!(%error, "key compaction pass failed");
        }
        if let Err(error) = compactor.run_defragment().await {
            tracing::warn!(%error, "defragmenting pass failed");
        }
        let pause = match pass {
            Ok(report) if report.objects_written > 0 => {
                let took = std::time::Duration::from_millis(compactor.clock.now_ms().saturating_sub(started_ms));
                compactor.config.pause_after(report.bytes_written, took)
            }
            Ok(_) => compactor.config.interval,
            Err(CompactorError::Metadata(MetadataError::Fenced | MetadataError::Stopped)) => return,
            Err(error) => {
                tracing::warn!(%error, "compaction pass failed");
                compactor.config.interval
            }
        };
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}
