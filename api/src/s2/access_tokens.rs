//! `/v1/access-tokens`: issue, list, revoke (S2's access-token endpoints).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::query::Query;
use super::token_json::TokenInfoJson;
use super::wire::json_body;
use crate::{ApiError, Caller};

pub async fn issue(Caller(service): Caller, body: Bytes) -> Result<Response, ApiError> {
    let info: TokenInfoJson = json_body(&body)?;
    let info = info.into_info().map_err(ApiError::bad)?;
    let issued = service.issue_access_token(info).await?;
    Ok((StatusCode::CREATED, Json(json!({ "access_token": issued.secret }))).into_response())
}

pub async fn list(Caller(service): Caller, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let query = Query::parse(raw.as_deref(), &["prefix", "start_after", "limit"])?.list_query()?;
    let page = service.list_access_tokens(&query).await?;
    let tokens: Vec<TokenInfoJson> = page.items.iter().map(TokenInfoJson::from).collect();
    Ok(Json(json!({ "access_tokens": tokens, "has_more": page.has_more })).into_response())
}

pub async fn revoke(Caller(service): Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    service.revoke_access_token(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
