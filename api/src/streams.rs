//! `/v1/streams`: list, create, ensure, get config, reconfigure, delete. The basin comes
//! from the `s2-basin` header.

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use shale_metadata::{MetadataError, StreamConfig, StreamPatch};

use crate::query::Query;
use crate::wire::{basin_header, config_body, request_token, rfc3339};
use crate::{ApiError, AppState};

fn stream_info(name: &str, created_at_ms: u64) -> serde_json::Value {
    json!({ "name": name, "created_at": rfc3339(created_at_ms), "deleted_at": null })
}

/// Rejects settings S2 rejects.
pub fn validate_config(config: &StreamConfig) -> Result<(), ApiError> {
    config.validate().map_err(ApiError::BadRequest)
}

pub async fn list(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let basin = basin_header(&headers)?;
    let query = Query::parse(raw.as_deref(), &["prefix", "start_after", "limit"])?;
    state.catalog()?.basin(&basin).await?;
    let page = state
        .metadata
        .list_streams(
            &basin,
            query.string("prefix").unwrap_or(""),
            query.string("start_after").unwrap_or(""),
            query.limit()?,
        )
        .await?;
    let streams: Vec<_> = page.items.iter().map(|s| stream_info(&s.name, s.created_at_ms)).collect();
    Ok(Json(json!({ "streams": streams, "has_more": page.has_more })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateStreamRequest {
    stream: String,
    #[serde(default)]
    config: Option<StreamConfig>,
}

pub async fn create(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    let basin = basin_header(&headers)?;
    let request: CreateStreamRequest = config_body(&body)?;
    shale_proto::names::validate_stream(&request.stream).map_err(ApiError::BadRequest)?;
    let config = request.config.unwrap_or_default();
    validate_config(&config)?;
    let token = request_token(&headers)?;
    let (info, created) = state.catalog()?.create_stream_idempotent(&basin, &request.stream, config, token).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(stream_info(&info.name, info.record.created_at_ms))).into_response())
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EnsureStreamRequest {
    #[serde(default)]
    config: Option<StreamConfig>,
}

pub async fn ensure(state: &AppState, basin: &str, stream: &str, body: &Bytes) -> Result<Response, ApiError> {
    let request: Option<EnsureStreamRequest> = config_body(body)?;
    let config = request.unwrap_or_default().config.unwrap_or_default();
    validate_config(&config)?;
    match state.catalog()?.create_stream(basin, stream, config).await {
        Ok(info) => Ok((StatusCode::CREATED, Json(stream_info(&info.name, info.record.created_at_ms))).into_response()),
        Err(MetadataError::StreamExists { .. }) => {
            let info = state.catalog()?.stream(basin, stream).await?;
            Ok((StatusCode::OK, Json(stream_info(&info.name, info.record.created_at_ms))).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn get_config(state: &AppState, basin: &str, stream: &str) -> Result<Response, ApiError> {
    let info = state.catalog()?.stream(basin, stream).await?;
    Ok(Json(info.record.config).into_response())
}

pub async fn reconfigure(state: &AppState, basin: &str, stream: &str, body: &Bytes) -> Result<Response, ApiError> {
    // S2's `StreamReconfiguration`: merged into the current config at metadata.
    let patch: StreamPatch = config_body::<Option<_>>(body)?.unwrap_or_default();
    let info = state.catalog()?.reconfigure_stream(basin, stream, patch).await?;
    Ok(Json(info.record.config).into_response())
}

pub async fn delete(state: &AppState, basin: &str, stream: &str) -> Result<Response, ApiError> {
    state.catalog()?.delete_stream(basin, stream).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}
