use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, Result,
};

/// Fault injection: fails chosen PUTs whose path starts with a prefix, and can hold
/// such PUTs or GETs until released (a slow store), passing everything else to `inner`.
#[derive(Debug)]
pub struct FailingStore {
    inner: Arc<dyn ObjectStore>,
    matching_puts: AtomicU64,
    plan: Mutex<Option<FailPlan>>,
    /// `Some(prefix)`: PUTs under it wait until [`FailingStore::release_puts`].
    held: tokio::sync::watch::Sender<Option<String>>,
    /// `Some(prefix)`: every PUT under it fails, until cleared.
    broken: Mutex<Option<String>>,
    /// `Some(prefix)`: GETs under it wait until [`FailingStore::release_gets`].
    held_gets: tokio::sync::watch::Sender<Option<String>>,
    /// How many GETs are waiting now.
    waiting_gets: tokio::sync::watch::Sender<usize>,
    /// PUTs held right now (see [`Self::held_puts_reach`]).
    waiting_puts: tokio::sync::watch::Sender<usize>,
}

#[derive(Debug, Clone)]
struct FailPlan {
    prefix: String,
    /// 1-based index among matching PUTs counted from when the plan was armed.
    nth: u64,
    armed_at: u64,
}

impl FailingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            matching_puts: AtomicU64::new(0),
            plan: Mutex::new(None),
            held: tokio::sync::watch::Sender::new(None),
            broken: Mutex::new(None),
            held_gets: tokio::sync::watch::Sender::new(None),
            waiting_gets: tokio::sync::watch::Sender::new(0),
            waiting_puts: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Every PUT under `prefix` fails from now on (a store that stays down), until
    /// [`Self::repair_puts`].
    pub fn break_puts(&self, prefix: &str) {
        *self.broken.lock().expect("broken lock is never poisoned") = Some(prefix.to_string());
    }

    pub fn repair_puts(&self) {
        *self.broken.lock().expect("broken lock is never poisoned") = None;
    }

    fn is_broken(&self, location: &Path) -> bool {
        let broken = self.broken.lock().expect("broken lock is never poisoned");
        broken.as_ref().is_some_and(|prefix| location.as_ref().starts_with(prefix.as_str()))
    }

    /// Returns once at least `count` PUTs are held at the same time.
    pub async fn held_puts_reach(&self, count: usize) {
        reach(&self.waiting_puts, count).await;
    }

    /// PUTs under `prefix` wait from now until [`Self::release_puts`].
    pub fn hold_puts(&self, prefix: &str) {
        self.held.send_replace(Some(prefix.to_string()));
    }

    /// Lets held PUTs proceed.
    pub fn release_puts(&self) {
        self.held.send_replace(None);
    }

    async fn wait_if_held(&self, location: &Path) {
        wait_while_held(&self.held, &self.waiting_puts, location).await;
    }

    /// GETs under `prefix` wait from now until [`Self::release_gets`].
    pub fn hold_gets(&self, prefix: &str) {
        self.held_gets.send_replace(Some(prefix.to_string()));
    }

    /// Lets held GETs proceed.
    pub fn release_gets(&self) {
        self.held_gets.send_replace(None);
    }

    /// Returns once at least `count` GETs are held at the same time.
    pub async fn held_gets_reach(&self, count: usize) {
        reach(&self.waiting_gets, count).await;
    }

    async fn wait_if_gets_held(&self, location: &Path) {
        wait_while_held(&self.held_gets, &self.waiting_gets, location).await;
    }

    /// Makes the `nth` (1-based) PUT under `prefix` from now on fail, once.
    pub fn fail_nth_put(&self, prefix: &str, nth: u64) {
        let mut plan = self.plan.lock().expect("fail plan lock is never poisoned");
        *plan = Some(FailPlan { prefix: prefix.to_string(), nth, armed_at: self.matching_puts.load(Ordering::SeqCst) });
    }

    fn should_fail(&self, location: &Path) -> bool {
        let mut guard = self.plan.lock().expect("fail plan lock is never poisoned");
        let Some(plan) = guard.as_ref() else { return false };
        if !location.as_ref().starts_with(&plan.prefix) {
            return false;
        }
        let seen = self.matching_puts.fetch_add(1, Ordering::SeqCst) + 1;
        if seen - plan.armed_at == plan.nth {
            *guard = None;
            return true;
        }
        false
    }
}

/// Counts a held GET until it proceeds or is dropped.
/// Waits while `held` names a prefix of `location`, counted in `waiting` meanwhile.
async fn wait_while_held(
    held: &tokio::sync::watch::Sender<Option<String>>,
    waiting: &tokio::sync::watch::Sender<usize>,
    location: &Path,
) {
    let is_held = |prefix: &Option<String>| prefix.as_ref().is_some_and(|p| location.as_ref().starts_with(p.as_str()));
    let mut watch = held.subscribe();
    if !is_held(&watch.borrow_and_update()) {
        return;
    }
    waiting.send_modify(|waiting| *waiting += 1);
    let _counted = Waiting(waiting);
    let _ = watch.wait_for(|prefix| !is_held(prefix)).await;
}

/// Returns once `waiting` reaches `count`.
async fn reach(waiting: &tokio::sync::watch::Sender<usize>, count: usize) {
    let mut waiting = waiting.subscribe();
    let _ = waiting.wait_for(|waiting| *waiting >= count).await;
}

/// Counts one held request while it waits.
struct Waiting<'a>(&'a tokio::sync::watch::Sender<usize>);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|waiting| *waiting -= 1);
    }
}

impl fmt::Display for FailingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Failing({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FailingStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.wait_if_held(location).await;
        if self.is_broken(location) || self.should_fail(location) {
            return Err(object_store::Error::Generic {
                store: "failing",
                source: format!("injected failure for put of {location}").into(),
            });
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.wait_if_gets_held(location).await;
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
