//! Orphan collection: segments uploaded by a gateway that died (or whose commit failed)
//! before any commit made them visible.
//!
//! Safety: a segment is deleted only when it is older than `orphan_grace` and its `o/`
//! key is absent. Commits refuse segments older than `max_commit_age` (< `orphan_grace`),
//! so once a segment is that old no commit can make it visible any more. Before checking,
//! a pass makes one durable write: it succeeds only if no newer instance has opened the
//! database, so every commit ever made of the candidates is in this instance's view (a
//! newer instance would refuse them: they were already too old when it opened).
//!
//! Segment keys sort by time (ULIDs), so each pass lists only keys after the last one a
//! previous pass settled (the cursor, persisted under `m/gc_cursor`), keeping at most
//! [`LIST_PAGE`] candidates, and the cursor never passes a key too young to judge; every
//! [`FULL_SCAN_EVERY`] passes it starts from the beginning, for segments stamped behind
//! the cursor by a gateway whose clock is behind.
//!
//! Clocks: candidates are judged by this instance's clock, and only after a durable
//! write confirms it is the writer; commits are judged by the writer's clock too, so the
//! rule never compares two metadata instances' clocks.

use std::sync::atomic::Ordering;

use futures::TryStreamExt;
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt};

use crate::{keys, Metadata, MetadataError, Result};

/// Candidates checked per hold of the writer lock.
const CHECK_BATCH: usize = 128;

/// What one collection pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    pub examined: u64,
    pub deleted: u64,
}

/// Candidates one pass keeps at most; the next pass goes on from there.
const LIST_PAGE: usize = 10_000;

/// Every this many passes the listing starts from the beginning again, so a segment
/// stamped behind the cursor (a gateway whose clock is behind) is collected too.
const FULL_SCAN_EVERY: u64 = 60;

impl Metadata {
    /// Deletes segment objects in `store` that are older than `orphan_grace` and that no
    /// commit made visible: at most [`LIST_PAGE`] of them per pass, from the keys after
    /// the persisted cursor.
    pub async fn collect_orphans(&self, store: &dyn ObjectStore) -> Result<GcReport> {
        self.check_usable()?;
        let now_ms = self.clock.now_ms();
        let grace_ms = self.config.orphan_grace.as_millis() as u64;
        let prefix = Path::from("segments");
        let passes = self.gc_stats.runs.load(Ordering::Relaxed);
        let cursor = match passes % FULL_SCAN_EVERY {
            0 if passes > 0 => None,
            _ => self.gc_cursor().await?,
        };
        let mut listing = match &cursor {
            Some(after) => store.list_with_offset(Some(&prefix), after),
            None => store.list(Some(&prefix)),
        };
        // Stores need not list in key order (the local filesystem does not), so the
        // whole listing after the cursor is walked, keeping at most LIST_PAGE
        // candidates; `boundary` is the smallest key not settled in this pass (too young,
        // or past the page), and the cursor never moves past it.
        let mut candidates: Vec<(u128, Path)> = Vec::new();
        let mut boundary: Option<Path> = None;
        let mut examined = 0u64;
        while let Some(meta) =
            listing.try_next().await.map_err(|e| MetadataError::Unavailable(format!("listing segments: {e}")))?
        {
            examined += 1;
            let Some(id) = segment_id_of(&meta.location) else { continue };
            let old_enough = now_ms.saturating_sub(ulid::Ulid(id).timestamp_ms()) > grace_ms;
            if old_enough && candidates.len() < LIST_PAGE {
                candidates.push((id, meta.location));
            } else if boundary.as_ref().is_none_or(|b| meta.location < *b) {
                boundary = Some(meta.location);
            }
        }
        candidates.sort_by(|a, b| a.1.cmp(&b.1));
        let mut report = GcReport { examined, deleted: 0 };
        if !candidates.is_empty() {
            self.confirm_writer().await?;
        }
        // The last key settled in order; a failed delete stops it, so the next pass
        // lists that segment again.
        let mut settled: Option<Path> = None;
        let mut all_settled = true;
        for chunk in candidates.chunks(CHECK_BATCH) {
            let mut committed = Vec::with_capacity(chunk.len());
            {
                let _writer = self.writer.lock().await;
                for (id, _) in chunk {
                    committed.push(self.segment_committed(*id).await?);
                }
            }
            for ((_, path), committed) in chunk.iter().zip(committed) {
                if !committed {
                    match store.delete(path).await {
                        Ok(()) => {
                            report.deleted += 1;
                            tracing::info!(object = %path, "deleted orphan segment");
                        }
                        Err(shale_storage::object_store::Error::NotFound { .. }) => {}
                        Err(e) => {
                            tracing::warn!(object = %path, error = %e, "cannot delete orphan segment");
                            all_settled = false;
                        }
                    }
                }
                if all_settled && boundary.as_ref().is_none_or(|b| path < b) {
                    settled = Some(path.clone());
                }
            }
        }
        // Only forward: a full scan settles keys behind the cursor, which stays.
        if let Some(settled) = settled {
            self.save_gc_cursor(&settled).await?;
        }
        self.gc_stats.runs.fetch_add(1, Ordering::Relaxed);
        self.gc_stats.segments_examined.fetch_add(report.examined, Ordering::Relaxed);
        self.gc_stats.orphans_deleted.fetch_add(report.deleted, Ordering::Relaxed);
        Ok(report)
    }

    /// The last segment key settled, persisted so a restart does not list everything.
    async fn gc_cursor(&self) -> Result<Option<Path>> {
        let value = self.db.get(keys::GC_CURSOR).await.map_err(|e| self.storage_error(e))?;
        Ok(value.and_then(|bytes| String::from_utf8(bytes.to_vec()).ok()).map(Path::from))
    }

    async fn save_gc_cursor(&self, settled: &Path) -> Result<()> {
        let current = self.gc_cursor().await?;
        if current.as_ref().is_some_and(|current| current >= settled) {
            return Ok(());
        }
        let writer = self.writer.lock().await;
        let mut batch = slatedb::WriteBatch::new();
        batch.put(keys::GC_CURSOR, settled.as_ref().as_bytes());
        self.write_durably(writer, batch).await
    }

    pub fn gc_stats(&self) -> std::sync::Arc<crate::GcStats> {
        self.gc_stats.clone()
    }
}

/// `segments/<ulid>.seg` -> the ULID; anything else is not a segment and is left alone.
fn segment_id_of(path: &Path) -> Option<u128> {
    let name = path.filename()?.strip_suffix(".seg")?;
    ulid::Ulid::from_string(name).ok().map(|ulid| ulid.0)
}

/// Runs [`Metadata::reclaim`] every `gc_interval`, and [`Metadata::collect_orphans`]
/// with it every [`orphan_passes_every`] passes, until the instance stops.
pub async fn run_collection(metadata: std::sync::Arc<Metadata>, store: std::sync::Arc<dyn ObjectStore>) {
    let mut ticker = tokio::time::interval(metadata.config.gc_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let orphans_every = orphan_passes_every(&metadata.config);
    for pass in 0u64.. {
        ticker.tick().await;
        match metadata.reclaim(store.as_ref()).await {
            Ok(report) => tracing::debug!(?report, "reclaim pass"),
            Err(MetadataError::Fenced | MetadataError::Stopped) => return,
            Err(e) => tracing::warn!(error = %e, "reclaim pass failed"),
        }
        if pass % orphans_every != 0 {
            continue;
        }
        match metadata.collect_orphans(store.as_ref()).await {
            Ok(report) => tracing::debug!(examined = report.examined, deleted = report.deleted, "orphan collection"),
            Err(MetadataError::Fenced | MetadataError::Stopped) => return,
            Err(e) => tracing::warn!(error = %e, "orphan collection failed"),
        }
    }
}

/// Orphan collection runs with one reclaim pass in this many: an orphan waits
/// `orphan_grace` anyway, so listing new segment keys every quarter of it (at least every
/// pass) deletes it at most a quarter later and spares an idle store a LIST per pass.
fn orphan_passes_every(config: &crate::MetadataConfig) -> u64 {
    let quarter = config.orphan_grace / 4;
    (quarter.as_millis() / config.gc_interval.as_millis().max(1)).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;
    use std::time::Duration;

    use shale_storage::object_store::memory::InMemory;
    use shale_storage::object_store::PutPayload;
    use shale_storage::ManualClock;

    use crate::MetadataConfig;

    const T0: u64 = 1_800_000_000_000;

    async fn open(store: Arc<dyn ObjectStore>) -> Metadata {
        let config = MetadataConfig {
            max_commit_age: Duration::from_secs(5),
            orphan_grace: Duration::from_secs(10),
            ..MetadataConfig::default()
        };
        Metadata::open_with(store, "metadata", Arc::new(ManualClock::new(T0)), &config).await.unwrap()
    }

    async fn upload(store: &dyn ObjectStore, stamped_ms: u64, n: u64) -> Path {
        let path = Path::from(format!("segments/{}.seg", ulid::Ulid::from_parts(stamped_ms, u128::from(n))));
        store.put(&path, PutPayload::from_static(b"segment")).await.unwrap();
        path
    }

    /// A pass lists only what it can judge, from a cursor that survives a restart; a
    /// segment stamped behind the cursor (a gateway clock behind) is found by the
    /// periodic full scan.
    #[tokio::test]
    async fn passes_page_from_a_persisted_cursor_and_full_scans_find_what_lies_behind() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        for n in 0..3 {
            upload(store.as_ref(), T0 - 20_000, n).await;
        }
        let young = upload(store.as_ref(), T0, 9).await;
        let metadata = open(store.clone()).await;
        let first = metadata.collect_orphans(store.as_ref()).await.unwrap();
        assert_eq!(first, GcReport { examined: 4, deleted: 3 }, "the young segment is listed and kept");
        metadata.close().await.unwrap();

        let behind = upload(store.as_ref(), T0 - 30_000, 1).await;
        let metadata = open(store.clone()).await;
        let after_restart = metadata.collect_orphans(store.as_ref()).await.unwrap();
        assert_eq!(after_restart.examined, 1, "the cursor survived the restart: only the young key is listed");
        for _ in 1..FULL_SCAN_EVERY {
            metadata.collect_orphans(store.as_ref()).await.unwrap();
        }
        let full = metadata.collect_orphans(store.as_ref()).await.unwrap();
        assert_eq!(full.deleted, 1, "{full:?}");
        assert!(store.head(&behind).await.is_err(), "the segment behind the cursor is collected");
        assert!(store.head(&young).await.is_ok(), "a young segment is kept");
        metadata.close().await.unwrap();
    }

    #[test]
    fn orphans_are_listed_every_quarter_grace_and_at_most_every_pass() {
        let config = |grace, interval| MetadataConfig {
            orphan_grace: Duration::from_secs(grace),
            gc_interval: Duration::from_secs(interval),
            ..MetadataConfig::default()
        };
        assert_eq!(orphan_passes_every(&config(600, 60)), 2);
        assert_eq!(orphan_passes_every(&config(600, 10)), 15);
        assert_eq!(orphan_passes_every(&config(10, 60)), 1);
    }

    #[test]
    fn only_segment_objects_are_candidates() {
        let id = shale_storage::ids::unique_id(&shale_storage::SystemClock);
        assert_eq!(segment_id_of(&Path::from(format!("segments/{id}.seg"))), Some(id.0));
        assert_eq!(segment_id_of(&Path::from("segments/notes.txt")), None);
        assert_eq!(segment_id_of(&Path::from("segments/xyz.seg")), None);
    }
}
