//! The tower layer both transports share: resolves the request's `Authorization` header
//! to an [`Access`] placed in the request's extensions, or answers `authn` (HTTP 401 with
//! S2's JSON body, gRPC `UNAUTHENTICATED`) without calling the handler. `/health`,
//! `/ready` and the console's page and assets stay open. Refusals for lack of permission are counted on the way out.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::http::{Request, Response};
use axum::response::IntoResponse;
use tower::Layer;

pub use shale_service::auth::*;

use crate::ApiError;

/// Paths anyone may call: health, readiness, and the console's page and the process
/// facts it shows before asking for a token (`console`).
const OPEN_PATHS: [&str; 5] = ["/health", "/ready", "/console", "/console/", "/console/process.json"];

/// Where the console's assets are, open too.
const OPEN_PREFIX: &str = "/console/static/";

/// Whether anyone may call `path`, without a token.
fn is_open(path: &str) -> bool {
    OPEN_PATHS.contains(&path) || path.starts_with(OPEN_PREFIX)
}

/// Authenticates every request; `refuse` renders a refusal for the transport.
pub struct Authenticate<R> {
    auth: Arc<Authenticator>,
    refuse: fn(shale_service::ServiceError) -> Response<R>,
}

impl<R> Clone for Authenticate<R> {
    fn clone(&self) -> Self {
        Self { auth: self.auth.clone(), refuse: self.refuse }
    }
}

/// For the HTTP API: refusals in S2's JSON shape.
pub fn authenticate_http(auth: Arc<Authenticator>) -> Authenticate<axum::body::Body> {
    Authenticate { auth, refuse: |error| ApiError::from(error).into_response() }
}

/// For gRPC: refusals as a gRPC status.
pub fn authenticate_grpc<R: Default>(auth: Arc<Authenticator>) -> Authenticate<R> {
    Authenticate { auth, refuse: |error| tonic::Status::from(ApiError::from(error)).into_http() }
}

impl<S, R> Layer<S> for Authenticate<R> {
    type Service = Authenticated<S, R>;

    fn layer(&self, inner: S) -> Self::Service {
        Authenticated { inner, auth: self.clone() }
    }
}

pub struct Authenticated<S, R> {
    inner: S,
    auth: Authenticate<R>,
}

impl<S: Clone, R> Clone for Authenticated<S, R> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), auth: self.auth.clone() }
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, R> tower::Service<Request<B>> for Authenticated<S, R>
where
    S: tower::Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
    R: 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<R>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        if is_open(request.uri().path()) {
            return Box::pin(self.inner.call(request));
        }
        // The clone that was made ready is the one that serves this request.
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let Authenticate { auth, refuse } = self.auth.clone();
        Box::pin(async move {
            let header = request.headers().get(axum::http::header::AUTHORIZATION).map(|v| v.as_bytes());
            let access = match auth.authenticate(header).await {
                Ok(access) => access,
                Err(error) => return Ok(refuse(error)),
            };
            request.extensions_mut().insert(access);
            let response = inner.call(request).await?;
            let grpc_denied = response.headers().get("grpc-status").is_some_and(|v| v.as_bytes() == b"7");
            if response.status() == 403 || grpc_denied {
                auth.count_denied();
            }
            Ok(response)
        })
    }
}

/// The caller the auth layer placed in an HTTP request's extensions. A request that did
/// not pass the layer has none and is refused: access is never assumed.
pub fn access_of(extensions: &axum::http::Extensions) -> Result<Access, ApiError> {
    Ok(Access::found(extensions.get::<Access>())?)
}

/// The caller the auth layer found, as an HTTP handler's argument.
pub struct Caller(pub Access);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _state: &S) -> Result<Self, ApiError> {
        Ok(Caller(access_of(&parts.extensions)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_health_readiness_and_the_consoles_page_and_assets_are_open() {
        assert!(is_open("/health") && is_open("/console") && is_open("/console/process.json"));
        assert!(is_open("/console/static/console.js"));
        assert!(!is_open("/console/session"));
        assert!(!is_open("/consoles"));
        assert!(!is_open("/v1/basins"));
        assert!(!is_open("/metrics"));
    }
}
