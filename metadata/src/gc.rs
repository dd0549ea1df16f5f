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
//! previous pass settled.

use std::sync::atomic::{AtomicU64, Ordering};

use futures::TryStreamExt;
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, ObjectStoreExt};

use crate::{Metadata, MetadataError, Result};

/// Candidates checked per hold of the writer lock.
const CHECK_BATCH: usize = 128;

/// Totals since start, for `/metrics`.
#[derive(Debug, Default)]
pub struct GcStats {
    pub runs: AtomicU64,
    pub segments_examined: AtomicU64,
    pub orphans_deleted: AtomicU64,
}

impl GcStats {
    /// Prometheus text for `/metrics`.
    pub fn render(&self, out: &mut String) {
        let counters = [
            ("shale_gc_runs_total", "Orphan collection passes", &self.runs),
            (
                "shale_gc_segments_examined_total",
                "Segment objects listed by orphan collection",
                &self.segments_examined,
            ),
            ("shale_gc_orphans_deleted_total", "Uncommitted segment objects deleted", &self.orphans_deleted),
        ];
        shale_storage::render_counters(&counters, out);
    }
}

/// What one collection pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    pub examined: u64,
    pub deleted: u64,
}

impl Metadata {
    /// Deletes segment objects in `store` that are older than `orphan_grace` and that no
    /// commit made visible.
    pub async fn collect_orphans(&self, store: &dyn ObjectStore) -> Result<GcReport> {
        self.check_usable()?;
        let now_ms = self.clock.now_ms();
        let grace_ms = self.config.orphan_grace.as_millis() as u64;
        let prefix = Path::from("segments");
        let cursor = self.gc_cursor.lock().await.clone();
        let listing = match &cursor {
            Some(after) => store.list_with_offset(Some(&prefix), after),
            None => store.list(Some(&prefix)),
        };
        let listed: Vec<_> =
            listing.try_collect().await.map_err(|e| MetadataError::Unavailable(format!("listing segments: {e}")))?;
        let mut report = GcReport { examined: listed.len() as u64, deleted: 0 };
        let mut old_enough: Vec<(u128, Path)> = listed
            .into_iter()
            .filter_map(|meta| {
                let id = segment_id_of(&meta.location)?;
                let created_ms = ulid::Ulid(id).timestamp_ms();
                (now_ms.saturating_sub(created_ms) > grace_ms).then_some((id, meta.location))
            })
            .collect();
        old_enough.sort_by(|a, b| a.1.cmp(&b.1));
        if !old_enough.is_empty() {
            self.confirm_writer().await?;
        }
        // The last key settled in order; a failed delete stops it, so the next pass
        // lists that segment again.
        let mut settled: Option<Path> = None;
        let mut all_settled = true;
        for chunk in old_enough.chunks(CHECK_BATCH) {
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
                if all_settled {
                    settled = Some(path.clone());
                }
            }
        }
        if let Some(settled) = settled {
            *self.gc_cursor.lock().await = Some(settled);
        }
        self.gc_stats.runs.fetch_add(1, Ordering::Relaxed);
        self.gc_stats.segments_examined.fetch_add(report.examined, Ordering::Relaxed);
        self.gc_stats.orphans_deleted.fetch_add(report.deleted, Ordering::Relaxed);
        Ok(report)
    }

    pub fn gc_stats(&self) -> std::sync::Arc<GcStats> {
        self.gc_stats.clone()
    }
}

/// `segments/<ulid>.seg` -> the ULID; anything else is not a segment and is left alone.
fn segment_id_of(path: &Path) -> Option<u128> {
    let name = path.filename()?.strip_suffix(".seg")?;
    ulid::Ulid::from_string(name).ok().map(|ulid| ulid.0)
}

/// Runs [`Metadata::collect_orphans`] every `gc_interval` until the instance stops.
pub async fn run_orphan_collection(metadata: std::sync::Arc<Metadata>, store: std::sync::Arc<dyn ObjectStore>) {
    let mut ticker = tokio::time::interval(metadata.config.gc_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match metadata.collect_orphans(store.as_ref()).await {
            Ok(report) => tracing::debug!(examined = report.examined, deleted = report.deleted, "orphan collection"),
            Err(MetadataError::Fenced | MetadataError::Stopped) => return,
            Err(e) => tracing::warn!(error = %e, "orphan collection failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_segment_objects_are_candidates() {
        let id = ulid::Ulid::new();
        assert_eq!(segment_id_of(&Path::from(format!("segments/{id}.seg"))), Some(id.0));
        assert_eq!(segment_id_of(&Path::from("segments/notes.txt")), None);
        assert_eq!(segment_id_of(&Path::from("segments/xyz.seg")), None);
    }
}
