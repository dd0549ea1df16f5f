//! What the background passes did and what they leave, for `/metrics`: orphan
//! collection's counters, reclaiming's counters, compaction planning's walks, and the
//! space gauges a reclaim pass refreshes when segments changed.

use std::sync::atomic::AtomicU64;

/// Totals since start (counters) and the state found by the last reclaim pass (gauges).
#[derive(Debug, Default)]
pub struct GcStats {
    pub runs: AtomicU64,
    pub segments_examined: AtomicU64,
    pub orphans_deleted: AtomicU64,
    pub reclaim_runs: AtomicU64,
    pub streams_visited: AtomicU64,
    pub reclaim_pass_ms: AtomicU64,
    pub entries_removed: AtomicU64,
    pub streams_purged: AtomicU64,
    pub streams_deleted_on_empty: AtomicU64,
    pub segments_released: AtomicU64,
    pub segments_deleted: AtomicU64,
    pub bytes_deleted: AtomicU64,
    pub live_segments: AtomicU64,
    pub live_bytes: AtomicU64,
    pub dead_bytes_in_live_segments: AtomicU64,
    pub released_segments: AtomicU64,
    pub released_bytes: AtomicU64,
    pub plan_walks: AtomicU64,
    pub plans_from_last_walk: AtomicU64,
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
            ("shale_reclaim_runs_total", "Reclaim passes (retention, trims, deletes)", &self.reclaim_runs),
            (
                "shale_compaction_plan_walks_total",
                "Compaction plans that read every stream marked uncompacted in their shard",
                &self.plan_walks,
            ),
            (
                "shale_compaction_plans_from_last_walk_total",
                "Compaction plans answered from the last walk while the compactor waits for more",
                &self.plans_from_last_walk,
            ),
            (
                "shale_reclaim_streams_visited_total",
                "Stream records reclaim read: those its agenda held due, not every stream",
                &self.streams_visited,
            ),
            (
                "shale_reclaim_pass_milliseconds_total",
                "Time spent in reclaim passes, survey of segments included",
                &self.reclaim_pass_ms,
            ),
            (
                "shale_reclaim_index_entries_removed_total",
                "Index entries removed by trims, retention and deletes",
                &self.entries_removed,
            ),
            (
                "shale_reclaim_streams_purged_total",
                "Deleted streams whose index entries are all removed",
                &self.streams_purged,
            ),
            (
                "shale_reclaim_streams_deleted_on_empty_total",
                "Streams deleted by delete_on_empty",
                &self.streams_deleted_on_empty,
            ),
            (
                "shale_reclaim_segments_released_total",
                "Segments whose last referenced block was removed",
                &self.segments_released,
            ),
            ("shale_reclaim_segments_deleted_total", "Released segment objects deleted", &self.segments_deleted),
            (
                "shale_reclaim_bytes_deleted_total",
                "Committed bytes of the released segment objects deleted",
                &self.bytes_deleted,
            ),
        ];
        shale_storage::render_counters(&counters, out);
        let gauges = [
            ("shale_store_live_segments", "Segment objects some index entry references", &self.live_segments),
            ("shale_store_live_bytes", "Bytes of referenced blocks", &self.live_bytes),
            (
                "shale_store_reclaimable_bytes_in_live_segments",
                "Bytes of removed blocks inside segments still referenced (compaction frees them)",
                &self.dead_bytes_in_live_segments,
            ),
            (
                "shale_store_released_segments",
                "Segment objects no entry references, awaiting deletion after delete_grace",
                &self.released_segments,
            ),
            ("shale_store_released_bytes", "Bytes of the released segments awaiting deletion", &self.released_bytes),
        ];
        shale_storage::render_gauges(&gauges, out);
    }
}
