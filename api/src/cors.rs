//! Browser access (CORS): which web pages may call a process's HTTP API, as s2-lite
//! allows, so S2's TypeScript SDK and consoles work from a browser.
//!
//! On by default for any origin: a page needs a token like any client when access control
//! is on, and tokens travel in `Authorization`, never in cookies, so a page gains nothing
//! a `curl` could not do. Preflights are answered before authentication (a browser sends
//! them without credentials); the answer allows every method, the headers the page asks
//! for (`Authorization`, `s2-basin`, `content-type`, ...) and exposes every response
//! header. `[cors] enabled = false` (or `--no-cors`) turns it off: no CORS headers, and a
//! preflight is answered like any call (401 without a token, else 405).

use axum::http::{HeaderValue, Method};
use serde::Deserialize;
use tower_http::cors::{AllowHeaders, AllowOrigin, Any, CorsLayer, ExposeHeaders};

/// `[cors]` in the config file.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct CorsConfig {
    pub enabled: bool,
    /// `*` for any origin, else exact origins such as `http://localhost:5173`.
    pub allowed_origins: Vec<String>,
}

impl Default for CorsConfig {
    fn default() -> Self {
        Self { enabled: true, allowed_origins: vec!["*".to_string()] }
    }
}

impl CorsConfig {
    /// The layer for these settings; `None` when off. An origin that is not a valid
    /// header value is refused here, at start.
    pub fn layer(&self) -> Result<Option<CorsLayer>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let origin = if self.allowed_origins.iter().any(|o| o == "*") {
            AllowOrigin::from(Any)
        } else {
            let origins = self
                .allowed_origins
                .iter()
                .map(|o| {
                    HeaderValue::from_str(o).map_err(|_| format!("[cors] allowed_origins: `{o}` is not an origin"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            AllowOrigin::list(origins)
        };
        let methods = [Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE, Method::HEAD];
        Ok(Some(
            CorsLayer::new()
                .allow_origin(origin)
                .allow_methods(methods)
                // `*` would not cover `Authorization`: the page's own list is echoed.
                .allow_headers(AllowHeaders::mirror_request())
                .expose_headers(ExposeHeaders::from(Any))
                .max_age(std::time::Duration::from_secs(600)),
        ))
    }
}

/// `router` answering browsers as `config` says.
pub fn with_cors(router: axum::Router, config: &CorsConfig) -> Result<axum::Router, String> {
    Ok(match config.layer()? {
        Some(layer) => router.layer(layer),
        None => router,
    })
}
