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
use axum::Router;
use shale_gateway::Gateway;
use shale_metadata::Metadata;
use shale_reader::Reader;
use shale_storage::StoreCounters;

pub use error::ApiError;
pub use grpc::serve_grpc;

/// Everything the handlers need: one of each role, in process.
#[derive(Clone)]
pub struct AppState {
    pub metadata: Arc<Metadata>,
    pub gateway: Arc<Gateway>,
    pub reader: Arc<Reader>,
    pub store_counters: Arc<StoreCounters>,
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

/// Serves the API on `listener` until `shutdown` resolves, then stops accepting and
/// lets in-flight requests finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Small frames (acks, session messages) must not wait for Nagle's algorithm.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown).await
}
