//! The objects this process wrote last, kept in memory for a while: a reader in the
//! process that wrote a segment (`shale serve`, `shale agent`) follows the tail by
//! reading the blocks just committed, and [`RecentWrites`] answers those range reads from
//! the bytes the PUT sent instead of asking the store for them again (a file read on a
//! local directory, a 30 ms GET on S3).
//!
//! Only whole-object PUTs of at most [`RecentWrites::MAX_OBJECT_BYTES`] are kept, newest
//! first, until `max_bytes` of them are held; the oldest go first. Objects are immutable
//! once written under a name (segments carry unique ids), and a read names only objects
//! its index entries point at, so answering from what was written is answering what the
//! store holds. Deletes and writes through this store forget what they touch; a delete
//! through another handle (metadata's reclaim) does not, so a kept object may outlive its
//! deletion for a while, as a cached block does. Anything else (conditional or
//! open-ended reads, objects not kept) goes to the store.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, Extensions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult,
    MultipartUpload, ObjectMeta, ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

use crate::Clock;

/// One kept object: its parts as written, with where each starts.
struct Kept {
    parts: Vec<(u64, Bytes)>,
    meta: ObjectMeta,
}

impl Kept {
    /// `range` as the store answers it (an end past the object's is the object's end),
    /// sliced from one part when it lies within it (no copy), else gathered; `None` for
    /// a range the store refuses.
    fn range(&self, range: &Range<u64>) -> Option<Bytes> {
        let range = range.start..range.end.min(self.meta.size);
        if range.start >= range.end {
            return None;
        }
        let first = self.parts.partition_point(|(start, part)| start + part.len() as u64 <= range.start);
        let (start, part) = self.parts.get(first)?;
        if range.end <= start + part.len() as u64 {
            let (from, to) = ((range.start - start) as usize, (range.end - start) as usize);
            return Some(part.slice(from..to));
        }
        let mut out = BytesMut::with_capacity((range.end - range.start) as usize);
        for (start, part) in &self.parts[first..] {
            if *start >= range.end {
                break;
            }
            let from = range.start.saturating_sub(*start) as usize;
            let to = (range.end - start).min(part.len() as u64) as usize;
            out.extend_from_slice(&part[from..to]);
        }
        Some(out.freeze())
    }
}

#[derive(Default)]
struct Held {
    objects: HashMap<Path, Arc<Kept>>,
    /// Oldest first.
    order: VecDeque<(Path, u64)>,
    bytes: u64,
}

impl Held {
    fn remove(&mut self, location: &Path) {
        if let Some(old) = self.objects.remove(location) {
            self.bytes -= old.meta.size;
            self.order.retain(|(path, _)| path != location);
        }
    }
}

/// A store decorator that keeps this process's recent small PUTs and answers range reads
/// of them from memory.
pub struct RecentWrites {
    inner: Arc<dyn ObjectStore>,
    clock: Arc<dyn Clock>,
    max_bytes: u64,
    /// Ranges this long or longer go to the store (see [`RecentWrites::answering_below`]).
    answered_below: u64,
    held: Arc<Mutex<Held>>,
    hits: AtomicU64,
}

fn lock(held: &Mutex<Held>) -> std::sync::MutexGuard<'_, Held> {
    held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn forget(held: &Mutex<Held>, location: &Path) {
    lock(held).remove(location);
}

impl RecentWrites {
    /// Larger objects (compacted ones) are not kept.
    pub const MAX_OBJECT_BYTES: u64 = 16 * 1024 * 1024;

    pub fn new(inner: Arc<dyn ObjectStore>, clock: Arc<dyn Clock>, max_bytes: u64) -> Self {
        Self { inner, clock, max_bytes, answered_below: u64::MAX, held: Arc::default(), hits: AtomicU64::new(0) }
    }

    /// Answers only range reads shorter than `bytes`, leaving longer ones to the store:
    /// on a local directory, which maps them ([`crate::MAPPED_READ_MIN`]), a long block
    /// read from the page cache is memory the process does not hold, where an answer
    /// from here keeps the whole written object alive in the reader's block cache.
    pub fn answering_below(mut self, bytes: u64) -> Self {
        self.answered_below = bytes;
        self
    }

    /// The kept bytes of `range`, if kept and short enough to answer.
    fn kept_range(&self, kept: &Kept, range: &Range<u64>) -> Option<Bytes> {
        if range.end.saturating_sub(range.start) >= self.answered_below {
            return None;
        }
        kept.range(range)
    }

    /// Range reads answered from memory so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        lock(&self.held)
    }

    fn keep(&self, location: &Path, payload: &PutPayload, result: &PutResult) {
        let size = payload.content_length() as u64;
        if size == 0 || size > Self::MAX_OBJECT_BYTES || size > self.max_bytes {
            return;
        }
        let mut start = 0;
        let parts = payload
            .iter()
            .map(|part| {
                let at = start;
                start += part.len() as u64;
                (at, part.clone())
            })
            .collect();
        let last_modified = chrono::DateTime::from_timestamp_millis(self.clock.now_ms() as i64).unwrap_or_default();
        let meta = ObjectMeta {
            location: location.clone(),
            last_modified,
            size,
            e_tag: result.e_tag.clone(),
            version: result.version.clone(),
        };
        let mut held = self.held();
        held.remove(location);
        held.objects.insert(location.clone(), Arc::new(Kept { parts, meta }));
        held.order.push_back((location.clone(), size));
        held.bytes += size;
        while held.bytes > self.max_bytes {
            let Some((path, size)) = held.order.pop_front() else { break };
            held.objects.remove(&path);
            held.bytes -= size;
        }
    }

    /// The kept bytes for a plain bounded range read of `location`, if kept.
    fn answer(&self, location: &Path, options: &GetOptions) -> Option<GetResult> {
        let plain = options.if_match.is_none()
            && options.if_none_match.is_none()
            && options.if_modified_since.is_none()
            && options.if_unmodified_since.is_none()
            && options.version.is_none()
            && !options.head;
        let Some(GetRange::Bounded(range)) = &options.range else { return None };
        if !plain {
            return None;
        }
        let kept = self.held().objects.get(location).cloned()?;
        let bytes = self.kept_range(&kept, range)?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        let range = range.start..range.start + bytes.len() as u64;
        Some(GetResult {
            payload: GetResultPayload::Stream(futures::stream::once(async move { Ok(bytes) }).boxed()),
            meta: kept.meta.clone(),
            range,
            attributes: Attributes::default(),
            extensions: Extensions::default(),
        })
    }
}

impl fmt::Debug for RecentWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecentWrites").field("inner", &self.inner).field("max_bytes", &self.max_bytes).finish()
    }
}

impl fmt::Display for RecentWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecentWrites({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for RecentWrites {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        let keep = matches!(opts.mode, PutMode::Overwrite | PutMode::Create);
        // A failed write may or may not have replaced the object: forget what was kept.
        forget(&self.held, location);
        let result = self.inner.put_opts(location, payload.clone(), opts).await?;
        if keep {
            self.keep(location, &payload, &result);
        }
        Ok(result)
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        forget(&self.held, location);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        match self.answer(location, &options) {
            Some(answer) => Ok(answer),
            None => self.inner.get_opts(location, options).await,
        }
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let kept = self.held().objects.get(location).cloned();
        if let Some(kept) = kept {
            if let Some(answers) = ranges.iter().map(|range| self.kept_range(&kept, range)).collect::<Option<Vec<_>>>()
            {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(answers);
            }
        }
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        // Each name is forgotten as it passes, before the store deletes it, so nothing is
        // answered for an object the store no longer holds.
        let held = self.held.clone();
        let locations = locations
            .map(move |location| {
                if let Ok(path) = &location {
                    forget(&held, path);
                }
                location
            })
            .boxed();
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        forget(&self.held, to);
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{InstrumentedStore, ManualClock};
    use object_store::memory::InMemory;
    use object_store::ObjectStoreExt;

    fn store(max_bytes: u64) -> (RecentWrites, Arc<crate::StoreCounters>) {
        let counted = InstrumentedStore::new(Arc::new(InMemory::new()));
        let counters = counted.counters();
        (RecentWrites::new(Arc::new(counted), Arc::new(ManualClock::new(1_000)), max_bytes), counters)
    }

    fn parts(sizes: &[usize]) -> PutPayload {
        let mut next = 0u8;
        PutPayload::from_iter(sizes.iter().map(|&n| {
            let part: Vec<u8> = (0..n)
                .map(|_| {
                    next = next.wrapping_add(1);
                    next
                })
                .collect();
            Bytes::from(part)
        }))
    }

    #[tokio::test]
    async fn range_reads_of_a_recent_put_are_answered_from_memory() {
        let (store, counters) = store(1 << 20);
        let path = Path::from("segments/a.seg");
        let payload = parts(&[10, 100, 50]);
        let whole: Vec<u8> = payload.iter().flat_map(|p| p.to_vec()).collect();
        store.put(&path, payload).await.unwrap();
        let gets = counters.gets();
        for range in [10..110, 15..20, 0..160, 5..130, 159..160] {
            let got = store.get_range(&path, range.clone()).await.unwrap();
            assert_eq!(&got[..], &whole[range.start as usize..range.end as usize], "{range:?}");
        }
        let got = store.get_ranges(&path, &[0..10, 110..160]).await.unwrap();
        assert_eq!((&got[0][..], &got[1][..]), (&whole[..10], &whole[110..]));
        assert_eq!(counters.gets(), gets, "no read reached the store");
        assert_eq!(store.hits(), 6);

        let tail = store.get_range(&path, 150..170).await.unwrap();
        assert_eq!(&tail[..], &whole[150..], "a range past the end is answered to the end, as the store does");
        assert_eq!(counters.gets(), gets);
        assert!(store.get_range(&path, 160..170).await.is_err(), "a range starting at the end: the store's error");
        let conditional = GetOptions { if_match: Some("nope".into()), ..GetOptions::default() };
        assert!(store.get_opts(&path, conditional).await.is_err(), "conditional reads go to the store");
        assert_eq!(counters.gets(), gets + 2);
    }

    #[tokio::test]
    #[allow(clippy::single_range_in_vec_init)] // a list of one range, as `get_ranges` takes
    async fn ranges_as_long_as_the_limit_go_to_the_store() {
        let (store, counters) = store(1 << 20);
        let store = store.answering_below(64);
        let path = Path::from("segments/b.seg");
        let payload = parts(&[40, 100]);
        let whole: Vec<u8> = payload.iter().flat_map(|p| p.to_vec()).collect();
        store.put(&path, payload).await.unwrap();
        let gets = counters.gets();
        let short = store.get_ranges(&path, &[0..63]).await.unwrap();
        assert_eq!(&short[0][..], &whole[..63]);
        assert_eq!((counters.gets(), store.hits()), (gets, 1), "shorter than the limit: from memory");
        for read in [vec![0..64], vec![0..10, 40..140]] {
            let got = store.get_ranges(&path, &read).await.unwrap();
            for (range, bytes) in read.iter().zip(&got) {
                assert_eq!(&bytes[..], &whole[range.start as usize..range.end as usize]);
            }
        }
        let long = store.get_range(&path, 10..110).await.unwrap();
        assert_eq!(&long[..], &whole[10..110]);
        assert_eq!((counters.gets(), store.hits()), (gets + 3, 1), "each call with a long range: the store's");
    }

    #[tokio::test]
    async fn the_oldest_go_first_and_deleted_or_rewritten_objects_are_forgotten() {
        let (store, counters) = store(250);
        let (a, b, c) = (Path::from("a"), Path::from("b"), Path::from("c"));
        for path in [&a, &b, &c] {
            store.put(path, parts(&[100])).await.unwrap();
        }
        assert_eq!(store.held().bytes, 200, "a went to keep the bound");
        let gets = counters.gets();
        store.get_range(&a, 0..10).await.unwrap();
        assert_eq!(counters.gets(), gets + 1, "a is read from the store");
        store.delete(&b).await.unwrap();
        assert!(store.get_range(&b, 0..10).await.is_err(), "a deleted object is not answered");
        let update = PutOptions {
            mode: PutMode::Update(object_store::UpdateVersion { e_tag: None, version: None }),
            ..PutOptions::default()
        };
        let _ = store.put_opts(&c, parts(&[100]), update).await;
        let gets = counters.gets();
        let _ = store.get_range(&c, 0..10).await;
        assert_eq!(counters.gets(), gets + 1, "after a conditional write, c is read from the store");
        assert_eq!(store.held().bytes, 0);
    }
}
