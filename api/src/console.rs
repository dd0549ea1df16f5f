//! The web console at `/console`: one page, its scripts and its style, built into the
//! binary, plus two small JSON answers the page needs and the S2 API does not give:
//! `/console/process.json` (this process's role, version and whether it serves the
//! client API) and `/console/session` (what the caller's token may do, so the page
//! shows only the controls it may use). The page, its assets and `process.json` are
//! open like `/health` (`auth`'s open paths). Everything else the page does, it does
//! through the same HTTP API and token rules as any client.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::auth::{Access, Caller};

const PAGE: &str = include_str!("../console/index.html");
const SCRIPT: &str = include_str!("../console/console.js");
const PAGES: &str = include_str!("../console/pages.js");
const CHARTS: &str = include_str!("../console/charts.js");
const STYLE: &str = include_str!("../console/console.css");
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

/// The console's routes for a process running `role`; `client_api` says whether the
/// process serves S2's API (the page then offers basins, streams and tables).
pub fn routes<S: Clone + Send + Sync + 'static>(role: &'static str, client_api: bool) -> Router<S> {
    Router::new()
        .route("/console", get(page))
        .route("/console/", get(page))
        .route("/console/static/console.js", get(|| async { asset(JAVASCRIPT, SCRIPT) }))
        .route("/console/static/pages.js", get(|| async { asset(JAVASCRIPT, PAGES) }))
        .route("/console/static/charts.js", get(|| async { asset(JAVASCRIPT, CHARTS) }))
        .route("/console/static/console.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
        .route(
            "/console/process.json",
            get(move || async move {
                Json(json!({ "role": role, "version": env!("CARGO_PKG_VERSION"), "client_api": client_api }))
            }),
        )
        .route("/console/session", get(session))
}

async fn page() -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(CONTENT_TYPE, content_type), (CACHE_CONTROL, "no-cache")], body).into_response()
}

/// What the caller may do: `auth` (whether access control is on), the token's id, and
/// the operations its scope grants (every one for the root token or with access off).
async fn session(Caller(access): Caller) -> Json<serde_json::Value> {
    let all = || shale_service::auth::Operation::all().iter().map(|op| op.name()).collect::<Vec<_>>();
    let (auth, token, operations) = match &access {
        Access::Open => (false, None, all()),
        Access::Root => (true, Some("root".to_string()), all()),
        Access::Token(grant) => {
            (true, Some(grant.id.clone()), grant.scope.operations().into_iter().map(|op| op.name()).collect())
        }
    };
    Json(json!({ "auth": auth, "token": token, "operations": operations }))
}
