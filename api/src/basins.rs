//! `/v1/basins`: list, create, ensure, get config, reconfigure, delete.

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use shale_metadata::{BasinConfig, BasinPatch, BasinRecord, MetadataError};
use shale_proto::names;

use crate::query::Query;
use crate::wire::{config_body, request_token, rfc3339};
use crate::{ApiError, AppState};

fn basin_info(record: &BasinRecord) -> serde_json::Value {
    json!({ "name": record.name, "created_at": rfc3339(record.created_at_ms), "deleted_at": null, "scope": null, "state": "active" })
}

fn valid_name(name: &str) -> Result<(), ApiError> {
    names::validate_basin(name).map_err(ApiError::BadRequest)
}

pub async fn list(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["prefix", "start_after", "limit"])?;
    let page = state
        .metadata
        .list_basins(query.string("prefix").unwrap_or(""), query.string("start_after").unwrap_or(""), query.limit()?)
        .await?;
    let basins: Vec<_> = page.items.iter().map(basin_info).collect();
    Ok(Json(json!({ "basins": basins, "has_more": page.has_more })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBasinRequest {
    basin: String,
    #[serde(default)]
    config: Option<BasinConfig>,
    /// S2's placement hints; Shale has one location and ignores them.
    #[serde(default, alias = "location")]
    #[allow(dead_code)]
    scope: Option<String>,
}

pub async fn create(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    let request: CreateBasinRequest = config_body(&body)?;
    valid_name(&request.basin)?;
    let token = request_token(&headers)?;
    let (record, created) =
        state.catalog()?.create_basin_idempotent(&request.basin, request.config.unwrap_or_default(), token).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(basin_info(&record))).into_response())
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EnsureBasinRequest {
    #[serde(default)]
    config: Option<BasinConfig>,
    #[serde(default, alias = "location")]
    #[allow(dead_code)]
    scope: Option<String>,
}

pub async fn ensure(
    State(state): State<AppState>,
    Path(basin): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    valid_name(&basin)?;
    let request: Option<EnsureBasinRequest> = config_body(&body)?;
    let config = request.unwrap_or_default().config.unwrap_or_default();
    match state.catalog()?.create_basin(&basin, config).await {
        Ok(record) => Ok((StatusCode::CREATED, Json(basin_info(&record))).into_response()),
        Err(MetadataError::BasinExists(_)) => {
            let record = state.catalog()?.basin(&basin).await?;
            Ok((StatusCode::OK, Json(basin_info(&record))).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn get_config(State(state): State<AppState>, Path(basin): Path<String>) -> Result<Response, ApiError> {
    valid_name(&basin)?;
    let record = state.catalog()?.basin(&basin).await?;
    Ok(Json(record.config).into_response())
}

pub async fn reconfigure(
    State(state): State<AppState>,
    Path(basin): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    valid_name(&basin)?;
    // S2's `BasinReconfiguration`: merged into the current config at metadata.
    let patch: BasinPatch = config_body::<Option<_>>(&body)?.unwrap_or_default();
    let record = state.catalog()?.reconfigure_basin(&basin, patch).await?;
    Ok(Json(record.config).into_response())
}

pub async fn delete(State(state): State<AppState>, Path(basin): Path<String>) -> Result<Response, ApiError> {
    valid_name(&basin)?;
    state.catalog()?.delete_basin(&basin).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}
