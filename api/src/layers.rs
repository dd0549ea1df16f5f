//! What every request passes through, on both transports, as tower layers: a request id
//! (`x-request-id`, taken from the client or made here, echoed on the answer), a
//! tracing span per request with its id, method and path, request counts and latency
//! for `/metrics`, and (HTTP) a timeout that answers S2's JSON error instead of hanging.
//! Later concerns (authentication) join here, once for both transports.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{HeaderValue, Request, Response};
use axum::response::IntoResponse;
use shale_storage::{render_counters, Histogram};
use tower::Layer;
use tower_http::request_id::{MakeRequestId, RequestId};

use crate::ApiError;
use shale_service::ServiceError;

/// Longest a unary HTTP call may take before it is answered `request_timeout`: above
/// S2's longest `wait` (60 s) plus a metadata failover (30 s). Sessions answer their
/// headers at once, so it never cuts a session short.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Request ids: a per-process prefix and a counter.
#[derive(Clone)]
pub struct RequestIds {
    prefix: Arc<str>,
    next: Arc<AtomicU64>,
}

impl RequestIds {
    /// `prefix` tells processes apart (the role and its start time).
    pub fn new(prefix: String) -> Self {
        Self { prefix: prefix.into(), next: Arc::default() }
    }
}

impl MakeRequestId for RequestIds {
    fn make_request_id<B>(&mut self, _request: &Request<B>) -> Option<RequestId> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        HeaderValue::from_str(&format!("{}-{n}", self.prefix)).ok().map(RequestId::new)
    }
}

/// The span each request runs in: its id, method, path and (S2's `s2-basin` header)
/// basin. The trace layer logs one line per request in it at info, with the status and
/// the time to the answer's headers.
pub fn request_span<B>(request: &Request<B>) -> tracing::Span {
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
    let (id, basin) = (header("x-request-id"), header("s2-basin"));
    tracing::info_span!("request", id, method = %request.method(), path = %request.uri().path(), basin)
}

/// The per-request line: status and latency, at info.
pub fn request_logged() -> tower_http::trace::DefaultOnResponse {
    tower_http::trace::DefaultOnResponse::new()
        .level(tracing::Level::INFO)
        .latency_unit(tower_http::LatencyUnit::Micros)
}

/// Requests served, by outcome, and their latency to the answer's headers: in total,
/// and per route, method and status (`shale_api_requests_total`,
/// `shale_api_request_duration_seconds`, labeled with the process's role).
#[derive(Debug, Default)]
pub struct RequestMetrics {
    role: &'static str,
    ok: AtomicU64,
    client_errors: AtomicU64,
    server_errors: AtomicU64,
    latency: Histogram,
    routes: std::sync::Mutex<Routes>,
}

/// Per-route counts and latencies. Routes are templates (`/v1/streams/{stream}`) or
/// the gRPC methods this server implements, so their number is bounded.
#[derive(Debug, Default)]
struct Routes {
    counts: std::collections::BTreeMap<(&'static str, &'static str, StatusLabel), u64>,
    latency: std::collections::BTreeMap<(&'static str, &'static str), Histogram>,
}

/// The `status` label: an HTTP status, or a gRPC code's name. Kept unformatted, so
/// counting a request allocates nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum StatusLabel {
    Http(u16),
    Grpc(&'static str),
}

impl std::fmt::Display for StatusLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatusLabel::Http(status) => write!(f, "{status}"),
            StatusLabel::Grpc(name) => f.write_str(name),
        }
    }
}

/// One answered request, as the metrics see it.
struct Answered {
    route: &'static str,
    method: &'static str,
    status: u16,
    grpc_code: Option<i32>,
    elapsed: Duration,
}

impl RequestMetrics {
    pub fn new(role: &'static str) -> Self {
        Self { role, ..Self::default() }
    }

    fn record(&self, answered: Answered) {
        let Answered { route, method, status, grpc_code, elapsed } = answered;
        // A gRPC error answered at once travels as HTTP 200 with `grpc-status` in the headers.
        let counter = match (status, grpc_code) {
            (500.., _) | (_, Some(2 | 4 | 8 | 13 | 14 | 15)) => &self.server_errors,
            (400..=499, _) | (_, Some(1..)) => &self.client_errors,
            _ => &self.ok,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.latency.observe(elapsed);
        let status = match grpc_code {
            Some(code) => StatusLabel::Grpc(grpc_code_name(code)),
            None if route.starts_with("/shale.") || route.starts_with("/grpc.") => StatusLabel::Grpc("OK"),
            None => StatusLabel::Http(status),
        };
        let mut routes = self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *routes.counts.entry((route, method, status)).or_default() += 1;
        routes.latency.entry((route, method)).or_default().observe(elapsed);
    }

    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        render_counters(
            &[
                ("shale_api_requests_ok_total", "API requests answered successfully", &self.ok),
                ("shale_api_requests_client_error_total", "API requests refused (4xx)", &self.client_errors),
                ("shale_api_requests_server_error_total", "API requests that failed (5xx)", &self.server_errors),
            ],
            out,
        );
        self.latency.render("shale_api_request_seconds", "time to the answer's headers", out);
        let routes = self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let role = self.role;
        let _ = writeln!(
            out,
            "# HELP shale_api_requests_total API requests by route, method and status (HTTP status, or gRPC code)\n\
             # TYPE shale_api_requests_total counter"
        );
        for ((route, method, status), count) in &routes.counts {
            let _ = writeln!(
                out,
                "shale_api_requests_total{{role=\"{role}\",route=\"{route}\",method=\"{method}\",status=\"{status}\"}} {count}"
            );
        }
        let name = "shale_api_request_duration_seconds";
        let _ =
            writeln!(out, "# HELP {name} time to the answer's headers, by route and method\n# TYPE {name} histogram");
        for ((route, method), latency) in &routes.latency {
            latency.render_series(name, &format!("role=\"{role}\",route=\"{route}\",method=\"{method}\""), out);
        }
    }
}

/// The `method` label: the standard methods by name, any other (a client may send any
/// token) as `other`, so the label stays bounded.
fn method_label(method: &axum::http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    }
}

/// gRPC's canonical name of a status code (`NOT_FOUND`), for labels.
fn grpc_code_name(code: i32) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    usize::try_from(code).ok().and_then(|i| NAMES.get(i)).copied().unwrap_or("UNKNOWN")
}

/// The route a request took, as a bounded label: S2's REST paths as templates, the
/// ops endpoints, and gRPC methods by their path (only methods that exist: the caller
/// drops `UNIMPLEMENTED` answers to other paths).
fn route_of(path: &str, grpc: bool) -> Option<&'static str> {
    if grpc {
        return GRPC_METHODS.iter().find(|m| **m == path).copied();
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let route = match parts.as_slice() {
        ["health"] => "/health",
        ["ready"] => "/ready",
        ["metrics"] => "/metrics",
        ["v1", "basins"] => "/v1/basins",
        ["v1", "basins", _] => "/v1/basins/{basin}",
        ["v1", "basins", _, "tables"] => "/v1/basins/{basin}/tables",
        ["v1", "streams"] => "/v1/streams",
        ["v1", "streams", _] => "/v1/streams/{stream}",
        ["v1", "streams", _, "records"] => "/v1/streams/{stream}/records",
        ["v1", "streams", _, "records", "tail"] => "/v1/streams/{stream}/records/tail",
        ["v1", "streams", _, "consumers"] => "/v1/streams/{stream}/consumers",
        ["v1", "streams", _, "consumers", _] => "/v1/streams/{stream}/consumers/{name}",
        ["v1", "records"] => "/v1/records",
        ["v1", "access-tokens"] => "/v1/access-tokens",
        ["v1", "access-tokens", _] => "/v1/access-tokens/{id}",
        _ => "other",
    };
    Some(route)
}

/// The `shale.v1` methods and reflection's, as gRPC paths.
const GRPC_METHODS: &[&str] = &[
    "/shale.v1.Basins/ListBasins",
    "/shale.v1.Basins/CreateBasin",
    "/shale.v1.Basins/DeleteBasin",
    "/shale.v1.Basins/GetTableStatus",
    "/shale.v1.Streams/ListStreams",
    "/shale.v1.Streams/CreateStream",
    "/shale.v1.Streams/DeleteStream",
    "/shale.v1.Streams/CommitConsumer",
    "/shale.v1.Streams/GetConsumer",
    "/shale.v1.Streams/ListConsumers",
    "/shale.v1.AccessTokens/IssueAccessToken",
    "/shale.v1.AccessTokens/ListAccessTokens",
    "/shale.v1.AccessTokens/RevokeAccessToken",
    "/shale.v1.Records/Append",
    "/shale.v1.Records/AppendSession",
    "/shale.v1.Records/Read",
    "/shale.v1.Records/ReadSession",
    "/shale.v1.Records/CheckTail",
    "/shale.v1.Records/AppendAtomic",
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// Counts each request into [`RequestMetrics`].
#[derive(Clone)]
pub struct CountRequests(pub Arc<RequestMetrics>);

impl<S> Layer<S> for CountRequests {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Counted { inner, metrics: self.0.clone() }
    }
}

#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    metrics: Arc<RequestMetrics>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, R> tower::Service<Request<B>> for Counted<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<R>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let metrics = self.metrics.clone();
        let started = tokio::time::Instant::now();
        let content_type = request.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
        let route = route_of(request.uri().path(), content_type.starts_with("application/grpc"));
        let method = method_label(request.method());
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            let grpc_code = response.headers().get("grpc-status").and_then(|v| v.to_str().ok());
            let grpc_code = grpc_code.and_then(|v| v.parse::<i32>().ok());
            let answered = Answered {
                route: route.unwrap_or("other"),
                method,
                status: response.status().as_u16(),
                grpc_code,
                elapsed: started.elapsed(),
            };
            metrics.record(answered);
            Ok(response)
        })
    }
}

/// gRPC statuses tonic picks itself before a handler runs, corrected to what the call
/// deserves: a request that does not decode is the client's error (`INVALID_ARGUMENT`,
/// not `INTERNAL`), a message over the size limit is `RESOURCE_EXHAUSTED` (gRPC's code
/// for it, not `OUT_OF_RANGE`).
pub fn correct_grpc_status<B>(mut response: Response<B>) -> Response<B> {
    let headers = response.headers_mut();
    let code = headers.get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<i32>().ok());
    let message = headers.get("grpc-message").and_then(|v| v.to_str().ok()).unwrap_or("");
    let corrected = match code {
        Some(13) if message.starts_with("failed%20to%20decode") || message.starts_with("failed to decode") => "3",
        Some(11)
            if message.contains("message%20length%20too%20large") || message.contains("message length too large") =>
        {
            "8"
        }
        _ => return response,
    };
    headers.insert("grpc-status", HeaderValue::from_static(corrected));
    response
}

/// Gives an error the HTTP stack answered by itself (405, 413, a path extractor's 400,
/// ...) S2's JSON body, keeping its status: clients never see a text or empty error.
pub async fn json_errors(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok());
    if content_type.is_some_and(|t| t.starts_with("application/json")) {
        return response;
    }
    let text = axum::body::to_bytes(response.into_body(), 4096).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let message = match text.trim() {
        "" => status.canonical_reason().unwrap_or("request refused").to_lowercase(),
        text => text.to_string(),
    };
    ApiError::Rejected { status: status.as_u16(), message }.into_response()
}

/// Closes an HTTP/1 connection after an error answered before the request's body was
/// read (a refused token, an oversized body, a bad header, ...). The stack drops such a
/// connection anyway, since the unread body is still on the wire; `connection: close`
/// on the answer tells the client so, instead of letting it reuse the connection for
/// its next request and see that fail.
pub async fn close_after_unread_body(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let http1 = request.version() < axum::http::Version::HTTP_2;
    let (parts, body) = request.into_parts();
    let had_body = !http_body::Body::is_end_stream(&body);
    let read = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let body = axum::body::Body::new(ReadToEnd { inner: body, read: read.clone() });
    let mut response = next.run(Request::from_parts(parts, body)).await;
    let failed = response.status().is_client_error() || response.status().is_server_error();
    if http1 && had_body && failed && !read.load(Ordering::Acquire) {
        response.headers_mut().insert(axum::http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A request body that notes when it has been read to its end.
struct ReadToEnd {
    inner: axum::body::Body,
    read: Arc<std::sync::atomic::AtomicBool>,
}

impl http_body::Body for ReadToEnd {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Answers a gRPC call sent to the HTTP port (a client given the wrong port) with a gRPC
/// status saying so, instead of an HTTP error the client cannot read as gRPC.
pub async fn grpc_on_http_port(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let content_type = request.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    if !content_type.starts_with("application/grpc") {
        return next.run(request).await;
    }
    let message = "this is Shale's HTTP port (S2's REST API), not its gRPC port: \
                   give the address of the gRPC listener (--grpc)";
    let mut response = axum::response::Response::new(axum::body::Body::empty());
    let headers = response.headers_mut();
    headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    headers.insert("grpc-status", HeaderValue::from(tonic::Code::Unimplemented as i32));
    headers.insert("grpc-message", HeaderValue::from_static(message));
    response
}

/// Headers a request may carry at most; past either bound it is refused with 431.
pub const MAX_HEADERS: usize = 100;
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Refuses a request whose headers exceed [`MAX_HEADERS`] or [`MAX_HEADER_BYTES`] with
/// 431 and S2's JSON body. The HTTP stack reads a little more than these before the
/// request gets here (so the refusal is ours, in JSON), and past its own buffer (about
/// 400 KiB on HTTP/1.1) closes the connection with a bare 431.
pub async fn header_limits(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    let headers = request.headers();
    let bytes: usize = headers.iter().map(|(name, value)| name.as_str().len() + value.len()).sum();
    if headers.len() > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        let message = format!(
            "request headers too large: {} headers, {bytes} bytes (at most {MAX_HEADERS} headers, {MAX_HEADER_BYTES} bytes)",
            headers.len()
        );
        return ApiError::Rejected { status: 431, message }.into_response();
    }
    next.run(request).await
}

/// Answers `request_timeout` (S2's JSON error) when the handler takes longer than `limit`.
pub async fn time_limit(
    axum::extract::State(limit): axum::extract::State<Duration>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::from(ServiceError::Timeout(limit)).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    /// A handler that never answers gets S2's JSON `request_timeout` at the limit, and
    /// the request is counted as refused.
    #[tokio::test(start_paused = true)]
    async fn a_hung_handler_is_answered_with_a_json_timeout_and_counted() {
        let metrics = Arc::new(RequestMetrics::default());
        let router = axum::Router::new()
            .route("/hang", get(std::future::pending::<&'static str>))
            .layer(axum::middleware::from_fn_with_state(Duration::from_secs(5), time_limit))
            .layer(CountRequests(metrics.clone()));
        let request = Request::get("/hang").body(Body::empty()).expect("valid request");
        let response = router.oneshot(request).await.expect("answered");
        assert_eq!(response.status(), 408);
        let body = axum::body::to_bytes(response.into_body(), 1024).await.expect("body");
        let json: serde_json::Value = serde_json::from_slice(&body).expect("JSON body");
        assert_eq!(json["code"], "request_timeout");
        assert_eq!(metrics.client_errors.load(Ordering::Relaxed), 1);
        assert_eq!(metrics.latency.count(), 1);
    }

    #[test]
    fn grpc_refusals_and_failures_are_told_apart_and_counted_per_route() {
        let metrics = RequestMetrics::new("gateway");
        let grpc = "/shale.v1.Records/Append";
        let answer =
            |route, status, grpc_code| Answered { route, method: "POST", status, grpc_code, elapsed: Duration::ZERO };
        metrics.record(answer(grpc, 200, None));
        metrics.record(answer(grpc, 200, Some(0)));
        metrics.record(answer(grpc, 200, Some(5)));
        metrics.record(answer(grpc, 200, Some(14)));
        metrics.record(answer("/v1/basins", 503, None));
        assert_eq!(metrics.ok.load(Ordering::Relaxed), 2);
        assert_eq!(metrics.client_errors.load(Ordering::Relaxed), 1);
        assert_eq!(metrics.server_errors.load(Ordering::Relaxed), 2);
        let mut out = String::new();
        metrics.render(&mut out);
        let series = |labels: &str| format!("shale_api_requests_total{{role=\"gateway\",{labels}}}");
        assert!(out.contains(&(series(&format!("route=\"{grpc}\",method=\"POST\",status=\"OK\"")) + " 2")), "{out}");
        assert!(
            out.contains(&(series(&format!("route=\"{grpc}\",method=\"POST\",status=\"NOT_FOUND\"")) + " 1")),
            "{out}"
        );
        assert!(out.contains(&(series("route=\"/v1/basins\",method=\"POST\",status=\"503\"") + " 1")), "{out}");
        assert!(out.contains(&format!(
            "shale_api_request_duration_seconds_count{{role=\"gateway\",route=\"{grpc}\",method=\"POST\"}} 4"
        )));
    }

    /// Routes are templates or known gRPC methods, methods the standard ones: what a
    /// client puts in a path or method never becomes a label.
    #[test]
    fn routes_are_bounded_templates() {
        assert_eq!(route_of("/v1/streams/a%2Fb/records", false), Some("/v1/streams/{stream}/records"));
        assert_eq!(route_of("/v1/streams/x/consumers/job", false), Some("/v1/streams/{stream}/consumers/{name}"));
        assert_eq!(route_of("/v1/anything/else/here", false), Some("other"));
        assert_eq!(route_of("/shale.v1.Records/ReadSession", true), Some("/shale.v1.Records/ReadSession"));
        assert_eq!(route_of("/shale.v1.Records/Made-Up", true), None);
        assert_eq!(method_label(&axum::http::Method::PATCH), "PATCH");
        let made_up = axum::http::Method::from_bytes(b"MADEUP").expect("a method token");
        assert_eq!(method_label(&made_up), "other");
    }
}
