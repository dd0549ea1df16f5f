//! Tracked consumers, a Shale extension on S2's stream paths (basin in `s2-basin`):
//! `PUT` and `GET /v1/streams/{stream}/consumers/{name}`, and
//! `GET /v1/streams/{stream}/consumers` to list them.

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::query::Query;
use super::wire::json_body;
use crate::ApiError;
use shale_service::{ConsumerView, Service};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitConsumerJson {
    seq_num: u64,
    /// Commit only if the stored position (0 when none) equals this.
    #[serde(default)]
    match_seq_num: Option<u64>,
}

fn view_json(view: &ConsumerView) -> Value {
    json!({
        "name": view.position.name,
        "seq_num": view.position.seq_num,
        "updated_at_ms": view.position.updated_ms,
        "lag": {
            "records": view.lag.records,
            "bytes": view.lag.bytes,
            "seconds": view.lag.seconds,
        },
    })
}

pub async fn commit(
    service: &Service,
    basin: &str,
    stream: &str,
    name: &str,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let request: CommitConsumerJson = json_body(body)?;
    let view =
        service.commit_consumer(basin, stream, name, request.seq_num, request.match_seq_num, String::new()).await?;
    Ok(Json(view_json(&view)).into_response())
}

pub async fn get(service: &Service, basin: &str, stream: &str, name: &str) -> Result<Response, ApiError> {
    Ok(Json(view_json(&service.consumer(basin, stream, name).await?)).into_response())
}

/// Removes the consumer: 204, also when there was none.
pub async fn delete(service: &Service, basin: &str, stream: &str, name: &str) -> Result<Response, ApiError> {
    service.delete_consumer(basin, stream, name).await?;
    Ok(axum::http::StatusCode::NO_CONTENT.into_response())
}

pub async fn list(service: &Service, basin: &str, stream: &str, query: Option<&str>) -> Result<Response, ApiError> {
    let query = Query::parse(query, &["start_after", "limit"])?.list_query()?;
    let page = service.list_consumers(basin, stream, &query).await?;
    let consumers: Vec<Value> = page.items.iter().map(view_json).collect();
    Ok(Json(json!({ "consumers": consumers, "has_more": page.has_more })).into_response())
}
