//! Shale as separate processes on the local S3 server (moto): metadata, gateways and
//! readers started on free loopback ports against one fresh bucket.

use std::collections::HashSet;
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

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

/// Leases short enough that a takeover after a crash takes about a second.
pub const FAST_LEASE: &str = "[cluster]\nlease = \"600ms\"\nrenew_interval = \"100ms\"\n";

/// Kafka agents that renew every 250 ms and drop out 2 s after their last renewal: above
/// a metadata failover under [`FAST_LEASE`] (about a second).
pub const FAST_AGENTS: &str = "[kafka]\nheartbeat_interval = \"250ms\"\nagent_ttl = \"2s\"\n";

/// A `shale agent` process: its Kafka address, HTTP base URL and log lines.
pub struct Agent {
    pub child: Child,
    pub kafka: String,
    pub http: String,
    pub logs: std::sync::mpsc::Receiver<String>,
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

    /// The command line of `role` against this store and every metadata address known
    /// so far, on free loopback ports.
    fn role_args(&self, role: &str) -> Vec<String> {
        let metadata = self.metadata.join(",");
        [role, "--store", &self.store_url, "--metadata", &metadata, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"]
            .map(str::to_string)
            .to_vec()
    }

    /// Starts gateways and readers against every metadata address known so far.
    pub fn start_roles(&mut self, gateways: usize, readers: usize) {
        for (role, count) in [("gateway", gateways), ("reader", readers)] {
            for _ in 0..count {
                let args = self.role_args(role);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
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

    /// Starts `shale agent` (Kafka on a free loopback port) against every metadata
    /// address known so far.
    pub fn start_agent(&self) -> Agent {
        let mut args = self.role_args("agent");
        args.extend(["--kafka".to_string(), "127.0.0.1:0".to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (child, start, logs) = super::spawn_started(self.dir.path(), &args, &self.env);
        let field = |name: &str| super::start_field(&start, name).unwrap();
        Agent { child, kafka: field("kafka="), http: format!("http://{}", field("http=")), logs }
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

    /// Kills `leader` with -9 and starts a new metadata process, returned with its HTTP
    /// base URL once it holds the lease.
    pub async fn replace_metadata(
        &self,
        client: &reqwest::Client,
        mut leader: std::process::Child,
    ) -> (std::process::Child, String) {
        leader.kill().unwrap();
        leader.wait().unwrap();
        let (next, _, next_http) = self.start_metadata();
        wait_for_lease(client, &next_http, "the new metadata").await;
        (next, next_http)
    }

    pub fn stop_all(self) {
        for (child, _) in self.gateways.into_iter().chain(self.readers) {
            terminate(child);
        }
    }
}

/// Every record of `stream` on `reader`, checking dense sequence numbers from 0.
pub async fn read_stream(client: &reqwest::Client, basin: &str, reader: &str, stream: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    loop {
        let r = client
            .get(format!("{reader}/v1/streams/{stream}/records?seq_num={}", bodies.len()))
            .header("s2-basin", basin)
            .send()
            .await
            .unwrap();
        if r.status() == 404 {
            return bodies; // never appended to
        }
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        let page: Value = r.json().await.unwrap();
        let records = page["records"].as_array().unwrap();
        if records.is_empty() {
            return bodies;
        }
        for record in records {
            assert_eq!(record["seq_num"].as_u64().unwrap(), bodies.len() as u64, "dense sequence numbers");
            bodies.push(record["body"].as_str().unwrap().to_string());
        }
    }
}

pub use shale_tests::wait_until;

/// The seed of a history test: `SHALE_HISTORY_SEED`, or a random one; printed, so a
/// failing run's choices can be replayed.
pub fn history_seed() -> u64 {
    let seed = std::env::var("SHALE_HISTORY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| shale_storage::ids::random_in(0..u64::MAX));
    println!("history seed {seed} (SHALE_HISTORY_SEED={seed} replays the choices)");
    seed
}

/// A metadata leader and a standby (fast leases) and `count` agents (fast heartbeats):
/// the cluster, the leader, the standby and its HTTP base, the agents.
pub async fn agents_with_standby(count: usize) -> (Cluster, Child, Child, String, Vec<Agent>) {
    let mut cluster = Cluster::new(&format!("{FAST_LEASE}{FAST_AGENTS}")).await;
    let (leader, leader_addr, leader_http) = cluster.start_metadata();
    wait_for_lease(&reqwest::Client::new(), &leader_http, "the first metadata").await;
    let (standby, standby_addr, standby_http) = cluster.start_metadata();
    cluster.metadata = vec![leader_addr, standby_addr];
    let agents = (0..count).map(|_| cluster.start_agent()).collect();
    (cluster, leader, standby, standby_http, agents)
}

/// A cluster for history tests: every role's store fails a seeded fraction of requests;
/// one metadata (holding the lease), three agents, and `topic` with `partitions`
/// created (again and again until a faulty store lets it through). Returns the cluster,
/// the metadata process and its HTTP base, and the agents.
pub async fn faulty_agents(seed: u64, topic: &str, partitions: i32) -> (Cluster, Child, String, Vec<Agent>) {
    let faults = format!("store_faults = \"seed={seed},put:segments/=0.05,put:metadata/=0.02,get:segments/=0.02\"\n");
    let mut cluster = Cluster::new(&format!("{faults}{FAST_LEASE}{FAST_AGENTS}")).await;
    let (leader, leader_addr, leader_http) = cluster.start_metadata();
    wait_for_lease(&reqwest::Client::new(), &leader_http, "metadata").await;
    cluster.metadata = vec![leader_addr];
    let agents: Vec<Agent> = (0..3).map(|_| cluster.start_agent()).collect();
    wait_until("the topic is created", Duration::from_secs(30), || async {
        let timeout = Duration::from_secs(40);
        let Ok(mut conn) = shale_tests::kafka_client::KafkaConn::connect(&agents[0].kafka, timeout).await else {
            return false;
        };
        matches!(conn.create_topic(topic, partitions).await, Ok(0 | 36))
    })
    .await;
    (cluster, leader, leader_http, agents)
}

/// Waits (30 s at most) until the metadata process at `base` holds the leader lease.
pub async fn wait_for_lease(client: &reqwest::Client, base: &str, which: &str) {
    wait_until(&format!("{which} to hold the lease"), Duration::from_secs(30), || async {
        metric(client, base, "shale_metadata_leader").await == Some(1)
    })
    .await;
}

/// One counter or gauge from a process's `/metrics`; `None` when absent or unreachable.
pub async fn metric(client: &reqwest::Client, base: &str, name: &str) -> Option<u64> {
    let metrics = client.get(format!("{base}/metrics")).send().await.ok()?.text().await.ok()?;
    shale_tests::series(&metrics, name)
}
