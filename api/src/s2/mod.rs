//! S2's v1 REST API: JSON, protobuf bodies, SSE and `s2s/proto` sessions, translated to
//! and from the service's calls. Nothing here decides an S2 rule; it parses, calls
//! [`shale_service::Service`], and renders.
//!
//! - `basins`, `streams`, `access_tokens`, `records` (append, read, check tail), `consumers`
//!   (tracked consumers, a Shale extension), `metrics` (a stream's storage; S2's other
//!   metrics and locations answer `not_implemented`): the endpoints;
//! - `sse`: reads as server-sent events; `s2s`: S2's session framing and protobuf
//!   messages; `append_input`: S2's `AppendInput` decoded straight into records;
//!   `read_batch`: S2's `ReadBatch` encoded straight from records; `batch_json`: the same
//!   as JSON text; `wire`: S2's JSON shapes and `s2-format`; `query`: strict query strings.

mod access_tokens;
mod append_input;
mod basins;
mod batch_json;
pub(crate) mod config;
mod consumers;
pub mod fuzz;
mod metrics;
mod query;
mod read_batch;
mod read_params;
mod records;
mod s2s;
mod sse;
mod streams;
pub(crate) mod token_json;
mod wire;

use axum::routing::{any, get};
use axum::Router;

use crate::{ops, Http};

pub use records::MAX_BODY_BYTES;

/// S2's endpoints, plus `/health`, `/ready`, `/metrics`, the console and a JSON 404.
pub fn router(http: Http) -> Router {
    Router::new()
        .route("/v1/basins", get(basins::list).post(basins::create))
        .route(
            "/v1/basins/{basin}",
            get(basins::get_config).put(basins::ensure).patch(basins::reconfigure).delete(basins::delete),
        )
        .route("/v1/basins/{basin}/tables", get(basins::table_status))
        .route("/v1/streams", get(streams::list).post(streams::create))
        .route("/v1/records", axum::routing::post(records::append_atomic))
        .route("/v1/access-tokens", get(access_tokens::list).post(access_tokens::issue))
        .route("/v1/access-tokens/{id}", axum::routing::delete(access_tokens::revoke))
        .route("/v1/streams/{*stream}", any(records::dispatch))
        .route("/v1/metrics", get(metrics::account))
        .route("/v1/metrics/{basin}", get(metrics::basin))
        .route("/v1/metrics/{basin}/{*stream}", get(metrics::stream))
        .route("/v1/locations", get(metrics::locations))
        .route("/v1/locations/default", get(metrics::locations).put(metrics::locations))
        .route("/health", get(ops::health))
        .route("/ready", get(ops::ready))
        .route("/metrics", get(ops::metrics))
        .merge(crate::console::routes(http.state.role.name(), true))
        .fallback(ops::not_found)
        .with_state(http)
}
