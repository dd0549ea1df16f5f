//! `/health`, `/ready`, `/metrics` and the JSON 404 for unknown paths.

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::{ApiError, Http};
use shale_service::ServiceError;

pub async fn health() -> &'static str {
    "ok"
}

/// How long `/ready` waits for metadata to answer.
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Ready while metadata can serve: not fenced, not stopped, and (for remote metadata)
/// answering within [`READY_TIMEOUT`].
pub async fn ready(State(http): State<Http>) -> Response {
    match tokio::time::timeout(READY_TIMEOUT, http.service.metadata().list_basins("", "", 1)).await {
        Ok(Ok(_)) => "ready".into_response(),
        Ok(Err(e)) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, format!("metadata did not answer within {READY_TIMEOUT:?}"))
            .into_response(),
    }
}

/// Prometheus text; with access control on, the caller needs `account-metrics`.
pub async fn metrics(State(http): State<Http>, crate::auth::Caller(access): crate::auth::Caller) -> Response {
    if let Err(e) = access.allow_metrics() {
        return ApiError::from(e).into_response();
    }
    let state = &http.state;
    let mut out = String::new();
    crate::render_process_metrics(state.role.name(), &mut out);
    state.requests.render(&mut out);
    state.auth.render(&mut out);
    if let Some(gateway) = &state.gateway {
        gateway.metrics().render(&mut out);
    }
    if let Some(reader) = &state.reader {
        reader.cache_stats().render(&mut out);
        if let Err(e) = http.service.render_consumer_lag(reader.consumer_lag_top(), &mut out).await {
            tracing::warn!(error = %e, "consumer lag left out of /metrics");
        }
    }
    if let Some(render) = &state.background_metrics {
        render(&mut out);
    }
    state.store_counters.render(&mut out);
    ([("content-type", "text/plain; version=0.0.4")], out).into_response()
}

/// `/health`, `/ready` and `/metrics` alone, for a process without the client API (the
/// metadata and compactor roles, named by `role`): `ready` says whether it serves,
/// `metrics` renders Prometheus text (after the process metrics).
/// With access control on in `auth`, `/metrics` needs a token with `account-metrics`.
/// Every other path answers `wrong_role`, naming the roles that serve clients.
pub fn ops_router<R, M>(
    role: &'static str,
    ready: R,
    metrics: M,
    auth: std::sync::Arc<crate::auth::Authenticator>,
) -> axum::Router
where
    R: Fn() -> Result<(), String> + Clone + Send + Sync + 'static,
    M: Fn() -> String + Clone + Send + Sync + 'static,
{
    use axum::routing::get;
    axum::Router::new()
        .route("/health", get(health))
        .route(
            "/ready",
            get(move || async move {
                match ready() {
                    Ok(()) => "ready".into_response(),
                    Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason).into_response(),
                }
            }),
        )
        .route(
            "/metrics",
            get(move |crate::auth::Caller(access): crate::auth::Caller| async move {
                if let Err(e) = access.allow_metrics() {
                    return ApiError::from(e).into_response();
                }
                let mut out = String::new();
                crate::render_process_metrics(role, &mut out);
                out += &metrics();
                ([("content-type", "text/plain; version=0.0.4")], out).into_response()
            }),
        )
        .merge(crate::console::routes(role, false))
        .fallback(|| async {
            ApiError::from(ServiceError::WrongRole {
                role: "metadata",
                call: "the client API",
                use_role: "gateway (appends, management) or reader (reads)",
            })
        })
        .layer(crate::auth::authenticate_http(auth))
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::NoRoute(uri.path().to_string())
}
