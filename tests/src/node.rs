use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::TryStreamExt;
use shale_gateway::{Gateway, GatewayConfig};
use shale_metadata::{Metadata, MetadataConfig, DEFAULT_DB_PATH};
use shale_reader::{Reader, ReaderConfig};
use shale_storage::object_store::memory::InMemory;
use shale_storage::object_store::path::Path;
use shale_storage::object_store::ObjectStore;
use shale_storage::{Clock, FailingStore, InstrumentedStore, StoreCounters, SystemClock};

use crate::Moto;

/// Where a suite's data lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Memory,
    File,
    S3,
}

/// A store that outlives the nodes started on it, so tests can reopen.
pub struct TestStore {
    pub backend: Backend,
    pub raw: Arc<dyn ObjectStore>,
    /// The store's URL: `memory://`, `file:///abs/dir` or `s3://bucket`.
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

static BUCKETS: AtomicU64 = AtomicU64::new(0);

impl Backend {
    pub async fn store(self) -> TestStore {
        let (raw, url, dir): (Arc<dyn ObjectStore>, _, _) = match self {
            Backend::Memory => (Arc::new(InMemory::new()), "memory://".to_string(), None),
            Backend::File => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("file://{}", dir.path().canonicalize().unwrap().display());
                (shale_storage::open_store(&url).unwrap(), url, Some(dir))
            }
            Backend::S3 => {
                let moto = Moto::shared().await;
                let name = format!("shale-{}-{}", std::process::id(), BUCKETS.fetch_add(1, Ordering::SeqCst));
                (moto.bucket(&name).await, format!("s3://{name}"), None)
            }
        };
        TestStore { backend: self, raw, url, _dir: dir }
    }
}

impl TestStore {
    /// A test store on an object store the caller set up (e.g. MinIO in a container).
    pub fn on(raw: Arc<dyn ObjectStore>, url: String) -> TestStore {
        TestStore { backend: Backend::S3, raw, url, _dir: None }
    }

    /// Paths of every segment object in the store.
    pub async fn segment_objects(&self) -> Vec<Path> {
        self.segment_sizes().await.into_iter().map(|(path, _)| path).collect()
    }

    /// Every segment object in the store with its size in bytes.
    pub async fn segment_sizes(&self) -> Vec<(Path, u64)> {
        let prefix = Path::from("segments");
        self.raw.list(Some(&prefix)).map_ok(|meta| (meta.location, meta.size)).try_collect().await.unwrap()
    }
}

/// Metadata, gateway and reader in one process over one store:
/// raw store <- instrumented (counts what reaches storage) <- failing (fault injection).
pub struct Node {
    pub metadata: Arc<Metadata>,
    pub gateway: Gateway,
    pub reader: Reader,
    pub counters: Arc<StoreCounters>,
    pub faults: Arc<FailingStore>,
}

impl Node {
    pub async fn start(store: &TestStore, config: GatewayConfig) -> Node {
        Self::start_with(store, config, Arc::new(SystemClock), &MetadataConfig::default()).await
    }

    /// [`Self::start`] with a clock every role uses and metadata's settings.
    pub async fn start_with(
        store: &TestStore,
        config: GatewayConfig,
        clock: Arc<dyn Clock>,
        metadata_config: &MetadataConfig,
    ) -> Node {
        let instrumented = InstrumentedStore::new(store.raw.clone());
        let counters = instrumented.counters();
        let faults = Arc::new(FailingStore::new(Arc::new(instrumented)));
        let composed: Arc<dyn ObjectStore> = faults.clone();
        let metadata = Metadata::open_with(composed.clone(), DEFAULT_DB_PATH, clock.clone(), metadata_config).await;
        let metadata = Arc::new(metadata.unwrap());
        let gateway = Gateway::start(config, composed.clone(), metadata.clone(), clock).unwrap();
        let reader = Reader::new(&ReaderConfig::default(), composed, metadata.clone());
        Node { metadata, gateway, reader, counters, faults }
    }

    /// Commits what is pending and closes the database.
    pub async fn stop(self) {
        self.gateway.shutdown().await;
        self.metadata.close().await.unwrap();
    }
}
