//! `/v1/basins`: list, create, ensure, get config, reconfigure, delete.

use axum::body::Bytes;
use axum::extract::{Path, RawQuery};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use shale_metadata_contract::BasinRecord;

use super::config::{BasinConfigJson, BasinPatchJson};
use super::query::Query;
use super::wire::{config_body, request_token, rfc3339, PROVISION_RESULT};
use crate::{ApiError, Caller};
use shale_service::Provisioned;

fn basin_info(record: &BasinRecord) -> serde_json::Value {
    json!({
        "name": record.name,
        "created_at": rfc3339(record.created_at_ms),
        "deleted_at": null,
        // S2's current field, and `scope`, which it replaced, for clients that predate it.
        "location": null,
        "scope": null,
        "state": "active",
    })
}

/// A create's or PUT's answer: its status (201 created, 200 found) and S2's
/// `s2-provision-result` header saying what it did.
fn provisioned(record: &BasinRecord, status: StatusCode, provisioned: Provisioned) -> Response {
    (status, [(PROVISION_RESULT, provisioned.as_str())], Json(basin_info(record))).into_response()
}

pub async fn list(Caller(service): Caller, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["prefix", "start_after", "limit"])?.list_query()?;
    let page = service.list_basins(&query).await?;
    let basins: Vec<_> = page.items.iter().map(basin_info).collect();
    Ok(Json(json!({ "basins": basins, "has_more": page.has_more })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBasinRequest {
    basin: String,
    #[serde(default)]
    config: Option<BasinConfigJson>,
    /// S2's placement hints; Shale has one location and ignores them.
    #[serde(default, alias = "location")]
    #[allow(dead_code)]
    scope: Option<String>,
}

pub async fn create(Caller(service): Caller, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    let request: CreateBasinRequest = config_body(&body)?;
    let token = request_token(&headers)?;
    let config = request.config.unwrap_or_default().into_config()?;
    let (record, is_new) = service.create_basin(&request.basin, config, token).await?;
    // A retried create answers as the create it repeats did, 201, as s2-lite does.
    let outcome = if is_new { Provisioned::Created } else { Provisioned::Unchanged };
    Ok(provisioned(&record, StatusCode::CREATED, outcome))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct EnsureBasinRequest {
    #[serde(default)]
    config: Option<BasinConfigJson>,
    #[serde(default, alias = "location")]
    #[allow(dead_code)]
    scope: Option<String>,
}

pub async fn ensure(Caller(service): Caller, Path(basin): Path<String>, body: Bytes) -> Result<Response, ApiError> {
    let request: Option<EnsureBasinRequest> = config_body(&body)?;
    let config = request.unwrap_or_default().config.unwrap_or_default().into_config()?;
    let (record, outcome) = service.put_basin(&basin, config).await?;
    let status = if outcome == Provisioned::Created { StatusCode::CREATED } else { StatusCode::OK };
    Ok(provisioned(&record, status, outcome))
}

pub async fn get_config(Caller(service): Caller, Path(basin): Path<String>) -> Result<Response, ApiError> {
    let config = service.basin_config(&basin).await?;
    Ok(Json(BasinConfigJson::from_config(&config)).into_response())
}

/// `GET /v1/basins/{basin}/tables` (a Shale extension): the table tier's status.
pub async fn table_status(Caller(service): Caller, Path(basin): Path<String>) -> Result<Response, ApiError> {
    let status = service.table_status(&basin).await?;
    let streams: Vec<serde_json::Value> = status
        .streams
        .iter()
        .map(|s| {
            json!({ "stream": s.stream, "tiered_seq": s.tiered_seq, "tail": s.tail,
                    "lag_records": s.tail.saturating_sub(s.tiered_seq) })
        })
        .collect();
    let body = json!({
        "location": status.location,
        "after_secs": status.after_secs,
        "passes": status.passes,
        "rows": status.rows,
        "files": status.files,
        "streams": streams,
        "metadata_location": status.metadata_location,
    });
    Ok(Json(body).into_response())
}

pub async fn reconfigure(
    Caller(service): Caller,
    Path(basin): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    // S2's `BasinReconfiguration`: merged into the current config at metadata.
    let patch = config_body::<Option<BasinPatchJson>>(&body)?.unwrap_or_default().into_patch()?;
    let config = service.reconfigure_basin(&basin, patch).await?;
    Ok(Json(BasinConfigJson::from_config(&config)).into_response())
}

pub async fn delete(Caller(service): Caller, Path(basin): Path<String>) -> Result<Response, ApiError> {
    service.delete_basin(&basin).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}
