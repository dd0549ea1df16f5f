//! `/v1/access-tokens`: issue, list, revoke (S2's access-token endpoints).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::query::Query;
use super::wire::json_body;
use crate::auth::TokenInfo;
use crate::{ApiError, Caller};

pub async fn issue(Caller(service): Caller, body: Bytes) -> Result<Response, ApiError> {
    let info: TokenInfo = json_body(&body)?;
    let issued = service.issue_access_token(info).await?;
    Ok((StatusCode::CREATED, Json(json!({ "access_token": issued.secret }))).into_response())
}

pub async fn list(Caller(service): Caller, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["prefix", "start_after", "limit"])?.list_query()?;
    let page = service.list_access_tokens(&query).await?;
    Ok(Json(json!({ "access_tokens": page.items, "has_more": page.has_more })).into_response())
}

pub async fn revoke(Caller(service): Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    service.revoke_access_token(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
