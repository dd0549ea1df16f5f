use std::sync::atomic::AtomicU64;

use shale_storage::Histogram;

/// Counters of one gateway, rendered on `/metrics`.
#[derive(Debug, Default)]
pub struct GatewayMetrics {
    pub appends_acked: AtomicU64,
    pub appends_failed: AtomicU64,
    pub records_acked: AtomicU64,
    pub metered_bytes_acked: AtomicU64,
    pub segments_sealed: AtomicU64,
    pub segment_bytes: AtomicU64,
    /// From seal to the end of the commit: upload plus sequencer round trip.
    pub commit_latency: Histogram,
    /// A segment object's PUT (the first part of `commit_latency`).
    pub upload_latency: Histogram,
    /// From an append's submission to its answer: the wait for a seal plus the commit.
    pub append_latency: Histogram,
}

impl GatewayMetrics {
    pub fn render(&self, out: &mut String) {
        let counters = [
            ("shale_appends_acked_total", "Appends acknowledged", &self.appends_acked),
            ("shale_appends_failed_total", "Appends answered with an error", &self.appends_failed),
            ("shale_records_acked_total", "Records acknowledged", &self.records_acked),
            ("shale_append_metered_bytes_total", "Metered bytes acknowledged", &self.metered_bytes_acked),
            ("shale_segments_written_total", "Segment objects sealed and uploaded", &self.segments_sealed),
            ("shale_segment_bytes_total", "Bytes of sealed segment objects", &self.segment_bytes),
        ];
        shale_storage::render_counters(&counters, out);
        self.commit_latency.render(
            "shale_segment_commit_seconds",
            "Seal to commit of a segment (upload and sequencer)",
            out,
        );
        self.upload_latency.render("shale_segment_upload_seconds", "PUT of a segment object", out);
        self.append_latency.render("shale_append_seconds", "Submission to answer of an append", out);
    }
}
