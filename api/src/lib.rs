//! Shale's client-facing APIs: the S2 v1 REST data plane in JSON (plus `/health`,
//! `/ready` and `/metrics`) and the `shale.v1` gRPC API.
//!
//! Handlers only translate between the wire and the domain: they parse, call the
//! gateway, reader or metadata, and render. Modules:
//! - `error`: [`ApiError`], the single place errors become HTTP statuses and bodies;
//! - `wire`: S2's JSON shapes and the `s2-format` (raw or base64) byte encoding;
//! - `query`: strict query-string parsing with S2-style errors;
//! - `basins`, `streams`, `records` (append, read, check tail), `sse` (live reads),
//!   `s2s` (S2's protobuf bodies and `s2s/proto` sessions),
//!   `ops` (health, readiness, metrics);
//! - `follow`: a read that follows the tail, framed by `sse`, `s2s` and the gRPC read
//!   session; `append_pipeline`: pipelined appends, shared by gRPC and S2S append sessions;
//! - `grpc`: the public gRPC API `shale.v1` (with reflection) over the same calls.

mod append_pipeline;
mod basins;
mod error;
mod follow;
mod grpc;
mod ops;
mod query;
mod records;
mod s2s;
mod sse;
mod streams;
mod wire;

use std::sync::Arc;

use axum::routing::{any, get};
use axum::serve::ListenerExt;
use shale_gateway::Gateway;
use shale_metadata::{GcStats, MetadataApi};
use shale_reader::Reader;
use shale_storage::StoreCounters;

pub use axum::Router;
pub use error::ApiError;
pub use grpc::{incoming as nodelay_incoming, serve_grpc};
pub use ops::ops_router;

/// Which calls this process serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `shale serve`: everything.
    AllInOne,
    /// `shale gateway`: appends and basin/stream management.
    Gateway,
    /// `shale reader`: reads, check-tail and live reads.
    Reader,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::AllInOne => "all-in-one",
            Role::Gateway => "gateway",
            Role::Reader => "reader",
        }
    }
}

/// Everything the handlers need: the metadata (in process or remote) and the roles this
/// process runs.
#[derive(Clone)]
pub struct AppState {
    pub role: Role,
    /// Used directly only where every role needs it (readiness, create-on-read).
    pub metadata: Arc<dyn MetadataApi>,
    pub gateway: Option<Arc<Gateway>>,
    pub reader: Option<Arc<Reader>>,
    pub store_counters: Arc<StoreCounters>,
    /// Orphan collection totals, where this process runs it.
    pub gc_stats: Option<Arc<GcStats>>,
}

impl AppState {
    /// The gateway, or the error that says to send appends to one.
    pub fn gateway(&self) -> Result<Arc<Gateway>, ApiError> {
        self.gateway.clone().ok_or(ApiError::WrongRole { role: self.role.name(), call: "appends", use_role: "gateway" })
    }

    /// The reader, or the error that says to send reads to one.
    pub fn reader(&self) -> Result<Arc<Reader>, ApiError> {
        self.reader.clone().ok_or(ApiError::WrongRole {
            role: self.role.name(),
            call: "reads, check-tail and live reads",
            use_role: "reader",
        })
    }

    /// Metadata for basin and stream management, which gateways serve.
    pub fn catalog(&self) -> Result<&dyn MetadataApi, ApiError> {
        match self.role {
            Role::Reader => Err(ApiError::WrongRole {
                role: self.role.name(),
                call: "basin and stream management",
                use_role: "gateway",
            }),
            Role::AllInOne | Role::Gateway => Ok(self.metadata.as_ref()),
        }
    }
}

/// The full HTTP API.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/basins", get(basins::list).post(basins::create))
        .route(
            "/v1/basins/{basin}",
            get(basins::get_config).put(basins::ensure).patch(basins::reconfigure).delete(basins::delete),
        )
        .route("/v1/streams", get(streams::list).post(streams::create))
        .route("/v1/streams/{*stream}", any(records::dispatch))
        .route("/health", get(ops::health))
        .route("/ready", get(ops::ready))
        .route("/metrics", get(ops::metrics))
        .fallback(ops::not_found)
        .with_state(state)
}

/// Serves `router` (the API from [`router`], or [`ops_router`]) on `listener` until
/// `shutdown` resolves, then stops accepting and lets in-flight requests finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Small frames (acks, session messages) must not wait for Nagle's algorithm.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}
