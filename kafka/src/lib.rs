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
//! - `produce`, `fetch`, `offsets` (ListOffsets, DeleteRecords), `cluster` (Metadata,
//!   DescribeCluster, FindCoordinator), `producers` (InitProducerId), `groups`
//!   (consumer groups: membership in memory, committed offsets as tracked consumers);
//! - `error`: [`KafkaError`], and the one mapping of service errors to Kafka codes.

mod cluster;
mod config;
mod connection;
mod decompress;
mod error;
mod fetch;
mod fetch_frame;
mod frame;
mod groups;
mod in_flight;
mod offsets;
mod produce;
mod producers;
mod records;
mod topic_cache;
mod topics;
mod versions;

use std::sync::Arc;

use shale_service::Service;
use tokio::net::TcpListener;

pub use config::KafkaConfig;
pub use error::KafkaError;
/// Entry points for the fuzz targets: each parser of client bytes.
pub mod fuzz {
    pub use crate::frame::decode_request;
    pub use crate::records::decode_produced;
}

/// What every connection of one listener shares.
pub(crate) struct Kafka {
    pub service: Service,
    pub config: KafkaConfig,
    /// This process as a Kafka broker: id, and the address clients are told to use.
    pub node: cluster::Node,
    pub groups: groups::Coordinator,
    pub producer_ids: producers::ProducerIds,
    pub topic_configs: topic_cache::TopicCache,
}

/// Serves Kafka's protocol on `listener` until `shutdown` resolves: creates the basin
/// Kafka clients see when it is missing, then accepts connections.
pub async fn serve(
    listener: TcpListener,
    service: Service,
    config: KafkaConfig,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), KafkaError> {
    config.validate()?;
    let local = listener.local_addr()?;
    service.ensure_basin(&config.basin, Default::default()).await?;
    let node = cluster::Node::new(&config, local)?;
    let kafka = Arc::new(Kafka {
        groups: groups::Coordinator::new(service.clock().clone()),
        producer_ids: producers::ProducerIds::new(service.clock().clone()),
        topic_configs: topic_cache::TopicCache::new(),
        service,
        config,
        node,
    });
    tracing::info!(listen = %local, basin = %kafka.config.basin, "kafka listener started");
    let mut shutdown = std::pin::pin!(shutdown);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let kafka = kafka.clone();
                    connections.spawn(async move { connection::run(kafka, socket, peer).await });
                }
                Err(e) => tracing::warn!(error = %e, "kafka accept failed"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
    Ok(())
}
