//! Shale's client-facing APIs: S2's v1 REST API and the `shale.v1` gRPC API, both over
//! the transport-neutral service of `shale-service`.
//!
//! A request passes: a transport (axum or tonic) -> `layers` (request id, tracing span,
//! metrics, timeout) -> a handler in `s2` or `grpc`, which only translates its wire
//! format -> [`Service`], which owns every S2 rule and calls the gateway, the reader or
//! metadata -> back out through [`ApiError`], the one place errors become HTTP statuses
//! with S2's JSON body or gRPC statuses.
//!
//! - `s2`: S2's REST API (JSON, protobuf, SSE, S2S);
//! - `grpc`: `shale.v1` with reflection;
//! - `layers`: the tower layers both transports share; `listener`: HTTP serving with
//!   connection limits; `coalesce`: a connection's writes gathered into larger sends;
//! - `ops`: `/health`, `/ready`, `/metrics`; `console`: the web console at `/console`;
//! - `tls`: TLS on the listeners;
//! - `auth`: the tower layer that authenticates each request (the access model itself
//!   is the service's);
//! - `error`: [`ApiError`].

pub mod auth;
mod capped;
mod coalesce;
mod console;
mod cors;
mod error;
mod grpc;
mod http_layers;
mod init;
mod layers;
mod listener;
mod ops;
mod process;
mod s2;
mod tls;

use std::sync::Arc;

use shale_gateway::Gateway;
use shale_metadata_contract::MetadataApi;
use shale_reader::Reader;
use shale_storage::{Clock, StoreCounters};
use tower_http::request_id::{PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

pub use axum::Router;
pub use cors::{with_cors, CorsConfig};
pub use error::ApiError;
pub use grpc::serve_grpc;
pub use http_layers::REQUEST_TIMEOUT;
pub use init::{apply_init_file, InitError, InitReport};
pub use listener::{capped_incoming, grpc_server, serve, ConnectionLimits};
pub use ops::ops_router;
pub use process::render_process_metrics;
/// Entry points for the fuzz targets in `fuzz/`: each parser of client bytes.
pub use s2::fuzz;
pub use shale_service::{ConsumerView, Draining, ListQuery, Role, Service, ServiceError};
pub use tls::acceptor as tls_acceptor;
pub use tokio_rustls::TlsAcceptor;

/// Appends Prometheus text for `/metrics`.
pub type MetricsHook = Arc<dyn Fn(&mut String) + Send + Sync>;

/// What a process serving the client API is made of: the metadata (in process or
/// remote), the roles it runs, and what `/metrics` reports.
#[derive(Clone)]
pub struct AppState {
    pub role: Role,
    pub metadata: Arc<dyn MetadataApi>,
    pub gateway: Option<Arc<Gateway>>,
    pub reader: Option<Arc<Reader>>,
    pub store_counters: Arc<StoreCounters>,
    /// What this process's background jobs (garbage collection, compaction) report on
    /// `/metrics`, where it runs them.
    pub background_metrics: Option<MetricsHook>,
    pub clock: Arc<dyn Clock>,
    /// Who may call; off unless [`Self::with_auth`] configures a root token.
    pub auth: Arc<auth::Authenticator>,
    /// Requests served over both transports.
    requests: Arc<layers::RequestMetrics>,
    /// Set when the process begins to stop: live reads end at once.
    pub draining: Draining,
    /// Where basins' tables are, for their status.
    pub table_store: Option<shale_service::TableStore>,
}

impl AppState {
    pub fn new(
        role: Role,
        metadata: Arc<dyn MetadataApi>,
        gateway: Option<Arc<Gateway>>,
        reader: Option<Arc<Reader>>,
        store_counters: Arc<StoreCounters>,
        background_metrics: Option<MetricsHook>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let requests = Arc::new(layers::RequestMetrics::new(role.name()));
        let auth =
            Arc::new(auth::Authenticator::new(None, auth::DEFAULT_REVOCATION_BOUND, metadata.clone(), clock.clone()));
        let draining = Draining::default();
        Self {
            role,
            metadata,
            gateway,
            reader,
            store_counters,
            background_metrics,
            clock,
            auth,
            requests,
            draining,
            table_store: None,
        }
    }

    /// Access control on, with this root token (see [`auth::Authenticator::new`]).
    pub fn with_auth(mut self, root_token: Option<&str>, revocation_bound: std::time::Duration) -> Self {
        let (metadata, clock) = (self.metadata.clone(), self.clock.clone());
        self.auth = Arc::new(auth::Authenticator::new(root_token, revocation_bound, metadata, clock));
        self
    }

    /// The table tier's status read from `store` (at `url`).
    pub fn with_table_store(mut self, store: Arc<dyn shale_storage::object_store::ObjectStore>, url: String) -> Self {
        self.table_store = Some(shale_service::TableStore { store, url });
        self
    }

    /// The service both APIs call.
    pub fn service(&self) -> Service {
        Service::new(
            self.role,
            self.metadata.clone(),
            self.gateway.clone(),
            self.reader.clone(),
            self.clock.clone(),
            self.auth.clone(),
            self.draining.clone(),
        )
        .with_table_store(self.table_store.clone())
    }

    pub(crate) fn request_ids(&self) -> layers::RequestIds {
        layers::RequestIds::new(format!("{}-{:x}", self.role.name(), self.clock.now_ms()))
    }
}

/// What the HTTP handlers share, behind one `Arc`: axum clones the state for every
/// request, and this is one reference count instead of a dozen.
#[derive(Clone)]
pub(crate) struct Http(Arc<HttpParts>);

/// The service, and the parts `/metrics` and `/ready` read.
pub(crate) struct HttpParts {
    pub service: Service,
    pub state: AppState,
    /// Bytes of request bodies being buffered and parsed at once (see `s2::records`).
    pub body_budget: Arc<tokio::sync::Semaphore>,
}

impl std::ops::Deref for Http {
    type Target = HttpParts;

    fn deref(&self) -> &HttpParts {
        &self.0
    }
}

/// The service acting for the request's caller (the [`auth::Access`] the auth layer
/// found): what an HTTP handler calls.
pub(crate) struct Caller(pub Service);

impl axum::extract::FromRequestParts<Http> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, http: &Http) -> Result<Self, ApiError> {
        Ok(Caller(http.service.for_caller(auth::access_of(&parts.extensions)?)))
    }
}

/// Request-body bytes a process buffers and parses at once: eight bodies of the largest
/// size. Parsing JSON can take several times a body's size in memory, so this is what
/// bounds the memory request bodies can take.
const BODY_BUDGET_BYTES: usize = 8 * s2::MAX_BODY_BYTES;

/// The full HTTP API (S2's REST API and the ops endpoints) with the shared layers.
pub fn router(state: AppState) -> Router {
    let ids = state.request_ids();
    let requests = state.requests.clone();
    let role = state.role.name();
    let body_budget = Arc::new(tokio::sync::Semaphore::new(BODY_BUDGET_BYTES));
    let auth = auth::authenticate_http(state.auth.clone());
    let http = Http(Arc::new(HttpParts { service: state.service(), state, body_budget }));
    s2::router(http)
        .layer(axum::middleware::from_fn_with_state(REQUEST_TIMEOUT, http_layers::time_limit))
        .layer(auth)
        .layer(axum::middleware::from_fn(http_layers::header_limits))
        .layer(axum::middleware::from_fn(http_layers::json_errors))
        .layer(axum::middleware::from_fn(http_layers::close_after_unread_body))
        .layer(axum::middleware::from_fn(http_layers::grpc_on_http_port))
        .layer(layers::CountRequests::http(requests))
        .layer(
            TraceLayer::new_for_http().make_span_with(layers::request_span(role)).on_response(layers::request_logged()),
        )
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(ids))
}
