//! Shale as separate processes on the local S3 server (moto): metadata, gateways and
//! readers started on free loopback ports against one fresh bucket.

use std::collections::HashSet;
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use shale_storage::object_store::path::Path;
use shale_storage::object_store::ObjectStore;
use shale_tests::Moto;

use super::{spawn, terminate};

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub env: Vec<(&'static str, String)>,
    pub store_url: String,
    pub store: Arc<dyn ObjectStore>,
    pub metadata: Vec<String>,
    pub gateways: Vec<(Child, String)>,
    pub readers: Vec<(Child, String)>,
    /// The gateways' gRPC base URLs, in start order.
    pub gateway_grpc: Vec<String>,
}

static BUCKETS: AtomicU64 = AtomicU64::new(0);

impl Cluster {
    /// A fresh bucket and a config file with `toml`; no processes yet.
    pub async fn new(toml: &str) -> Cluster {
        let moto = Moto::shared().await;
        let bucket = format!("cluster-{}-{}", std::process::id(), BUCKETS.fetch_add(1, Ordering::SeqCst));
        let store = moto.bucket(&bucket).await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("shale.toml"), toml).unwrap();
        let mut env = moto.env();
        env.push(("SHALE_CONFIG", dir.path().join("shale.toml").display().to_string()));
        Cluster {
            dir,
            env,
            store_url: format!("s3://{bucket}"),
            store,
            metadata: Vec::new(),
            gateways: Vec::new(),
            readers: Vec::new(),
            gateway_grpc: Vec::new(),
        }
    }

    /// Starts `shale metadata` on free loopback ports; returns it, its gRPC address and
    /// its HTTP base URL (health, readiness, metrics).
    pub fn start_metadata(&self) -> (Child, String, String) {
        let args = ["metadata", "--store", &self.store_url, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"];
        let (child, http, grpc) = spawn(self.dir.path(), &args, &self.env);
        (child, grpc.trim_start_matches("http://").to_string(), http)
    }

    /// Starts gateways and readers against every metadata address known so far.
    pub fn start_roles(&mut self, gateways: usize, readers: usize) {
        let metadata = self.metadata.join(",");
        for (role, count) in [("gateway", gateways), ("reader", readers)] {
            for _ in 0..count {
                let args = [
                    role,
                    "--store",
                    &self.store_url,
                    "--metadata",
                    &metadata,
                    "--http",
                    "127.0.0.1:0",
                    "--grpc",
                    "127.0.0.1:0",
                ];
                let (child, http, grpc) = spawn(self.dir.path(), &args, &self.env);
                match role {
                    "gateway" => {
                        self.gateways.push((child, http));
                        self.gateway_grpc.push(grpc);
                    }
                    _ => self.readers.push((child, http)),
                }
            }
        }
    }

    /// Starts `shale compactor` against every metadata address known so far; returns it
    /// and its HTTP base URL (metrics).
    pub fn start_compactor(&self) -> (Child, String) {
        let metadata = self.metadata.join(",");
        let args = ["compactor", "--store", &self.store_url, "--metadata", &metadata, "--http", "127.0.0.1:0"];
        let (child, http, _) = spawn(self.dir.path(), &args, &self.env);
        (child, http)
    }

    pub async fn segment_objects(&self) -> HashSet<Path> {
        use futures::TryStreamExt;
        self.store.list(Some(&Path::from("segments"))).map_ok(|m| m.location).try_collect().await.unwrap()
    }

    /// Whether the segment object at `path` holds one of the appends sent to the victim.
    pub async fn holds_doomed_records(&self, path: &Path) -> bool {
        use shale_storage::object_store::ObjectStoreExt;
        let bytes = self.store.get(path).await.unwrap().bytes().await.unwrap();
        let blocks = shale_proto::segment::decode_segment(path.as_ref(), &bytes).unwrap();
        blocks.iter().flat_map(|(_, block)| &block.records).any(|record| record.body.starts_with(b"doomed-"))
    }

    pub fn stop_all(self) {
        for (child, _) in self.gateways.into_iter().chain(self.readers) {
            terminate(child);
        }
    }
}
