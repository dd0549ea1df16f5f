//! `/v1/access-tokens`: issue, list, revoke (S2's access-token endpoints).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::query::Query;
use super::wire::json_body;
use crate::auth::{Access, TokenInfo};
use crate::{ApiError, Http};

pub async fn issue(State(http): State<Http>, access: Access, body: Bytes) -> Result<Response, ApiError> {
    let info: TokenInfo = json_body(&body)?;
    let issued = http.service.for_caller(access).issue_access_token(info).await?;
    Ok((StatusCode::CREATED, Json(json!({ "access_token": issued.secret }))).into_response())
}

pub async fn list(State(http): State<Http>, access: Access, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["prefix", "start_after", "limit"])?.list_query()?;
    let page = http.service.for_caller(access).list_access_tokens(&query).await?;
    Ok(Json(json!({ "access_tokens": page.items, "has_more": page.has_more })).into_response())
}

pub async fn revoke(State(http): State<Http>, access: Access, Path(id): Path<String>) -> Result<Response, ApiError> {
    http.service.for_caller(access).revoke_access_token(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
