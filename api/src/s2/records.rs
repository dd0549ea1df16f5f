//! `/v1/streams/{stream}[/records[/tail]]`: stream config calls, append, read, check tail.
//!
//! Stream names may contain `/`, so the path is split on the raw (still percent-encoded)
//! URI: the first segment is the stream, the rest picks the endpoint.

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use shale_gateway::AppendInput;

use super::consumers;
use super::query::{percent_decode, Query};
use super::read_params::read_params;
use super::wire::{basin_header, json_body, AppendAckJson, AppendInputJson, Format, PositionJson};
use super::{append_input, s2s, sse, streams};
use crate::{ApiError, Caller, Http};
use shale_service::producer_stamp;
use shale_service::Service;
use shale_service::ServiceError;

/// Largest request body read whole: S2's largest append (1 MiB metered) as JSON with
/// every byte escaped (`\u0000` is 6 bytes) fits, with room to spare.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// Reads a unary body whole, within [`MAX_BODY_BYTES`] and the process's budget of bytes
/// being buffered and parsed at once: a body over the limit is refused before it is
/// read (413), and one that does not fit the budget now is refused at once (429), so
/// large or malicious bodies cannot grow memory without bound.
async fn read_body(http: &Http, headers: &HeaderMap, body: axum::body::Body) -> Result<(Bytes, BodyPermit), ApiError> {
    let declared = headers.get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    if let Some(len) = declared.filter(|len| *len > MAX_BODY_BYTES) {
        return Err(too_large(len));
    }
    // A body of unknown length may use the whole limit.
    let reserve = declared.unwrap_or(MAX_BODY_BYTES).max(1);
    let permit = http.body_budget.clone().try_acquire_many_owned(reserve as u32).map_err(|_| {
        ApiError::from(ServiceError::Overloaded("too many request bodies being read at once; retry shortly".into()))
    })?;
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES).await.map_err(|e| {
        if declared.is_none() {
            too_large(MAX_BODY_BYTES + 1)
        } else {
            ApiError::bad(format!("reading request body: {e}"))
        }
    })?;
    Ok((bytes, permit))
}

/// Held while a body is parsed and handled.
type BodyPermit = tokio::sync::OwnedSemaphorePermit;

fn too_large(len: usize) -> ApiError {
    ApiError::Rejected {
        status: 413,
        message: format!("request body of {len} bytes exceeds the limit of {MAX_BODY_BYTES} bytes"),
    }
}

/// The endpoints under `/v1/streams/{stream}`: the router's table for paths whose
/// first part (the stream) may contain `/`.
#[derive(Debug, PartialEq, Eq)]
enum StreamRoute {
    Stream,
    Records,
    Tail,
    Consumers,
    Consumer(String),
}

impl StreamRoute {
    /// The endpoint after the stream's name (`records/tail`), still percent-encoded.
    fn parse(endpoint: &str) -> Result<Option<Self>, ApiError> {
        Ok(Some(match endpoint {
            "" => StreamRoute::Stream,
            "records" => StreamRoute::Records,
            "records/tail" => StreamRoute::Tail,
            "consumers" => StreamRoute::Consumers,
            _ => match endpoint.strip_prefix("consumers/") {
                Some(name) => StreamRoute::Consumer(percent_decode(name, false)?),
                None => return Ok(None),
            },
        }))
    }

    /// The route's template, the label its requests are counted under.
    fn template(&self) -> &'static str {
        match self {
            StreamRoute::Stream => "/v1/streams/{stream}",
            StreamRoute::Records => "/v1/streams/{stream}/records",
            StreamRoute::Tail => "/v1/streams/{stream}/records/tail",
            StreamRoute::Consumers => "/v1/streams/{stream}/consumers",
            StreamRoute::Consumer(_) => "/v1/streams/{stream}/consumers/{name}",
        }
    }
}

/// Serves every path under `/v1/streams/`, and labels the answer with the route taken
/// ([`crate::layers::RouteLabel`]) for the request metrics.
pub async fn dispatch(State(http): State<Http>, Caller(service): Caller, request: Request) -> Response {
    let rest = request.uri().path().strip_prefix("/v1/streams/").unwrap_or_default();
    let endpoint = rest.split_once('/').map_or("", |(_, endpoint)| endpoint);
    let route = match StreamRoute::parse(endpoint) {
        Ok(Some(route)) => route,
        Ok(None) => return ApiError::NoRoute(format!("{} {}", request.method(), request.uri().path())).into_response(),
        Err(e) => return e.into_response(),
    };
    let label = crate::layers::RouteLabel(route.template());
    let mut response = serve_stream_route(&http, &service, route, request).await.unwrap_or_else(|e| e.into_response());
    response.extensions_mut().insert(label);
    response
}

async fn serve_stream_route(
    http: &Http,
    service: &Service,
    route: StreamRoute,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let (method, uri, headers) = (parts.method, parts.uri, parts.headers);
    let rest = uri.path().strip_prefix("/v1/streams/").unwrap_or_default();
    let raw_stream = rest.split_once('/').map_or(rest, |(stream, _)| stream);
    let stream = percent_decode(raw_stream, false)?;
    let basin = basin_header(&headers)?;
    let query = uri.query();
    let session = content_type(&headers).is_some_and(|t| t.starts_with(s2s::CONTENT_TYPE));
    match (route, method) {
        (StreamRoute::Records, Method::POST) if session => s2s::append_session(service, basin, stream, body),
        (StreamRoute::Records, Method::GET) if session => {
            let params = read_params(basin, stream, &headers, query)?;
            s2s::read_session(service, params.session()).await
        }
        (route, method) => {
            let (body, _permit) = read_body(http, &headers, body).await?;
            match (route, method) {
                (StreamRoute::Stream, Method::GET) => streams::get_config(service, &basin, &stream).await,
                (StreamRoute::Stream, Method::PUT) => streams::ensure(service, &basin, &stream, &body).await,
                (StreamRoute::Stream, Method::PATCH) => streams::reconfigure(service, &basin, &stream, &body).await,
                (StreamRoute::Stream, Method::DELETE) => streams::delete(service, &basin, &stream).await,
                (StreamRoute::Records, Method::POST) => append(service, basin, stream, &headers, &body).await,
                (StreamRoute::Records, Method::GET) => read(service, basin, stream, &headers, query).await,
                (StreamRoute::Tail, Method::GET) => {
                    Query::parse(query, &[])?;
                    let tail = service.check_tail(&basin, &stream).await?;
                    Ok(Json(json!({ "tail": PositionJson::from(tail) })).into_response())
                }
                (StreamRoute::Consumers, Method::GET) => consumers::list(service, &basin, &stream, query).await,
                (StreamRoute::Consumer(name), Method::PUT) => {
                    consumers::commit(service, &basin, &stream, &name, &body).await
                }
                (StreamRoute::Consumer(name), Method::GET) => consumers::get(service, &basin, &stream, &name).await,
                (StreamRoute::Consumer(name), Method::DELETE) => {
                    consumers::delete(service, &basin, &stream, &name).await
                }
                (_, method) => Err(ApiError::NoRoute(format!("{method} {}", uri.path()))),
            }
        }
    }
}

fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers.get("content-type").and_then(|v| v.to_str().ok())
}

fn accepts(headers: &HeaderMap, media_type: &str) -> bool {
    headers.get("accept").and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains(media_type))
}

const PROTOBUF: &str = "application/protobuf";

fn protobuf_response(message: &impl prost::Message) -> Response {
    ([("content-type", PROTOBUF)], message.encode_to_vec()).into_response()
}

async fn append(
    service: &Service,
    basin: String,
    stream: String,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let input = if content_type(headers).is_some_and(|t| t.starts_with(PROTOBUF)) {
        let message = append_input::decode(body.clone())
            .map_err(|e| ApiError::bad_proto(format!("invalid protobuf AppendInput: {e}")))?;
        s2s::append_input(&basin, &stream, message)?
    } else {
        let format = Format::from_headers(headers)?;
        let input: AppendInputJson = json_body(body)?;
        let records = input.records.into_iter().map(|r| r.into_record(format, body)).collect::<Result<Vec<_>, _>>()?;
        AppendInput {
            basin,
            stream,
            records,
            match_seq_num: input.match_seq_num,
            fencing_token: input.fencing_token,
            producer: producer_stamp(input.producer_id, input.producer_seq)?,
            ..Default::default()
        }
    };
    let ack = service.append(input).await?;
    if accepts(headers, PROTOBUF) {
        return Ok(protobuf_response(&s2s::append_ack(ack)));
    }
    Ok(Json(AppendAckJson::from(ack)).into_response())
}

async fn read(
    service: &Service,
    basin: String,
    stream: String,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Response, ApiError> {
    let params = read_params(basin, stream, headers, query)?;
    if accepts(headers, "text/event-stream") {
        return sse::read_session(service, params, headers).await;
    }
    let output = service.read(&params.request).await?;
    if accepts(headers, PROTOBUF) {
        let body = super::read_batch::to_bytes(&output.records, Some(output.tail));
        return Ok(([("content-type", PROTOBUF)], body).into_response());
    }
    let body = super::batch_json::read_batch(&output.records, Some(output.tail), params.format);
    Ok(([("content-type", "application/json")], body).into_response())
}

/// One stream's part of an atomic append (`POST /v1/records`, a Shale extension).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamAppendJson<'a> {
    stream: String,
    #[serde(borrow)]
    records: Vec<super::wire::AppendRecordJson<'a>>,
    #[serde(default)]
    match_seq_num: Option<u64>,
    #[serde(default)]
    fencing_token: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AtomicAppendJson<'a> {
    #[serde(borrow)]
    appends: Vec<StreamAppendJson<'a>>,
}

/// `POST /v1/records` (basin in `s2-basin`): appends to several streams, all or none;
/// answers one ack per stream, in the order given.
pub async fn append_atomic(
    State(http): State<Http>,
    Caller(service): Caller,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let basin = basin_header(&parts.headers)?;
    let format = Format::from_headers(&parts.headers)?;
    let (body, _permit) = read_body(&http, &parts.headers, body).await?;
    let request: AtomicAppendJson = json_body(&body)?;
    let inputs = request
        .appends
        .into_iter()
        .map(|append| {
            let records =
                append.records.into_iter().map(|r| r.into_record(format, &body)).collect::<Result<Vec<_>, _>>()?;
            Ok(AppendInput {
                basin: basin.clone(),
                stream: append.stream,
                records,
                match_seq_num: append.match_seq_num,
                fencing_token: append.fencing_token,
                producer: None,
                ..Default::default()
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let acks = service.append_atomic(inputs).await?;
    let acks: Vec<AppendAckJson> = acks.into_iter().map(AppendAckJson::from).collect();
    Ok(Json(json!({ "acks": acks })).into_response())
}
