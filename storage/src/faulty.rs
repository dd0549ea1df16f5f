//! Random store faults for process-level fault injection: a fraction of chosen requests
//! (by kind and path prefix) fail as a store error would, are delayed, or hang and then
//! fail as a timed-out request would, drawn from a seeded generator so a run can be
//! repeated. Configured by a spec such as
//! `seed=7,put:segments/=0.05,delay:put:metadata/=0.2@150ms,hang:get=0.01@3s`: each rule
//! is `[fail|delay|hang:]kind[:prefix]=probability[@duration]` (kinds: `put`, `get`,
//! `list`, `delete`; an empty prefix matches everything; `delay` and `hang` need the
//! duration, in `ms` or `s`). Every rule that matches a request draws on its own.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Put,
    Get,
    List,
    Delete,
}

/// What a rule does to a request it picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Fail,
    Delay(Duration),
    /// Waits, then fails: a request that never answered until the client gave up.
    Hang(Duration),
}

#[derive(Clone, Debug)]
struct Rule {
    action: Action,
    kind: Kind,
    prefix: String,
    /// Probability in parts per million.
    ppm: u64,
}

/// What happens to one request: a wait, then failure or not.
#[derive(Clone, Copy, Debug, Default)]
struct Fate {
    wait: Duration,
    fails: bool,
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
            rules.push(parse_rule(part, key, value)?);
        }
        Ok(Self { inner, rules, seed, draws: AtomicU64::new(0), injected: counters })
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.faults_injected.load(Ordering::Relaxed)
    }

    /// A splitmix64 draw from the seed and a counter: whether a rule of `ppm` hits.
    fn draw(&self, ppm: u64) -> bool {
        let mut x =
            self.seed.wrapping_add(self.draws.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        x % 1_000_000 < ppm
    }

    /// What happens to this request: every matching rule draws; each hit is counted.
    fn fate(&self, kind: Kind, location: &str) -> Fate {
        let mut fate = Fate::default();
        for rule in self.rules.iter().filter(|r| r.kind == kind && location.starts_with(r.prefix.as_str())) {
            if !self.draw(rule.ppm) {
                continue;
            }
            self.injected.faults_injected.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(?kind, location, action = ?rule.action, "injected store fault");
            match rule.action {
                Action::Fail => fate.fails = true,
                Action::Delay(wait) => fate.wait += wait,
                Action::Hang(wait) => {
                    fate.wait += wait;
                    fate.fails = true;
                }
            }
        }
        fate
    }

    fn fault(kind: Kind, location: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "FaultyStore",
            source: format!("injected fault: {kind:?} {location}").into(),
        }
    }

    async fn check(&self, kind: Kind, location: &str) -> Result<()> {
        let fate = self.fate(kind, location);
        if !fate.wait.is_zero() {
            tokio::time::sleep(fate.wait).await;
        }
        if fate.fails {
            return Err(Self::fault(kind, location));
        }
        Ok(())
    }

    /// `stream` after this request's fate: it waits first, and fails instead of listing.
    fn check_stream<T: Send + 'static>(
        &self,
        kind: Kind,
        location: String,
        stream: BoxStream<'static, Result<T>>,
    ) -> BoxStream<'static, Result<T>> {
        let fate = self.fate(kind, &location);
        if fate.wait.is_zero() && !fate.fails {
            return stream;
        }
        futures::stream::once(async move {
            tokio::time::sleep(fate.wait).await;
            if fate.fails {
                futures::stream::once(async move { Err(Self::fault(kind, &location)) }).boxed()
            } else {
                stream
            }
        })
        .flatten()
        .boxed()
    }
}

/// One rule: `part` is `key=value` as written.
fn parse_rule(part: &str, key: &str, value: &str) -> std::result::Result<Rule, String> {
    let (action, key) = match key.split_once(':') {
        Some((action @ ("fail" | "delay" | "hang"), rest)) => (action, rest),
        _ => ("fail", key),
    };
    let (kind, prefix) = key.split_once(':').unwrap_or((key, ""));
    let kind = match kind {
        "put" => Kind::Put,
        "get" => Kind::Get,
        "list" => Kind::List,
        "delete" => Kind::Delete,
        other => return Err(format!("store fault kind `{other}`: expected put, get, list or delete")),
    };
    let (probability, duration) = match value.split_once('@') {
        Some((p, d)) => {
            (p, Some(parse_duration(d).ok_or_else(|| format!("store fault `{part}`: bad duration `{d}`"))?))
        }
        None => (value, None),
    };
    let probability: f64 =
        probability.parse().map_err(|_| format!("store fault `{part}`: `{probability}` is not a probability"))?;
    if !(0.0..=1.0).contains(&probability) {
        return Err(format!("store fault `{part}`: probability must be within 0..=1"));
    }
    let action = match (action, duration) {
        ("fail", None) => Action::Fail,
        ("delay", Some(d)) => Action::Delay(d),
        ("hang", Some(d)) => Action::Hang(d),
        ("fail", Some(_)) => return Err(format!("store fault `{part}`: a failure takes no duration")),
        _ => return Err(format!("store fault `{part}`: {action} needs a duration (`@200ms`)")),
    };
    Ok(Rule { action, kind, prefix: prefix.to_string(), ppm: (probability * 1e6) as u64 })
}

/// `150ms` or `3s`.
fn parse_duration(text: &str) -> Option<Duration> {
    if let Some(ms) = text.strip_suffix("ms") {
        return ms.parse().ok().map(Duration::from_millis);
    }
    text.strip_suffix('s')?.parse().ok().map(Duration::from_secs)
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.check(Kind::Put, location.as_ref()).await?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.check(Kind::Put, location.as_ref()).await?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.check(Kind::Get, location.as_ref()).await?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.check(Kind::Get, location.as_ref()).await?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.check_stream(Kind::Delete, String::new(), self.inner.delete_stream(locations))
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let at = prefix.map(|p| p.as_ref().to_string()).unwrap_or_default();
        self.check_stream(Kind::List, at, self.inner.list(prefix))
    }

    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, Result<ObjectMeta>> {
        let at = prefix.map(|p| p.as_ref().to_string()).unwrap_or_default();
        self.check_stream(Kind::List, at, self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.check(Kind::List, prefix.map(|p| p.as_ref()).unwrap_or_default()).await?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.check(Kind::Put, to.as_ref()).await?;
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

    #[tokio::test(start_paused = true)]
    async fn delayed_requests_wait_and_succeed_hung_ones_wait_and_fail() {
        let counters = Arc::new(crate::StoreCounters::default());
        let spec = "seed=1,delay:put:a/=1@200ms,hang:get:a/=1@3s";
        let store = FaultyStore::new(Arc::new(InMemory::new()), spec, counters.clone()).expect("valid spec");
        let started = tokio::time::Instant::now();
        store.put(&Path::from("a/x"), PutPayload::from_static(b"x")).await.expect("a delay does not fail");
        assert!(started.elapsed() >= Duration::from_millis(200));
        let started = tokio::time::Instant::now();
        assert!(store.get(&Path::from("a/x")).await.is_err(), "a hang ends in failure");
        assert!(started.elapsed() >= Duration::from_secs(3));
        store.put(&Path::from("b/x"), PutPayload::from_static(b"x")).await.expect("not chosen");
        assert_eq!(store.injected(), 2);
        for bad in ["delay:put=0.1", "put=0.1@1s", "hang:get=0.1@soon"] {
            assert!(FaultyStore::new(Arc::new(InMemory::new()), bad, counters.clone()).is_err(), "{bad}");
        }
    }
}
