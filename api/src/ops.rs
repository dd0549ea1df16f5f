//! `/health`, `/ready`, `/metrics` and the JSON 404 for unknown paths.

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::{ApiError, AppState};

pub async fn health() -> &'static str {
    "ok"
}

/// Ready while the metadata instance can serve: not fenced, not stopped.
pub async fn ready(State(state): State<AppState>) -> Response {
    match state.metadata.list_basins("", "", 1).await {
        Ok(_) => "ready".into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    }
}

pub async fn metrics(State(state): State<AppState>) -> Response {
    let mut out = String::new();
    state.gateway.metrics().render(&mut out);
    state.reader.cache_stats().render(&mut out);
    let store = &state.store_counters;
    let counters = [
        ("shale_object_puts_total", "Object store PUT requests", &store.puts),
        ("shale_object_put_bytes_total", "Bytes sent in object store PUTs", &store.put_bytes),
        ("shale_object_gets_total", "Object store GET requests (range GETs included)", &store.gets),
        ("shale_object_get_bytes_total", "Bytes received from object store GETs", &store.get_bytes),
        ("shale_object_deletes_total", "Object store delete requests", &store.deletes),
        ("shale_object_lists_total", "Object store list requests", &store.lists),
    ];
    shale_storage::render_counters(&counters, &mut out);
    ([("content-type", "text/plain; version=0.0.4")], out).into_response()
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::NoRoute(uri.path().to_string())
}
