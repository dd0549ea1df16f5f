//! What every request passes through, on both transports, as tower layers: a request id
//! (`x-request-id`, taken from the client or made here, echoed on the answer), a
//! tracing span per request with its id, method and path, and request counts and
//! latency for `/metrics`, labeled by the route the router took. What only HTTP needs
//! is in `http_layers`; gRPC's status corrections are in `grpc`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{HeaderValue, Request, Response};
use shale_storage::{render_counters, Histogram};
use tower::Layer;
use tower_http::request_id::{MakeRequestId, RequestId};

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

/// The span each HTTP request runs in: its id, the process's role, method, path and
/// (S2's `s2-basin` header) basin. The trace layer logs one line per request in it at
/// info, with the status and the time to the answer's headers.
pub fn request_span<B>(role: &'static str) -> impl Fn(&Request<B>) -> tracing::Span + Clone {
    move |request: &Request<B>| {
        let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
        let (id, basin) = (header("x-request-id"), header("s2-basin"));
        tracing::info_span!("request", id, role, method = %request.method(), path = %request.uri().path(), basin)
    }
}

/// The per-request line: status and latency, at info.
pub fn request_logged() -> tower_http::trace::DefaultOnResponse {
    tower_http::trace::DefaultOnResponse::new()
        .level(tracing::Level::INFO)
        .latency_unit(tower_http::LatencyUnit::Micros)
}

/// The span each gRPC call runs in: its id, the process's role and method (the path
/// names the service and method), with the basin recorded by the handler from the
/// message ([`record_basin`]) and the time to the answer's headers once known.
pub fn grpc_span<B>(role: &'static str) -> impl Fn(&Request<B>) -> tracing::Span + Clone {
    move |request: &Request<B>| {
        let id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("");
        tracing::info_span!(
            "request",
            id,
            role,
            method = %request.uri().path(),
            basin = tracing::field::Empty,
            latency_us = tracing::field::Empty
        )
    }
}

/// Names the basin a gRPC call is about in its request line.
pub fn record_basin(basin: &str) {
    tracing::Span::current().record("basin", tracing::field::display(basin));
}

/// Notes the time to a gRPC answer's headers; a call answered by its headers alone (an
/// error before any message) gets its request line here.
pub fn grpc_headers_logged<B>(response: &Response<B>, latency: Duration, span: &tracing::Span) {
    span.record("latency_us", latency.as_micros() as u64);
    if let Some(code) = grpc_status(response.headers()) {
        log_grpc_call(code, span);
    }
}

/// The request line of a gRPC call answered with trailers: its status, when the last
/// message has gone.
pub fn grpc_end_logged(trailers: Option<&axum::http::HeaderMap>, _stream: Duration, span: &tracing::Span) {
    if let Some(code) = trailers.and_then(grpc_status) {
        log_grpc_call(code, span);
    }
}

fn grpc_status(headers: &axum::http::HeaderMap) -> Option<tonic::Code> {
    let code = headers.get("grpc-status")?.to_str().ok()?.parse::<i32>().ok()?;
    Some(tonic::Code::from_i32(code))
}

/// How loud a call's line is: info when it succeeded or the caller was wrong, warn when
/// the server could not take it now, error for the server's own faults.
pub fn grpc_level(code: tonic::Code) -> tracing::Level {
    use tonic::Code;
    match code {
        Code::Internal | Code::Unknown | Code::DataLoss => tracing::Level::ERROR,
        Code::Unavailable | Code::DeadlineExceeded => tracing::Level::WARN,
        _ => tracing::Level::INFO,
    }
}

/// One line per call, at [`grpc_level`].
fn log_grpc_call(code: tonic::Code, span: &tracing::Span) {
    match grpc_level(code) {
        tracing::Level::ERROR => tracing::error!(parent: span, status = ?code, "finished processing request"),
        tracing::Level::WARN => tracing::warn!(parent: span, status = ?code, "finished processing request"),
        _ => tracing::info!(parent: span, status = ?code, "finished processing request"),
    }
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

/// Per-route counts and latencies. Routes are the router's templates
/// (`/v1/streams/{stream}`) or the gRPC methods this server implements, so their number
/// is bounded; a route's key is allocated once, when first seen.
type Routes = std::collections::BTreeMap<String, RouteStats>;

#[derive(Debug, Default)]
struct RouteStats {
    counts: std::collections::BTreeMap<(&'static str, StatusLabel), u64>,
    latency: std::collections::BTreeMap<&'static str, Histogram>,
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
struct Answered<'a> {
    route: &'a str,
    method: &'static str,
    status: u16,
    grpc_code: Option<i32>,
    grpc: bool,
    elapsed: Duration,
}

impl RequestMetrics {
    pub fn new(role: &'static str) -> Self {
        Self { role, ..Self::default() }
    }

    fn record(&self, answered: Answered) {
        let Answered { route, method, status, grpc_code, grpc, elapsed } = answered;
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
            None if grpc => StatusLabel::Grpc("OK"),
            None => StatusLabel::Http(status),
        };
        let mut routes = self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !routes.contains_key(route) {
            routes.insert(route.to_string(), RouteStats::default());
        }
        if let Some(stats) = routes.get_mut(route) {
            *stats.counts.entry((method, status)).or_default() += 1;
            stats.latency.entry(method).or_default().observe(elapsed);
        }
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
        for (route, method, status, count) in
            routes.iter().flat_map(|(r, s)| s.counts.iter().map(move |((m, st), c)| (r, m, st, c)))
        {
            let _ = writeln!(
                out,
                "shale_api_requests_total{{role=\"{role}\",route=\"{route}\",method=\"{method}\",status=\"{status}\"}} {count}"
            );
        }
        let name = "shale_api_request_duration_seconds";
        let _ =
            writeln!(out, "# HELP {name} time to the answer's headers, by route and method\n# TYPE {name} histogram");
        for (route, method, latency) in
            routes.iter().flat_map(|(r, s)| s.latency.iter().map(move |(m, latency)| (r, m, latency)))
        {
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

/// The route an answer says it took, for paths the router serves with one handler
/// (the endpoints under `/v1/streams/{stream}`, whose stream may contain `/`): put in
/// the answer's extensions by that handler.
#[derive(Clone, Copy, Debug)]
pub struct RouteLabel(pub &'static str);

/// Where a request's route label comes from: the router's template (`MatchedPath`) on
/// HTTP, the gRPC path of a method this server implements.
enum RouteOf {
    /// The route template the router matched, if it matched one.
    Http(Option<axum::extract::MatchedPath>),
    /// The gRPC path, when it names one of `services`; tonic answers `UNIMPLEMENTED`
    /// for methods a service does not have, and such calls count as `other`.
    Grpc(Option<axum::http::Uri>),
}

impl RouteOf {
    fn of<B>(request: &Request<B>, grpc_services: &[&'static str]) -> Self {
        let content_type = request.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
        if !content_type.starts_with("application/grpc") {
            return RouteOf::Http(request.extensions().get::<axum::extract::MatchedPath>().cloned());
        }
        let path = request.uri().path();
        let service = path.trim_start_matches('/').split_once('/').map(|(service, _)| service);
        RouteOf::Grpc(service.filter(|s| grpc_services.contains(s)).map(|_| request.uri().clone()))
    }

    /// The label, given the answer (which may name its route, or be `UNIMPLEMENTED`).
    fn label<'a, R>(&'a self, response: &Response<R>, grpc_code: Option<i32>) -> &'a str {
        match self {
            _ if grpc_code == Some(tonic::Code::Unimplemented as i32) => "other",
            RouteOf::Grpc(uri) => uri.as_ref().map_or("other", |uri| uri.path()),
            RouteOf::Http(matched) => match response.extensions().get::<RouteLabel>() {
                Some(RouteLabel(label)) => label,
                None => matched.as_ref().map_or("other", |m| m.as_str()),
            },
        }
    }
}

/// Counts each request into [`RequestMetrics`]. `grpc_services` are the gRPC services
/// served (their generated names, `shale.v1.Records`): calls to others count as `other`.
#[derive(Clone)]
pub struct CountRequests {
    pub metrics: Arc<RequestMetrics>,
    pub grpc_services: Arc<[&'static str]>,
}

impl CountRequests {
    /// For a listener that serves no gRPC.
    pub fn http(metrics: Arc<RequestMetrics>) -> Self {
        Self { metrics, grpc_services: Arc::new([]) }
    }
}

impl<S> Layer<S> for CountRequests {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Counted { inner, counting: self.clone() }
    }
}

#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    counting: CountRequests,
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
        let metrics = self.counting.metrics.clone();
        let started = tokio::time::Instant::now();
        let route = RouteOf::of(&request, &self.counting.grpc_services);
        let method = method_label(request.method());
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            let grpc_code = response.headers().get("grpc-status").and_then(|v| v.to_str().ok());
            let grpc_code = grpc_code.and_then(|v| v.parse::<i32>().ok());
            let answered = Answered {
                route: route.label(&response, grpc_code),
                grpc: matches!(route, RouteOf::Grpc(_)),
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

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::response::IntoResponse;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    #[test]
    fn a_calls_line_is_loud_by_who_was_at_fault() {
        use tonic::Code;
        for code in [Code::Ok, Code::NotFound, Code::InvalidArgument, Code::PermissionDenied, Code::Unauthenticated] {
            assert_eq!(grpc_level(code), tracing::Level::INFO, "{code:?}: the caller's doing");
        }
        assert_eq!(grpc_level(Code::Unavailable), tracing::Level::WARN);
        for code in [Code::Internal, Code::Unknown, Code::DataLoss] {
            assert_eq!(grpc_level(code), tracing::Level::ERROR, "{code:?}: the server's fault");
        }
    }

    fn answer(route: &str, status: u16, grpc_code: Option<i32>) -> Answered<'_> {
        Answered {
            route,
            method: "POST",
            status,
            grpc_code,
            grpc: route.starts_with("/shale."),
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn grpc_refusals_and_failures_are_told_apart_and_counted_per_route() {
        let metrics = RequestMetrics::new("gateway");
        let grpc = "/shale.v1.Records/Append";
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

    async fn send(router: &axum::Router, request: Request<Body>) {
        router.clone().oneshot(request).await.expect("answered");
    }

    /// Labels are the router's templates, a route a handler names, or served gRPC
    /// methods; what a client puts in a path or method never becomes a label.
    #[tokio::test]
    async fn routes_are_the_routers_templates() {
        let metrics = Arc::new(RequestMetrics::new("gateway"));
        let labeled = || async {
            let mut response = "ok".into_response();
            response.extensions_mut().insert(RouteLabel("/v1/streams/{stream}/records"));
            response
        };
        let grpc_answer = |code: &'static str| {
            move || async move { ([("content-type", "application/grpc"), ("grpc-status", code)], "").into_response() }
        };
        let counting = CountRequests { metrics: metrics.clone(), grpc_services: Arc::new(["shale.v1.Records"]) };
        let router = axum::Router::new()
            .route("/v1/basins/{basin}", get(|| async { "basin" }))
            .route("/v1/streams/{*stream}", get(labeled))
            .route("/shale.v1.Records/Append", axum::routing::post(grpc_answer("0")))
            .route("/shale.v1.Records/Made-Up", axum::routing::post(grpc_answer("12")))
            .route("/other.v1.Service/Call", axum::routing::post(grpc_answer("0")))
            .layer(counting);
        send(&router, Request::get("/v1/basins/my-basin").body(Body::empty()).unwrap()).await;
        send(&router, Request::get("/v1/streams/a%2Fb/records").body(Body::empty()).unwrap()).await;
        send(&router, Request::get("/v1/anything/else").body(Body::empty()).unwrap()).await;
        let made_up = axum::http::Method::from_bytes(b"MADEUP").unwrap();
        send(&router, Request::builder().method(made_up).uri("/v1/basins/x").body(Body::empty()).unwrap()).await;
        for path in ["/shale.v1.Records/Append", "/shale.v1.Records/Made-Up", "/other.v1.Service/Call"] {
            let request = Request::post(path).header("content-type", "application/grpc").body(Body::empty()).unwrap();
            send(&router, request).await;
        }
        let mut out = String::new();
        metrics.render(&mut out);
        let routes: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("shale_api_requests_total{"))
            .map(|l| l.split("route=\"").nth(1).and_then(|r| r.split('"').next()).unwrap())
            .collect();
        assert_eq!(
            routes,
            [
                "/shale.v1.Records/Append",
                "/v1/basins/{basin}",
                "/v1/basins/{basin}",
                "/v1/streams/{stream}/records",
                "other",
                "other",
                "other",
            ],
            "{out}"
        );
        assert!(out.contains("route=\"/v1/basins/{basin}\",method=\"other\",status=\"405\"} 1"), "{out}");
        assert!(out.contains("route=\"other\",method=\"GET\",status=\"404\"} 1"), "{out}");
        assert!(out.contains("route=\"other\",method=\"POST\",status=\"UNIMPLEMENTED\"} 1"), "{out}");
        assert!(out.contains("route=\"other\",method=\"POST\",status=\"OK\"} 1"), "{out}");
    }
}
