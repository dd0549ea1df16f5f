use std::sync::atomic::AtomicU64;

/// Compaction totals since start (counters) and what the last plan found (gauges).
#[derive(Debug, Default)]
pub struct CompactorStats {
    pub passes: AtomicU64,
    pub objects_written: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub get_requests: AtomicU64,
    pub entries_written: AtomicU64,
    pub entries_dropped: AtomicU64,
    pub pending_bytes: AtomicU64,
    pub uncompacted_bytes: AtomicU64,
    pub lag_seconds: AtomicU64,
    /// Streams rewritten by key compaction, and the records it dropped.
    pub key_passes: AtomicU64,
    pub key_records_dropped: AtomicU64,
    /// Objects written to move the entries out of fragmented compacted objects.
    pub defragment_passes: AtomicU64,
}

impl CompactorStats {
    /// Prometheus text for `/metrics`.
    pub fn render(&self, out: &mut String) {
        let counters = [
            ("shale_compaction_passes_total", "Compaction passes that wrote an object", &self.passes),
            ("shale_compaction_objects_written_total", "Compacted objects written", &self.objects_written),
            ("shale_compaction_bytes_read_total", "Block bytes read by compaction", &self.bytes_read),
            ("shale_compaction_bytes_written_total", "Bytes of compacted objects written", &self.bytes_written),
            ("shale_compaction_get_requests_total", "Range-GET requests made by compaction", &self.get_requests),
            (
                "shale_compaction_entries_written_total",
                "Merged index entries swapped in, each for one or more old entries",
                &self.entries_written,
            ),
            (
                "shale_compaction_entries_dropped_total",
                "Merged entries not swapped in because a trim or delete changed their stream meanwhile",
                &self.entries_dropped,
            ),
            (
                "shale_compaction_defragment_passes_total",
                "Objects written to move entries out of compacted objects less than half named",
                &self.defragment_passes,
            ),
            ("shale_key_compaction_streams_total", "Streams key compaction read (from their trim point to their horizon)", &self.key_passes),
            (
                "shale_key_compaction_records_dropped_total",
                "Records key compaction dropped: superseded by a later record of their key, or tombstones past delete.retention.ms",
                &self.key_records_dropped,
            ),
        ];
        shale_storage::render_counters(&counters, out);
        let gauges = [
            (
                "shale_compaction_pending_bytes",
                "Bytes eligible for compaction at the last walk of the marked streams",
                &self.pending_bytes,
            ),
            (
                "shale_compaction_uncompacted_bytes",
                "Bytes not compacted yet, eligible or too young (at most), at the last plan",
                &self.uncompacted_bytes,
            ),
            (
                "shale_compaction_lag_seconds",
                "Age of the oldest eligible uncompacted segment at the last plan",
                &self.lag_seconds,
            ),
        ];
        shale_storage::render_gauges(&gauges, out);
    }
}
