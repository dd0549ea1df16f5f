use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, Result,
};

/// Object-store latency in user space: every request waits `delay` before it reaches
/// `inner` (30 ms models S3 Standard's round trip, 15 ms each way). Requests overlap
/// freely, as they do against S3. For benchmarks and tests that must see the system at
/// store latency.
#[derive(Debug)]
pub struct DelayedStore {
    inner: Arc<dyn ObjectStore>,
    delay: Duration,
}

impl DelayedStore {
    pub fn new(inner: Arc<dyn ObjectStore>, delay: Duration) -> Self {
        Self { inner, delay }
    }

    async fn wait(&self) {
        // A zero delay must cost nothing: even an elapsed sleep waits for the timer's next
        // tick (up to a millisecond) before its task runs again.
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
    }
}

impl fmt::Display for DelayedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Delayed({:?}, {})", self.delay, self.inner)
    }
}

#[async_trait]
impl ObjectStore for DelayedStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.wait().await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.wait().await;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.wait().await;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.wait().await;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        let delay = self.delay;
        let inner = self.inner.clone();
        futures::stream::once(async move {
            tokio::time::sleep(delay).await;
            inner.delete_stream(locations)
        })
        .flatten()
        .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let delay = self.delay;
        let listing = self.inner.list(prefix);
        futures::stream::once(async move {
            tokio::time::sleep(delay).await;
            listing
        })
        .flatten()
        .boxed()
    }

    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, Result<ObjectMeta>> {
        let delay = self.delay;
        let listing = self.inner.list_with_offset(prefix, offset);
        futures::stream::once(async move {
            tokio::time::sleep(delay).await;
            listing
        })
        .flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.wait().await;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.wait().await;
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;
    use object_store::memory::InMemory;
    use object_store::ObjectStoreExt;

    #[tokio::test(start_paused = true)]
    async fn every_request_waits_the_delay_and_requests_overlap() {
        let store = Arc::new(DelayedStore::new(Arc::new(InMemory::new()), Duration::from_millis(30)));
        let started = tokio::time::Instant::now();
        store.put(&Path::from("a"), PutPayload::from_static(b"1")).await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_millis(30));
        let started = tokio::time::Instant::now();
        let path = Path::from("a");
        let (a, b) = tokio::join!(store.get(&path), store.get(&path));
        assert_eq!(a.unwrap().bytes().await.unwrap(), b.unwrap().bytes().await.unwrap());
        assert_eq!(started.elapsed(), Duration::from_millis(30), "two requests at once take one delay");
        let listed: Vec<_> = store.list(None).try_collect().await.unwrap();
        assert_eq!(listed.len(), 1);
    }

    #[tokio::test]
    async fn no_delay_does_not_wait_for_the_timer() {
        use futures::FutureExt;
        let store = DelayedStore::new(Arc::new(InMemory::new()), Duration::ZERO);
        let put = store.put(&Path::from("a"), PutPayload::from_static(b"1")).now_or_never();
        assert!(put.is_some_and(|put| put.is_ok()), "answered at the first poll, as the store it wraps does");
    }
}
