//! `/v1/streams` and `/v1/streams/{stream}`: list, create, ensure, get config,
//! reconfigure, delete. The basin comes from the `s2-basin` header.

use axum::body::Bytes;
use axum::extract::RawQuery;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::config::{StreamConfigJson, StreamPatchJson};
use super::query::Query;
use super::wire::{basin_header, config_body, request_token, rfc3339, PROVISION_RESULT};
use crate::{ApiError, Caller};
use shale_service::{Provisioned, Service};

/// S2's `StreamInfo` (no cipher: Shale does not encrypt).
fn stream_json(name: &str, created_at_ms: u64) -> serde_json::Value {
    json!({ "name": name, "created_at": rfc3339(created_at_ms), "deleted_at": null, "cipher": null })
}

/// A create's or PUT's answer: its status (201 created, 200 found) and S2's
/// `s2-provision-result` header saying what it did.
fn stream_info(name: &str, created_at_ms: u64, status: StatusCode, provisioned: Provisioned) -> Response {
    (status, [(PROVISION_RESULT, provisioned.as_str())], Json(stream_json(name, created_at_ms))).into_response()
}

pub async fn list(Caller(service): Caller, headers: HeaderMap, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let basin = basin_header(&headers)?;
    let query = Query::parse(raw.as_deref(), &["prefix", "start_after", "limit"])?.list_query()?;
    let page = service.list_streams(&basin, &query).await?;
    let streams: Vec<_> = page.items.iter().map(|s| stream_json(&s.name, s.created_at_ms)).collect();
    Ok(Json(json!({ "streams": streams, "has_more": page.has_more })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateStreamRequest {
    stream: String,
    #[serde(default)]
    config: Option<StreamConfigJson>,
}

pub async fn create(Caller(service): Caller, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    let basin = basin_header(&headers)?;
    let request: CreateStreamRequest = config_body(&body)?;
    let token = request_token(&headers)?;
    let config = request.config.unwrap_or_default().into_config();
    let (info, created) = service.create_stream(&basin, &request.stream, config, token).await?;
    // A retried create answers as the create it repeats did, 201, as s2-lite does.
    let provisioned = if created { Provisioned::Created } else { Provisioned::Unchanged };
    Ok(stream_info(&info.name, info.record.created_at_ms, StatusCode::CREATED, provisioned))
}

/// S2's PUT: the body is the stream's whole config (or nothing: the defaults).
pub async fn ensure(service: &Service, basin: &str, stream: &str, body: &Bytes) -> Result<Response, ApiError> {
    let config = config_body::<Option<StreamConfigJson>>(body)?.unwrap_or_default().into_config();
    let (info, provisioned) = service.put_stream(basin, stream, config).await?;
    let status = if provisioned == Provisioned::Created { StatusCode::CREATED } else { StatusCode::OK };
    Ok(stream_info(&info.name, info.record.created_at_ms, status, provisioned))
}

pub async fn get_config(service: &Service, basin: &str, stream: &str) -> Result<Response, ApiError> {
    let config = service.stream_config(basin, stream).await?;
    Ok(Json(StreamConfigJson::effective(&config)).into_response())
}

pub async fn reconfigure(service: &Service, basin: &str, stream: &str, body: &Bytes) -> Result<Response, ApiError> {
    // S2's `StreamReconfiguration`: merged into the current config at metadata.
    let patch = config_body::<Option<StreamPatchJson>>(body)?.unwrap_or_default().into_patch();
    let config = service.reconfigure_stream(basin, stream, patch).await?;
    Ok(Json(StreamConfigJson::effective(&config)).into_response())
}

pub async fn delete(service: &Service, basin: &str, stream: &str) -> Result<Response, ApiError> {
    service.delete_stream(basin, stream).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}
