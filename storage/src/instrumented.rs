use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, Result,
};

/// Request and byte counts of an [`InstrumentedStore`].
#[derive(Debug, Default)]
pub struct StoreCounters {
    pub puts: AtomicU64,
    pub put_bytes: AtomicU64,
    pub gets: AtomicU64,
    pub get_bytes: AtomicU64,
    pub deletes: AtomicU64,
    pub lists: AtomicU64,
    /// Requests a [`crate::FaultyStore`] in front failed on purpose (tests only).
    pub faults_injected: AtomicU64,
}

impl StoreCounters {
    /// Prometheus text for `/metrics`.
    pub fn render(&self, out: &mut String) {
        let counters = [
            ("shale_object_puts_total", "Object store PUT requests", &self.puts),
            ("shale_object_put_bytes_total", "Bytes sent in object store PUTs", &self.put_bytes),
            ("shale_object_gets_total", "Object store GET requests (range GETs included)", &self.gets),
            ("shale_object_get_bytes_total", "Bytes received from object store GETs", &self.get_bytes),
            ("shale_object_deletes_total", "Object store delete requests", &self.deletes),
            ("shale_object_lists_total", "Object store list requests", &self.lists),
            (
                "shale_store_faults_injected_total",
                "Store requests failed on purpose (store_faults)",
                &self.faults_injected,
            ),
        ];
        crate::render_counters(&counters, out);
    }

    pub fn puts(&self) -> u64 {
        self.puts.load(Ordering::Relaxed)
    }
    pub fn gets(&self) -> u64 {
        self.gets.load(Ordering::Relaxed)
    }
}

/// Counts every request that reaches `inner`, and traces each (`shale_store=trace`).
#[derive(Debug)]
pub struct InstrumentedStore {
    inner: Arc<dyn ObjectStore>,
    counters: Arc<StoreCounters>,
}

impl InstrumentedStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner, counters: Arc::default() }
    }

    pub fn counters(&self) -> Arc<StoreCounters> {
        self.counters.clone()
    }
}

impl fmt::Display for InstrumentedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instrumented({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for InstrumentedStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        tracing::trace!(target: "shale_store", op = "put", object = %location, bytes = payload.content_length());
        self.counters.puts.fetch_add(1, Ordering::Relaxed);
        self.counters.put_bytes.fetch_add(payload.content_length() as u64, Ordering::Relaxed);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        tracing::trace!(target: "shale_store", op = "put", object = %location, multipart = true);
        self.counters.puts.fetch_add(1, Ordering::Relaxed);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        tracing::trace!(target: "shale_store", op = "get", object = %location, range = ?options.range);
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        let result = self.inner.get_opts(location, options).await?;
        let len = result.range.end - result.range.start;
        self.counters.get_bytes.fetch_add(len, Ordering::Relaxed);
        Ok(result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        tracing::trace!(target: "shale_store", op = "get", object = %location, ranges = ranges.len());
        self.counters.gets.fetch_add(coalesced_requests(ranges), Ordering::Relaxed);
        let bytes: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        self.counters.get_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        tracing::trace!(target: "shale_store", op = "delete");
        self.counters.deletes.fetch_add(1, Ordering::Relaxed);
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        tracing::trace!(target: "shale_store", op = "list", prefix = ?prefix);
        self.counters.lists.fetch_add(1, Ordering::Relaxed);
        self.inner.list(prefix)
    }

    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, Result<ObjectMeta>> {
        tracing::trace!(target: "shale_store", op = "list", prefix = ?prefix, offset = %offset);
        self.counters.lists.fetch_add(1, Ordering::Relaxed);
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        tracing::trace!(target: "shale_store", op = "list", prefix = ?prefix, delimiter = true);
        self.counters.lists.fetch_add(1, Ordering::Relaxed);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// How many GETs an object store makes for `ranges` of one object: ranges less than
/// 1 MiB apart share a request, as `object_store` coalesces them (S3 and the others
/// built on its HTTP client).
pub fn coalesced_requests(ranges: &[Range<u64>]) -> u64 {
    const COALESCE: u64 = 1024 * 1024;
    let mut sorted = ranges.to_vec();
    sorted.sort_by_key(|range| range.start);
    let mut requests = 0;
    let mut end: Option<u64> = None;
    for range in &sorted {
        if end.is_none_or(|end| range.start > end + COALESCE) {
            requests += 1;
        }
        end = Some(end.map_or(range.end, |end| end.max(range.end)));
    }
    requests
}

#[cfg(test)]
mod coalescing_tests {
    use super::coalesced_requests;

    #[test]
    fn ranges_within_a_mebibyte_share_a_request_in_any_order() {
        const MIB: u64 = 1024 * 1024;
        assert_eq!(coalesced_requests(&[]), 0);
        assert_eq!(coalesced_requests(&[0..10, 20..30, MIB..MIB + 1]), 1);
        assert_eq!(coalesced_requests(&[3 * MIB..3 * MIB + 5, 0..10, 20..30]), 2, "unsorted, one gap past 1 MiB");
    }
}
