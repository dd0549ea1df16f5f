//! The server commands: `shale serve` (metadata, gateway and reader in one process) and
//! the role commands `shale metadata`, `shale gateway` and `shale reader`, which run one
//! role each and talk to each other over `shale.metadata.v1`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use shale_api::auth::Authenticator;
use shale_api::{AppState, MetricsHook, Role};
use shale_compactor::{run_compactor, Compactor, CompactorStats};
use shale_gateway::Gateway;
use shale_metadata::{
    hold_leadership, run_collection, run_transaction_timeouts, LeasedMetadata, Metadata, MetadataApi, MetadataService,
    RemoteConfig, RemoteMetadata, DEFAULT_DB_PATH,
};
use shale_reader::Reader;
use shale_storage::object_store::ObjectStore;
use shale_storage::{DelayedStore, InstrumentedStore, RecentWrites, StoreCounters, SystemClock, MAPPED_READ_MIN};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::dir_lock::{lock_store, Holder};
use crate::running::{bind, client_api, spawn_http, ClientListeners, Running};
use crate::ServeConfig;

/// Where `shale agent` serves Kafka's protocol unless told otherwise (Kafka's port).
const DEFAULT_KAFKA_PORT: u16 = 9092;

struct Store {
    url: String,
    store: Arc<dyn ObjectStore>,
    counters: Arc<StoreCounters>,
}

/// The configured store with its latency, faults and counters; a missing bucket stops
/// here ([`check_bucket`]).
async fn open_store(config: &ServeConfig) -> anyhow::Result<Store> {
    let url = config.store_url()?;
    let mut raw = shale_storage::open_store_with(&url, config.store_fsync)?;
    if !config.store_delay.is_zero() {
        tracing::warn!(delay = ?config.store_delay, "adding latency to every object-store request");
        raw = Arc::new(DelayedStore::new(raw, config.store_delay));
    }
    let instrumented = InstrumentedStore::new(raw);
    let counters = instrumented.counters();
    let mut store: Arc<dyn ObjectStore> = Arc::new(instrumented);
    if let Some(spec) = &config.store_faults {
        // In front of the counters: a failed-on-purpose request never reached the store.
        let faulty = shale_storage::FaultyStore::new(store, spec, counters.clone())
            .map_err(|e| anyhow::anyhow!("store_faults: {e}"))?;
        tracing::warn!(spec, "injecting store faults");
        store = Arc::new(faulty);
    }
    let opened = Store { url, store, counters };
    check_bucket(&opened).await?;
    Ok(opened)
}

/// A bucket that does not exist is told in one line naming it and what to do, before
/// anything reads the store (the store's own error repeats S3's XML for every layer it
/// passes through). Other failures of this first listing surface where they did.
async fn check_bucket(store: &Store) -> anyhow::Result<()> {
    let Some(rest) = store.url.strip_prefix("s3://") else { return Ok(()) };
    let bucket = rest.split('/').next().unwrap_or(rest);
    match store.store.list_with_delimiter(None).await {
        Err(e) if e.to_string().contains("NoSuchBucket") => anyhow::bail!(
            "the bucket `{bucket}` does not exist: create it first (`aws s3 mb s3://{bucket}`, with \
             --endpoint-url for a local S3 server; see docs/operations.md), then start again"
        ),
        _ => Ok(()),
    }
}

/// Whether other processes can open the store at `url`: anything but a local directory
/// or memory.
fn shared(url: &str) -> bool {
    !(url.starts_with("file://") || url.starts_with("memory://"))
}

async fn open_metadata(config: &ServeConfig, store: &Store) -> anyhow::Result<Arc<Metadata>> {
    let metadata = Metadata::open_with(store.store.clone(), DEFAULT_DB_PATH, Arc::new(SystemClock), &config.metadata)
        .await
        .context("opening metadata database")?;
    Ok(Arc::new(metadata))
}

/// `shale serve`: every role in one process, the client API on HTTP and gRPC.
pub async fn serve(config: ServeConfig) -> anyhow::Result<Running> {
    check_kafka(&config)?;
    // Listeners first, then the directory: a start that fails on a busy port or a held
    // directory creates nothing.
    let listeners = ClientListeners::bind(&config).await?;
    let kafka_listener = match config.kafka.listen {
        Some(listen) => Some(bind(listen).await?),
        None => None,
    };
    let lock = lock_store(&config.store_url()?, Holder::Serve, config.takeover).await?;
    let store = open_store(&config).await?;
    let metadata = open_metadata(&config, &store).await?;
    let api: Arc<dyn MetadataApi> = if !shared(&store.url) {
        // Only this process reaches the store (the directory lock keeps every other
        // server off a local one).
        metadata.clone()
    } else {
        // A shared store: a second `serve` on it fences this one, which must then stop
        // answering at once, so every call needs the leader lease, as on the metadata role.
        let lease =
            hold_leadership(metadata.clone(), store.store.clone(), format!("serve {}", config.grpc), config.cluster);
        Arc::new(LeasedMetadata::new(metadata.clone(), Some(lease)))
    };
    let writes = with_recent_writes(&config, &store);
    let gateway =
        Arc::new(Gateway::start(config.gateway.clone(), writes.store.clone(), api.clone(), Arc::new(SystemClock))?);
    let reader = Arc::new(client_reader(&config, &writes, api.clone()));
    let (compactor, compaction) = start_compactor(&config, api.clone(), &store);
    let gc_stats = metadata.gc_stats();
    let agents = metadata.clone();
    let kafka_metrics = Arc::new(shale_kafka::KafkaMetrics::default());
    let kafka_shown = kafka_listener.is_some().then(|| kafka_metrics.clone());
    let background: MetricsHook = Arc::new(move |out: &mut String| {
        gc_stats.render(out);
        agents.render_members(out);
        compaction.render(out);
        if let Some(kafka) = &kafka_shown {
            kafka.render(out);
        }
    });
    let state = AppState::new(
        Role::AllInOne,
        api,
        Some(gateway.clone()),
        Some(reader),
        store.counters.clone(),
        Some(background),
        Arc::new(SystemClock),
    )
    .with_auth(config.auth.root_token(), config.auth.revocation_bound)
    .with_table_store(store.store.clone(), store.url.clone());
    let gc = tokio::spawn(run_collection(metadata.clone(), store.store.clone()));
    let timeouts = tokio::spawn(run_transaction_timeouts(metadata.clone()));
    let mut running = client_api(&config, state.clone(), listeners)?;
    apply_init_file(&config, &state.service()).await?;
    running.serve_kafka(&config, kafka_listener, state.service(), shale_kafka::Cluster::Alone, kafka_metrics).await?;
    running.metadata = Some(metadata);
    running.background.extend([gc, timeouts]);
    running.background.extend(compactor);
    running.lock = lock;
    let kafka = running.kafka_shown();
    tracing::info!(role = "all-in-one", http = %running.http_addr, grpc = %running.grpc_addr, %kafka, store = %store.url,
        block_cache_bytes = config.reader.block_cache_bytes, version = env!("CARGO_PKG_VERSION"),
        config = %config.source, "shale serving");
    Ok(running)
}

/// The Kafka settings, checked before anything starts. With access control on, Kafka
/// clients log in with SASL over access tokens.
fn check_kafka(config: &ServeConfig) -> anyhow::Result<()> {
    config.kafka.validate().map_err(|e| anyhow::anyhow!("{e}"))
}

/// The metadata client of a role process: whichever of `addrs` (or the leader record in
/// the store) holds the lease.
/// A client of the metadata at `addrs`, telling it this process's `role` and HTTP address
/// (`http`) when it watches, for metadata's list of the processes it serves.
fn remote_metadata(
    config: &ServeConfig,
    store: &Store,
    addrs: &[String],
    role: &str,
    http: std::net::SocketAddr,
) -> anyhow::Result<Arc<dyn MetadataApi>> {
    let remote = RemoteConfig { identity: (role.to_string(), http.to_string()), ..config.remote_config()? };
    let client = RemoteMetadata::new(addrs.to_vec(), Some(store.store.clone()), remote)?;
    Ok(Arc::new(client))
}

/// What compaction and tiering did, for `/metrics`.
#[derive(Clone)]
struct BackgroundStats {
    compaction: Arc<CompactorStats>,
    tiering: Arc<shale_tables::PassStats>,
}

impl BackgroundStats {
    fn render(&self, out: &mut String) {
        self.compaction.render(out);
        self.tiering.render(out);
    }
}

/// Starts compaction and tiering against `metadata` when `[compactor] enabled`; their
/// stats either way.
fn start_compactor(
    config: &ServeConfig,
    metadata: Arc<dyn MetadataApi>,
    store: &Store,
) -> (Vec<JoinHandle<()>>, BackgroundStats) {
    let (tier_metadata, tier_store) = (metadata.clone(), store.store.clone());
    let tiered_through: shale_compactor::TieredThrough = Box::new(move |target| {
        let (metadata, store) = (tier_metadata.clone(), tier_store.clone());
        Box::pin(async move {
            let (basin, stream, created) = (&target.basin, &target.stream, target.record.created_at_ms);
            shale_tables::tiered_through(metadata.as_ref(), store.as_ref(), basin, stream, created)
                .await
                .map_err(|e| shale_compactor::CompactorError::TableTier(e.to_string()))
        })
    });
    let compactor =
        Compactor::new(config.compactor.clone(), metadata.clone(), store.store.clone(), Arc::new(SystemClock))
            .with_tiered_through(tiered_through);
    let mut stats = BackgroundStats { compaction: compactor.stats(), tiering: Arc::default() };
    if !config.compactor.enabled {
        return (Vec::new(), stats);
    }
    let compaction = tokio::spawn(run_compactor(Arc::new(compactor), std::future::pending()));
    // The table tier runs with compaction, each shard tiering the basins it owns. It reads
    // each block once, so its reader keeps the smallest block cache, not the clients'.
    let cache_floor = shale_reader::MIN_BLOCK_CACHE_BYTES.min(config.reader.block_cache_bytes);
    let tiering_config = shale_reader::ReaderConfig { block_cache_bytes: cache_floor, ..config.reader.clone() };
    let reader = Arc::new(Reader::new(&tiering_config, store.store.clone(), metadata.clone()));
    let (shard, shards) = (config.compactor.shard, config.compactor.shards);
    let owns = Box::new(move |basin: &str| shale_tables::shard_owns(basin, shard, shards));
    let location = shale_tables::StoreLocation::of_url(&store.url);
    let tierer =
        shale_tables::Tierer::new(metadata, reader, store.store.clone(), location, Arc::new(SystemClock), owns)
            .with_maintenance(config.tables.maintenance());
    stats.tiering = tierer.stats();
    let tiering = tokio::spawn(shale_tables::run_tiering(Arc::new(tierer), config.tables.clone()));
    (vec![compaction, tiering], stats)
}

/// `shale compactor`: compaction alone, against remote metadata, with `/health`, `/ready`
/// and `/metrics` on HTTP. Several split the streams between them by `[compactor] shard`
/// and `shards`.
pub async fn serve_compactor(config: ServeConfig, metadata_addrs: Vec<String>) -> anyhow::Result<Running> {
    let http_listener = bind(config.http).await?;
    let lock = lock_store(&config.store_url()?, Holder::Role("compactor"), false).await?;
    let store = open_store(&config).await?;
    let metadata = remote_metadata(&config, &store, &metadata_addrs, "compactor", http_listener.local_addr()?)?;
    let mut config = config;
    config.compactor.enabled = true;
    let (task, stats) = start_compactor(&config, metadata.clone(), &store);
    let http_addr = http_listener.local_addr()?;
    let counters = store.counters.clone();
    let metrics = move || {
        let mut out = String::new();
        stats.render(&mut out);
        counters.render(&mut out);
        out
    };
    let auth = Arc::new(Authenticator::new(
        config.auth.root_token(),
        config.auth.revocation_bound,
        metadata.clone(),
        Arc::new(SystemClock),
    ));
    let router = shale_api::ops_router("compactor", || Ok(()), metrics, auth);
    let (stop_http, http) = spawn_http(http_listener, router, &config, config.tls.acceptor()?)?;
    tracing::info!(role = "compactor", http = %http_addr, shard = config.compactor.shard,
        shards = config.compactor.shards, store = %store.url, metadata = ?metadata_addrs, version = env!("CARGO_PKG_VERSION"), config = %config.source, "shale serving");
    Ok(Running {
        http_addr,
        // A compactor serves no gRPC; its one listener is the HTTP one.
        grpc_addr: http_addr,
        kafka_addr: None,
        metadata: None,
        gateway: None,
        stop: vec![stop_http],
        servers: vec![http],
        background: task.into_iter().collect(),
        lock,
        draining: None,
    })
}

/// The store as a process's own gateway and reader see it: the segments the gateway
/// wrote last answer the reader's range reads of them from memory
/// (`[reader] recent_write_bytes`), on a local directory only reads too short to be
/// mapped (longer ones read the page cache's bytes, mapped).
fn with_recent_writes(config: &ServeConfig, store: &Store) -> Store {
    let bytes = config.reader.recent_write_bytes;
    let store_for_roles: Arc<dyn ObjectStore> = if bytes == 0 {
        store.store.clone()
    } else {
        let recent = RecentWrites::new(store.store.clone(), Arc::new(SystemClock), bytes);
        let recent = if config.reads_local_files() { recent.answering_below(MAPPED_READ_MIN) } else { recent };
        Arc::new(recent)
    };
    Store { url: store.url.clone(), store: store_for_roles, counters: store.counters.clone() }
}

/// The reader clients read through: reads that start below a stream's trim point go to
/// the table tier first (where the basin serves reads from it).
fn client_reader(config: &ServeConfig, store: &Store, metadata: Arc<dyn MetadataApi>) -> Reader {
    let history = shale_tables::TableHistory::new(metadata.clone(), store.store.clone());
    Reader::new(&config.reader, store.store.clone(), metadata).with_history(Arc::new(history))
}

/// `shale gateway` or `shale reader`: one client-facing role against remote metadata.
pub async fn serve_role(config: ServeConfig, role: Role, metadata_addrs: Vec<String>) -> anyhow::Result<Running> {
    let mut config = config;
    if role == Role::Agent && config.kafka.listen.is_none() {
        config.kafka.listen = Some(SocketAddr::from(([127, 0, 0, 1], DEFAULT_KAFKA_PORT)));
    }
    let kafka_listener = match config.kafka.listen {
        Some(listen) if role == Role::Agent => {
            check_kafka(&config)?;
            Some(bind(listen).await?)
        }
        Some(_) => {
            anyhow::bail!("Kafka's protocol needs a gateway and a reader: run it on `shale agent` or `shale serve`")
        }
        None => None,
    };
    let listeners = ClientListeners::bind(&config).await?;
    let lock = lock_store(&config.store_url()?, Holder::Role(role.name()), false).await?;
    let store = open_store(&config).await?;
    let metadata = remote_metadata(&config, &store, &metadata_addrs, role.name(), listeners.http.local_addr()?)?;
    let (gateway, reader) = match role {
        Role::Gateway => {
            let gateway =
                Gateway::start(config.gateway.clone(), store.store.clone(), metadata.clone(), Arc::new(SystemClock))?;
            (Some(Arc::new(gateway)), None)
        }
        Role::Reader => (None, Some(Arc::new(client_reader(&config, &store, metadata.clone())))),
        Role::Agent => {
            let writes = with_recent_writes(&config, &store);
            let gateway =
                Gateway::start(config.gateway.clone(), writes.store.clone(), metadata.clone(), Arc::new(SystemClock))?;
            (Some(Arc::new(gateway)), Some(Arc::new(client_reader(&config, &writes, metadata.clone()))))
        }
        Role::AllInOne => anyhow::bail!("use `serve` for all roles in one process"),
    };
    let kafka_metrics = Arc::new(shale_kafka::KafkaMetrics::default());
    let kafka_shown = kafka_metrics.clone();
    let background: Option<MetricsHook> =
        kafka_listener.is_some().then(|| Arc::new(move |out: &mut String| kafka_shown.render(out)) as MetricsHook);
    let state = AppState::new(
        role,
        metadata,
        gateway.clone(),
        reader,
        store.counters.clone(),
        background,
        Arc::new(SystemClock),
    )
    .with_auth(config.auth.root_token(), config.auth.revocation_bound)
    .with_table_store(store.store.clone(), store.url.clone());
    let mut running = client_api(&config, state.clone(), listeners)?;
    running.lock = lock;
    if gateway.is_some() {
        apply_init_file(&config, &state.service()).await?;
    }
    running.serve_kafka(&config, kafka_listener, state.service(), shale_kafka::Cluster::Agents, kafka_metrics).await?;
    let block_cache_bytes = matches!(role, Role::Reader | Role::Agent).then_some(config.reader.block_cache_bytes);
    let kafka = running.kafka_shown();
    tracing::info!(role = role.name(), http = %running.http_addr, grpc = %running.grpc_addr, %kafka, store = %store.url,
        metadata = ?metadata_addrs, block_cache_bytes, version = env!("CARGO_PKG_VERSION"), config = %config.source,
        "shale serving");
    Ok(running)
}

/// `shale metadata`: the sequencer and index, serving `shale.metadata.v1` on the gRPC
/// address while it holds the leader lease, plus `/health`, `/ready`, `/metrics` on HTTP.
pub async fn serve_metadata(config: ServeConfig, advertise: Option<String>) -> anyhow::Result<Running> {
    let grpc_listener = bind(config.grpc).await?;
    let http_listener = bind(config.http).await?;
    let lock = lock_store(&config.store_url()?, Holder::Role("metadata"), false).await?;
    let store = open_store(&config).await?;
    let metadata = open_metadata(&config, &store).await?;
    let grpc_addr = grpc_listener.local_addr()?;
    let http_addr = http_listener.local_addr()?;
    let advertise = advertise.unwrap_or_else(|| grpc_addr.to_string());
    let lease = hold_leadership(metadata.clone(), store.store.clone(), advertise.clone(), config.cluster);
    let service =
        MetadataService::new(metadata.clone(), Some(lease.clone())).into_server(config.auth.cluster_token.as_ref());
    if config.auth.cluster_token.is_none() {
        tracing::warn!("no cluster token (SHALE_CLUSTER_TOKEN, [auth] cluster_token_file or a root token): metadata accepts calls from anyone");
    }
    let (limits, tls) = (config.connections, config.tls.acceptor()?);
    let http_tls = tls.clone();

    let (stop_grpc, grpc_stopped) = oneshot::channel::<()>();
    let grpc = tokio::spawn(async move {
        let stopped = async {
            let _ = grpc_stopped.await;
        };
        let result = shale_api::grpc_server(limits)
            .add_service(service)
            .serve_with_incoming_shutdown(shale_api::capped_incoming(grpc_listener, limits, tls), stopped)
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "metadata grpc server failed");
        }
    });
    let ready = {
        let (lease, metadata) = (lease.clone(), metadata.clone());
        move || {
            if metadata.is_halted() {
                Err("stopped: fenced, or a durable write failed; exiting".to_string())
            } else if lease.is_held() {
                Ok(())
            } else {
                Err("not the leader (no lease held)".to_string())
            }
        }
    };
    let leased: Arc<dyn MetadataApi> = Arc::new(LeasedMetadata::new(metadata.clone(), Some(lease.clone())));
    let (compactor, compaction) = start_compactor(&config, leased.clone(), &store);
    let metrics = {
        let (lease, gc, counters) = (lease.clone(), metadata.gc_stats(), store.counters.clone());
        let commits = metadata.commit_stats();
        let agents = metadata.clone();
        move || {
            let mut out = format!(
                "# HELP shale_metadata_leader 1 while this instance holds the leader lease\n\
                 # TYPE shale_metadata_leader gauge\nshale_metadata_leader {}\n",
                u8::from(lease.is_held())
            );
            gc.render(&mut out);
            agents.render_members(&mut out);
            compaction.render(&mut out);
            commits.render(&mut out);
            counters.render(&mut out);
            out
        }
    };
    let auth = Arc::new(Authenticator::new(
        config.auth.root_token(),
        config.auth.revocation_bound,
        leased.clone(),
        Arc::new(SystemClock),
    ));
    let router = shale_api::ops_router("metadata", ready, metrics, auth);
    let (stop_http, http) = spawn_http(http_listener, router, &config, http_tls)?;
    let gc = tokio::spawn(run_collection(metadata.clone(), store.store.clone()));
    let timeouts = tokio::spawn(run_transaction_timeouts(metadata.clone()));
    tracing::info!(role = "metadata", grpc = %grpc_addr, http = %http_addr, %advertise, instance = lease.instance(),
        store = %store.url, version = env!("CARGO_PKG_VERSION"), config = %config.source, "shale serving");
    Ok(Running {
        http_addr,
        grpc_addr,
        kafka_addr: None,
        metadata: Some(metadata),
        gateway: None,
        stop: vec![stop_http, stop_grpc],
        servers: vec![http, grpc],
        background: [gc, timeouts].into_iter().chain(compactor).collect(),
        lock,
        draining: None,
    })
}

/// Applies the init file, if any, through `service`: a bad file stops the start with the
/// line at fault; while metadata is not answering yet (a leader lease being taken), it is
/// applied again, for up to 30 s.
async fn apply_init_file(config: &ServeConfig, service: &shale_api::Service) -> anyhow::Result<()> {
    let Some(path) = &config.init_file else { return Ok(()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the init file {}", path.display()))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match shale_api::apply_init_file(service, &text).await {
            Ok(report) => {
                tracing::info!(file = %path.display(), created = report.created, reconfigured = report.reconfigured,
                    unchanged = report.unchanged, "init file applied");
                return Ok(());
            }
            Err(e) if e.is_transient() && tokio::time::Instant::now() < deadline => {
                tracing::info!(error = %e, "init file: metadata not answering yet, trying again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => anyhow::bail!("init file {}: {e}", path.display()),
        }
    }
}
