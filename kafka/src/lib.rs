//! Kafka's wire protocol over Shale's streams: a third transport beside `shale-api`'s S2
//! REST API and `shale.v1`, calling the same [`shale_service::Service`].
//!
//! Kafka clients see the streams of one basin ([`KafkaConfig::basin`]): partition `P` of
//! topic `T` is the stream `T/P`, a Kafka offset is the stream's sequence number, and one
//! Kafka record is one Shale record (the key in a reserved header). Any process with a
//! gateway and a reader serves any partition: metadata orders every commit, so the
//! "leader" a Metadata answer names is only where to send requests.
//!
//! - `config`: [`KafkaConfig`], the `[kafka]` settings;
//! - `frame`: length-prefixed frames off a socket, bounded in size;
//! - `connection`: one client connection: decode a request, dispatch, answer in order;
//! - `in_flight`: which of a connection's requests overlap (produce) and which run alone;
//! - `versions`: the APIs and versions served, for ApiVersions and for refusing the rest;
//! - `topics`: topics as sets of streams, their creation, deletion and configs;
//! - `records`: Kafka records to Shale records and back (record batch v2);
//! - `decompress`: produced batches decompressed within a bound;
//! - `topic_cache`: the topic settings produce reads, kept for a few seconds;
//! - `brokers`: who is in the cluster (this process alone, or the agents registered with
//!   metadata), which broker leads each partition and coordinates each group;
//! - `produce`, `fetch`, `offsets` (ListOffsets, DeleteRecords), `cluster` (Metadata,
//!   DescribeCluster, FindCoordinator), `producers` (InitProducerId), `transactions`
//!   (transactional producers: staged batches made visible or dropped at once), `groups`
//!   (consumer groups: membership in memory, committed offsets as tracked consumers),
//!   `shares` (share groups: records handed to one member at a time under locks);
//! - `fetch_budget`: a fetch's byte bound, shared by the partitions it reads at once, and
//!   the bytes a listener's connections read ahead;
//! - `fetch_session`: what a connection keeps between fetches: read cursors and its
//!   incremental fetch session (KIP-227);
//! - `broker_configs`: what DescribeConfigs shows of a broker (read-only);
//! - `config_entries`: DescribeConfigs' entries of topics and brokers, with synonyms,
//!   types and documentation;
//! - `elections`: ElectLeaders (every partition already has its one replica as leader);
//! - `log_dirs`: DescribeLogDirs (partition sizes, in one log directory per broker);
//! - `active_producers`: DescribeProducers (each partition's producers, from the
//!   producer state metadata keeps);
//! - `acls`: Kafka's ACL calls, answered SECURITY_DISABLED as a broker without an
//!   authorizer answers them (access is by access tokens);
//! - `authorized`: the operations a caller may use on a topic, group or the cluster, as
//!   describe calls answer them when asked;
//! - `patterns`: regular expressions matched against whole names, as Kafka matches them;
//! - `sasl`: logging in over access tokens (PLAIN, SCRAM-SHA-256/512) when access
//!   control is on;
//! - `error`: [`KafkaError`], and the one mapping of service errors to Kafka codes.

mod acls;
mod active_producers;
mod authorized;
mod broker_configs;
mod brokers;
mod cluster;
mod config;
mod config_entries;
mod connection;
mod decompress;
mod elections;
mod error;
mod fetch;
mod fetch_budget;
mod fetch_frame;
mod fetch_session;
mod frame;
mod groups;
mod in_flight;
mod log_dirs;
mod metrics;
mod offsets;
mod patterns;
mod produce;
mod producers;
mod records;
mod sasl;
mod shares;
mod topic_cache;
mod topics;
mod transactions;
mod versions;

use std::sync::Arc;

use shale_service::Service;
use tokio::net::TcpListener;
/// What the Kafka listener takes to serve TLS (the `[tls]` certificate and key).
pub use tokio_rustls::TlsAcceptor;

pub use config::KafkaConfig;
pub use error::KafkaError;
pub use metrics::KafkaMetrics;
/// Entry points for the fuzz targets: each parser of client bytes.
pub mod fuzz {
    pub use crate::frame::decode_request;

    /// What a produced batch may hold, as produce allows.
    const LIMITS: &shale_gateway::BatchLimits = &crate::produce::KAFKA_BATCH_LIMITS;

    /// A partition's produced bytes through [`crate::records::decode_produced`]: whether
    /// they decoded.
    pub fn decode_produced(data: &[u8]) -> bool {
        crate::records::decode_produced(bytes::Bytes::copy_from_slice(data), LIMITS).is_ok()
    }

    /// The same with the batch's CRC made right first (where the bytes reach past it),
    /// so that arbitrary records behind the header are decoded, not refused at the CRC.
    pub fn decode_produced_sealed(data: &[u8]) -> bool {
        use crate::records::batch::{ATTRIBUTES, CRC};
        let mut sealed = data.to_vec();
        if sealed.len() > ATTRIBUTES {
            let crc = crc32c::crc32c(&sealed[ATTRIBUTES..]);
            sealed[CRC..ATTRIBUTES].copy_from_slice(&crc.to_be_bytes());
        }
        crate::records::decode_produced(sealed.into(), LIMITS).is_ok()
    }
}

/// What every connection of one listener shares; each connection holds a copy whose
/// `service` acts for its caller ([`Kafka::for_caller`]).
#[derive(Clone)]
pub(crate) struct Kafka {
    /// The service as this connection's caller.
    pub service: Service,
    /// The service as the listener itself: finds topics (filtered by what the caller
    /// may see).
    pub discovery: Service,
    pub config: KafkaConfig,
    /// The brokers of this cluster, this process among them.
    pub brokers: Arc<brokers::Brokers>,
    /// Names this cluster in Metadata and DescribeCluster: the basin's.
    pub cluster_id: String,
    pub groups: Arc<groups::Coordinator>,
    pub shares: Arc<shares::Shares>,
    pub producer_ids: Arc<producers::ProducerIds>,
    pub topic_configs: Arc<topic_cache::TopicCache>,
    /// Whether callers must log in (SASL) first: access control is on.
    pub sasl: bool,
    /// Bytes every connection's fetches read ahead, together.
    pub read_ahead: Arc<fetch_budget::AheadBudget>,
    pub metrics: Arc<KafkaMetrics>,
}

impl Kafka {
    /// The same listener, acting for `access`.
    pub fn for_caller(&self, access: shale_service::auth::Access) -> Kafka {
        Kafka { service: self.discovery.for_caller(access), ..self.clone() }
    }
}

/// Whether this listener is one broker alone or one agent of a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cluster {
    /// `shale serve`: broker 0, leader of every partition, coordinator of every group.
    Alone,
    /// `shale agent`: registered with metadata, which lists the live agents; partitions
    /// and groups are spread over them.
    Agents,
}

/// Serves Kafka's protocol on `listener` until `shutdown` resolves: creates the basin
/// Kafka clients see when it is missing, joins the cluster when it is one, then accepts
/// connections, counting them and their requests in `metrics`.
pub async fn serve(
    listener: TcpListener,
    service: Service,
    config: KafkaConfig,
    cluster: Cluster,
    tls: Option<TlsAcceptor>,
    metrics: Arc<KafkaMetrics>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), KafkaError> {
    config.validate()?;
    let local = listener.local_addr()?;
    service.ensure_basin(&config.basin, Default::default()).await?;
    let (host, port) = config.advertised_address(local)?;
    let clock = service.clock().clone();
    let (stop_membership, membership_stopped) = tokio::sync::oneshot::channel::<()>();
    let stopped = async {
        let _ = membership_stopped.await;
    };
    let (brokers, membership) = brokers::join(cluster, &config, (host, port), &service, stopped).await;
    let kafka = Arc::new(Kafka {
        groups: Arc::new(groups::Coordinator::new(clock.clone())),
        shares: Arc::new(shares::Shares::new(clock.clone(), &config)),
        producer_ids: Arc::new(producers::ProducerIds::new(clock, brokers.me().id)),
        topic_configs: Arc::new(topic_cache::TopicCache::new()),
        cluster_id: format!("shale-{}", config.basin),
        brokers,
        sasl: service.authenticator().is_on(),
        read_ahead: Arc::default(),
        metrics,
        discovery: service.clone(),
        service,
        config,
    });
    kafka.metrics.watch(kafka.groups.clone(), kafka.shares.clone());
    tracing::info!(listen = %local, basin = %kafka.config.basin, node_id = kafka.brokers.me().id, ?cluster, "kafka listener started");
    let mut shutdown = std::pin::pin!(shutdown);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let (kafka, tls) = (kafka.clone(), tls.clone());
                    let open = kafka.metrics.opened();
                    connections.spawn(async move {
                        let _counted_until_closed = open;
                        if let Err(e) = socket.set_nodelay(true) {
                            kafka.metrics.failed();
                            tracing::info!(%peer, error = %e, "kafka connection closed");
                            return;
                        }
                        match tls {
                            None => connection::run(kafka, socket, peer).await,
                            Some(tls) => match tls.accept(socket).await {
                                Ok(socket) => connection::run(kafka, socket, peer).await,
                                Err(e) => {
                                    kafka.metrics.failed();
                                    tracing::info!(%peer, error = %e, "kafka tls handshake failed");
                                }
                            },
                        }
                    });
                }
                Err(e) => tracing::warn!(error = %e, "kafka accept failed"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
    let _ = stop_membership.send(());
    if let Some(membership) = membership {
        let _ = membership.await;
    }
    Ok(())
}
