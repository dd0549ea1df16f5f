//! `/v1/streams/{stream}[/records[/tail]]`: stream config calls, append, read, check tail.
//!
//! Stream names may contain `/`, so the path is split on the raw (still percent-encoded)
//! URI: the first segment is the stream, the rest picks the endpoint.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use shale_gateway::AppendInput;
use shale_metadata::MetadataError;
use shale_reader::{ReadCursor, ReadLimits, ReadRequest, ReadStart, ReaderError};

use crate::query::{percent_decode, Query};
use crate::streams;
use crate::wire::{basin_header, json_body, AppendInputJson, Format, ReadBatchJson};
use crate::{s2s, sse, ApiError, AppState};
use prost::Message;

/// Longest `wait` S2 allows on a unary read, in seconds.
const MAX_WAIT_SECS: u64 = 60;

/// Largest request body read whole (a 1 MiB batch as base64 JSON, with room to spare).
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

pub async fn dispatch(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let (method, uri, headers) = (parts.method, parts.uri, parts.headers);
    let rest = uri.path().strip_prefix("/v1/streams/").unwrap_or_default();
    let (raw_stream, endpoint) = rest.split_once('/').unwrap_or((rest, ""));
    let stream = percent_decode(raw_stream, false)?;
    shale_proto::names::validate_stream(&stream).map_err(ApiError::BadRequest)?;
    let basin = basin_header(&headers)?;
    let query = uri.query();
    let session = content_type(&headers).is_some_and(|t| t.starts_with(s2s::CONTENT_TYPE));
    // Wrong-role calls fail first, before any lookup can answer "not found".
    match (endpoint, &method) {
        ("records", &Method::POST) => drop(state.gateway()?),
        ("records", _) | ("records/tail", _) => drop(state.reader()?),
        ("", _) => drop(state.catalog()?),
        _ => {}
    }
    match (endpoint, method) {
        ("records", Method::POST) if session => Ok(s2s::append_session(state.gateway()?, basin, stream, body)),
        ("records", Method::GET) if session => {
            let params = read_params(basin, stream, &headers, query)?;
            let cursor = ensure_readable(&state, &params.request).await?;
            s2s::read_session(state, params.request, params.session_wait, cursor).await
        }
        (endpoint, method) => {
            let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
                .await
                .map_err(|e| ApiError::bad(format!("reading request body: {e}")))?;
            match (endpoint, method) {
                ("", Method::GET) => streams::get_config(&state, &basin, &stream).await,
                ("", Method::PUT) => streams::ensure(&state, &basin, &stream, &body).await,
                ("", Method::PATCH) => streams::reconfigure(&state, &basin, &stream, &body).await,
                ("", Method::DELETE) => streams::delete(&state, &basin, &stream).await,
                ("records", Method::POST) => append(&state, basin, stream, &headers, &body).await,
                ("records", Method::GET) => read(&state, basin, stream, &headers, query).await,
                ("records/tail", Method::GET) => {
                    Query::parse(query, &[])?;
                    let tail = state.reader()?.check_tail(&basin, &stream).await?;
                    Ok(Json(json!({ "tail": tail })).into_response())
                }
                (_, method) => Err(ApiError::NoRoute(format!("{method} {}", uri.path()))),
            }
        }
    }
}

fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers.get("content-type").and_then(|v| v.to_str().ok())
}

fn accepts_protobuf(headers: &HeaderMap) -> bool {
    headers.get("accept").and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains(PROTOBUF))
}

const PROTOBUF: &str = "application/protobuf";

fn protobuf_response(message: &impl prost::Message) -> Response {
    ([("content-type", PROTOBUF)], message.encode_to_vec()).into_response()
}

async fn append(
    state: &AppState,
    basin: String,
    stream: String,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let input = if content_type(headers).is_some_and(|t| t.starts_with(PROTOBUF)) {
        let message = shale_proto::s2::AppendInput::decode(body.clone())
            .map_err(|e| ApiError::bad(format!("invalid protobuf AppendInput: {e}")))?;
        s2s::append_input(&basin, &stream, message)
    } else {
        let format = Format::from_headers(headers)?;
        let input: AppendInputJson = json_body(body)?;
        let records = input.records.into_iter().map(|r| r.into_record(format)).collect::<Result<Vec<_>, _>>()?;
        AppendInput { basin, stream, records, match_seq_num: input.match_seq_num, fencing_token: input.fencing_token }
    };
    let ack = state.gateway()?.append(input).await?;
    if accepts_protobuf(headers) {
        return Ok(protobuf_response(&s2s::append_ack(ack)));
    }
    Ok(Json(ack).into_response())
}

/// A read's parameters, shared by unary reads and SSE.
pub struct ReadParams {
    pub request: ReadRequest,
    pub format: Format,
    /// `wait` as given: on a session (SSE or S2S) it bounds how long to follow once
    /// caught up; absent, the session follows forever.
    pub session_wait: Option<Duration>,
}

pub fn read_params(
    basin: String,
    stream: String,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<ReadParams, ApiError> {
    let query =
        Query::parse(query, &["seq_num", "timestamp", "tail_offset", "count", "bytes", "until", "clamp", "wait"])?;
    let starts = [
        query.number::<u64>("seq_num")?.map(ReadStart::SeqNum),
        query.number::<u64>("timestamp")?.map(ReadStart::Timestamp),
        query.number::<u64>("tail_offset")?.map(ReadStart::TailOffset),
    ];
    let mut given = starts.into_iter().flatten();
    // S2 reads from the tail when no start is given.
    let start = given.next().unwrap_or(ReadStart::TailOffset(0));
    if given.next().is_some() {
        return Err(ApiError::bad("give at most one of seq_num, timestamp and tail_offset"));
    }
    let session_wait = query.number::<u64>("wait")?.map(Duration::from_secs);
    let request = ReadRequest {
        basin,
        stream,
        start,
        limits: ReadLimits { count: query.number("count")?, bytes: query.number("bytes")? },
        until: query.number("until")?,
        clamp: query.boolean("clamp")?.unwrap_or(false),
        wait: session_wait.unwrap_or_default(),
    };
    validate_read(&request)?;
    Ok(ReadParams { request, format: Format::from_headers(headers)?, session_wait })
}

/// S2's read limits, for every transport.
pub fn validate_read(request: &ReadRequest) -> Result<(), ApiError> {
    if request.wait > Duration::from_secs(MAX_WAIT_SECS) {
        return Err(ApiError::bad(format!("wait must be at most {MAX_WAIT_SECS} seconds")));
    }
    if request.limits.count.is_some_and(|c| c > 1000) {
        return Err(ApiError::bad("count must be at most 1000"));
    }
    if request.limits.bytes.is_some_and(|b| b > 1024 * 1024) {
        return Err(ApiError::bad("bytes must be at most 1048576"));
    }
    Ok(())
}

async fn read(
    state: &AppState,
    basin: String,
    stream: String,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Response, ApiError> {
    let params = read_params(basin, stream, headers, query)?;
    let mut cursor = ensure_readable(state, &params.request).await?;
    let wants_sse =
        headers.get("accept").and_then(|v| v.to_str().ok()).is_some_and(|accept| accept.contains("text/event-stream"));
    if wants_sse {
        return sse::read_session(state.clone(), params, headers, cursor).await;
    }
    let output = state.reader()?.read_with(&params.request, &mut cursor).await?;
    if accepts_protobuf(headers) {
        return Ok(protobuf_response(&s2s::read_batch(&output.records, Some(output.tail))));
    }
    Ok(Json(ReadBatchJson::new(&output.records, Some(output.tail), params.format)).into_response())
}

/// Checks that this process serves reads and opens a read cursor on the stream (its one
/// metadata lookup), creating the stream first when it is missing and the basin creates
/// streams on read.
pub async fn ensure_readable(state: &AppState, request: &ReadRequest) -> Result<ReadCursor, ApiError> {
    let reader = state.reader()?;
    match reader.open(&request.basin, &request.stream).await {
        Ok(cursor) => Ok(cursor),
        Err(ReaderError::Metadata(MetadataError::StreamNotFound { .. })) => {
            let basin = state.metadata.basin(&request.basin).await?;
            if !basin.config.create_stream_on_read {
                return Err(ReaderError::Metadata(MetadataError::StreamNotFound {
                    basin: request.basin.clone(),
                    stream: request.stream.clone(),
                })
                .into());
            }
            match state.metadata.create_stream(&request.basin, &request.stream, Default::default()).await {
                Ok(_) | Err(MetadataError::StreamExists { .. }) => Ok(ReadCursor::default()),
                Err(e) => Err(e.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}
