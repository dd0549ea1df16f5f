//! The layers only HTTP needs: S2's JSON body on errors the stack answers itself, a
//! closed connection after an error that left a body unread, a clear answer to a gRPC
//! call sent to the HTTP port, header limits, and a time limit on unary calls.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{HeaderValue, Request};
use axum::response::IntoResponse;

use crate::ApiError;
use shale_service::ServiceError;

/// Longest a unary HTTP call may take before it is answered `request_timeout`: above
/// S2's longest `wait` (60 s) plus a metadata failover (30 s). Sessions answer their
/// headers at once, so it never cuts a session short.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

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
    use crate::layers::{CountRequests, RequestMetrics};

    /// A handler that never answers gets S2's JSON `request_timeout` at the limit, and
    /// the request is counted as refused.
    #[tokio::test(start_paused = true)]
    async fn a_hung_handler_is_answered_with_a_json_timeout_and_counted() {
        let metrics = Arc::new(RequestMetrics::new("gateway"));
        let router = axum::Router::new()
            .route("/hang", get(std::future::pending::<&'static str>))
            .layer(axum::middleware::from_fn_with_state(Duration::from_secs(5), time_limit))
            .layer(CountRequests::http(metrics.clone()));
        let request = Request::get("/hang").body(Body::empty()).expect("valid request");
        let response = router.oneshot(request).await.expect("answered");
        assert_eq!(response.status(), 408);
        let body = axum::body::to_bytes(response.into_body(), 1024).await.expect("body");
        let json: serde_json::Value = serde_json::from_slice(&body).expect("JSON body");
        assert_eq!(json["code"], "request_timeout");
        let mut out = String::new();
        metrics.render(&mut out);
        assert!(out.contains("shale_api_requests_client_error_total 1"), "{out}");
        assert!(out.contains("route=\"/hang\",method=\"GET\",status=\"408\"} 1"), "{out}");
    }
}
