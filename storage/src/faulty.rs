//! Random store faults for process-level fault injection: a fraction of chosen requests
//! (by kind and path prefix) fail as a store error would, drawn from a seeded generator
//! so a run can be repeated. Configured by a spec such as
//! `seed=7,put:segments/=0.05,put:metadata/=0.02,get=0.01` (kinds: `put`, `get`,
//! `list`, `delete`; an empty prefix matches everything).

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, Result,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Put,
    Get,
    List,
    Delete,
}

#[derive(Clone, Debug)]
struct Rule {
    kind: Kind,
    prefix: String,
    /// Failure probability in parts per million.
    ppm: u64,
}

/// A store that fails a seeded random fraction of chosen requests.
#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    rules: Vec<Rule>,
    seed: u64,
    draws: AtomicU64,
    injected: Arc<crate::StoreCounters>,
}

impl FaultyStore {
    /// Parses `spec` (see the module doc); faults are counted in `counters`.
    pub fn new(
        inner: Arc<dyn ObjectStore>,
        spec: &str,
        counters: Arc<crate::StoreCounters>,
    ) -> std::result::Result<Self, String> {
        let mut rules = Vec::new();
        let mut seed = 0;
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) =
                part.split_once('=').ok_or_else(|| format!("store fault `{part}`: expected key=value"))?;
            if key == "seed" {
                seed = value.parse().map_err(|_| format!("store fault seed `{value}` is not a number"))?;
                continue;
            }
            let (kind, prefix) = key.split_once(':').unwrap_or((key, ""));
            let kind = match kind {
                "put" => Kind::Put,
                "get" => Kind::Get,
                "list" => Kind::List,
                "delete" => Kind::Delete,
                other => return Err(format!("store fault kind `{other}`: expected put, get, list or delete")),
            };
            let probability: f64 =
                value.parse().map_err(|_| format!("store fault `{part}`: `{value}` is not a probability"))?;
            if !(0.0..=1.0).contains(&probability) {
                return Err(format!("store fault `{part}`: probability must be within 0..=1"));
            }
            rules.push(Rule { kind, prefix: prefix.to_string(), ppm: (probability * 1e6) as u64 });
        }
        Ok(Self { inner, rules, seed, draws: AtomicU64::new(0), injected: counters })
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.faults_injected.load(Ordering::Relaxed)
    }

    /// Whether this request fails: a splitmix64 draw from the seed and a counter.
    fn fails(&self, kind: Kind, location: &str) -> bool {
        let Some(rule) = self.rules.iter().find(|r| r.kind == kind && location.starts_with(r.prefix.as_str())) else {
            return false;
        };
        let mut x =
            self.seed.wrapping_add(self.draws.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        let failed = x % 1_000_000 < rule.ppm;
        if failed {
            self.injected.faults_injected.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(?kind, location, "injected store fault");
        }
        failed
    }

    fn fault(kind: Kind, location: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "FaultyStore",
            source: format!("injected fault: {kind:?} {location}").into(),
        }
    }

    fn check(&self, kind: Kind, location: &str) -> Result<()> {
        if self.fails(kind, location) {
            return Err(Self::fault(kind, location));
        }
        Ok(())
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.check(Kind::Put, location.as_ref())?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.check(Kind::Put, location.as_ref())?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.check(Kind::Get, location.as_ref())?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.check(Kind::Get, location.as_ref())?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        if self.fails(Kind::Delete, "") {
            return futures::stream::once(async { Err(Self::fault(Kind::Delete, "")) }).boxed();
        }
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let at = prefix.map(|p| p.as_ref().to_string()).unwrap_or_default();
        if self.fails(Kind::List, &at) {
            return futures::stream::once(async move { Err(Self::fault(Kind::List, &at)) }).boxed();
        }
        self.inner.list(prefix)
    }

    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, Result<ObjectMeta>> {
        let at = prefix.map(|p| p.as_ref().to_string()).unwrap_or_default();
        if self.fails(Kind::List, &at) {
            return futures::stream::once(async move { Err(Self::fault(Kind::List, &at)) }).boxed();
        }
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.check(Kind::List, prefix.map(|p| p.as_ref()).unwrap_or_default())?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.check(Kind::Put, to.as_ref())?;
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use object_store::ObjectStoreExt;

    use super::*;

    #[tokio::test]
    async fn a_seeded_fraction_of_chosen_requests_fails() {
        let counters = Arc::new(crate::StoreCounters::default());
        let store = FaultyStore::new(Arc::new(InMemory::new()), "seed=3,put:segments/=0.5", counters.clone())
            .expect("valid spec");
        let mut failed = 0;
        for i in 0..200 {
            if store.put(&Path::from(format!("segments/{i}")), PutPayload::from_static(b"x")).await.is_err() {
                failed += 1;
            }
            store.put(&Path::from(format!("other/{i}")), PutPayload::from_static(b"x")).await.expect("not chosen");
        }
        assert!((60..140).contains(&failed), "about half of 200 fail: {failed}");
        assert_eq!(store.injected(), failed);
        assert_eq!(counters.faults_injected.load(Ordering::Relaxed), failed);
        assert!(FaultyStore::new(Arc::new(InMemory::new()), "put=2", counters.clone()).is_err());
        assert!(FaultyStore::new(Arc::new(InMemory::new()), "flip:x=0.1", counters).is_err());
    }
}
