//! The init file (`--init-file`, `SHALE_INIT_FILE`): basins and streams declared in JSON,
//! created when missing and reconciled when their config differs, at every start, as
//! s2-lite's. Configs take the shapes of S2's REST API (those `s2` sends: `{"age":
//! 604800}` for a retention age), basins also Shale's `tables`; only the fields present
//! are applied to an existing basin or stream, and one whose config already matches is
//! not written. Nothing is ever deleted.
//!
//! Access tokens may be declared too (access control on): S2's token shape under
//! `token`, and the environment variable holding its secret under `secret_env` (the file
//! itself holds no secret). A token is issued when missing; one whose scope or secret
//! differs is revoked and issued again; one that matches is left alone.
//!
//! ```json
//! {"basins": [{"name": "events-basin", "config": {"create_stream_on_append": true},
//!   "streams": [{"name": "orders", "config": {"retention_policy": {"age": 604800}}}]}],
//!  "access_tokens": [{"secret_env": "ORDERS_READER_SECRET",
//!   "token": {"id": "orders-reader", "scope": {"basins": {"exact": "events-basin"},
//!     "streams": {"prefix": "orders"}, "op_groups": {"stream": {"read": true}}}}}]}
//! ```
//!
//! The whole file is checked before anything is applied: JSON that does not parse, an
//! unknown field, a bad name or config is refused with the line at fault.

use serde::Deserialize;
use shale_metadata_contract::{BasinConfig, BasinPatch, StreamConfig, StreamPatch};

use crate::auth::{TokenInfo, MIN_CHOSEN_SECRET_CHARS};
use crate::s2::config::{BasinPatchJson, StreamPatchJson};
use crate::s2::token_json::TokenInfoJson;
use crate::{ListQuery, Service};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InitFile {
    /// An editor's schema hint, as in S2's spec files; not read.
    #[serde(default, rename = "$schema")]
    _schema: Option<String>,
    #[serde(default)]
    basins: Vec<BasinSpec>,
    #[serde(default)]
    access_tokens: Vec<TokenSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenSpec {
    /// The environment variable holding the token's secret.
    secret_env: String,
    token: TokenInfoJson,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BasinSpec {
    name: String,
    #[serde(default)]
    config: Option<BasinPatchJson>,
    #[serde(default)]
    streams: Vec<StreamSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamSpec {
    name: String,
    #[serde(default)]
    config: Option<StreamPatchJson>,
}

/// Why an init file was not applied (wholly or in part).
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The file is refused before anything is applied; the message names the line.
    #[error("{0}")]
    Invalid(String),
    /// A call failed; what came before it was applied, and applying again is safe.
    #[error("{what}: {error}")]
    Apply { what: String, error: shale_service::ServiceError },
}

impl InitError {
    /// Worth trying again: metadata was not answering (no leader yet, failing over).
    pub fn is_transient(&self) -> bool {
        matches!(self, InitError::Apply { error, .. } if error.code() == shale_proto::ErrorCode::Unavailable)
    }
}

/// What applying an init file did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InitReport {
    pub created: usize,
    pub reconfigured: usize,
    pub unchanged: usize,
}

/// One declared basin or stream, checked.
enum Declared {
    Basin { name: String, patch: BasinPatch },
    Stream { basin: String, name: String, patch: StreamPatch },
    Token { info: TokenInfo, secret: String },
}

/// Checks `text` whole: every error names its line.
fn check(text: &str) -> Result<Vec<Declared>, String> {
    let file: InitFile = serde_json::from_str(text).map_err(|e| format!("line {}: {e}", e.line()))?;
    let at = |name: &str| line_of(text, name).map_or(String::new(), |line| format!("line {line}: "));
    let mut declared = Vec::new();
    for basin in file.basins {
        let refused = |e: String| format!("{}{e}", at(&basin.name));
        shale_proto::names::validate_basin(&basin.name).map_err(refused)?;
        let patch = match basin.config {
            Some(config) => config.into_patch().map_err(|e| refused(e.to_string()))?,
            None => BasinPatch::default(),
        };
        patch.apply(BasinConfig::default()).validate().map_err(refused)?;
        let mut streams = Vec::new();
        for stream in basin.streams {
            let refused = |e: String| format!("{}{e}", at(&stream.name));
            shale_proto::names::validate_stream(&stream.name).map_err(refused)?;
            let patch = stream.config.map(StreamPatchJson::into_patch).unwrap_or_default();
            patch.apply(StreamConfig::default(), None).validate().map_err(refused)?;
            streams.push(Declared::Stream { basin: basin.name.clone(), name: stream.name, patch });
        }
        declared.push(Declared::Basin { name: basin.name, patch });
        declared.extend(streams);
    }
    for token in file.access_tokens {
        let refused = |e: String| format!("{}{e}", at(&token.secret_env));
        let info = token.token.into_info().map_err(refused)?;
        let secret = std::env::var(&token.secret_env).map_err(|_| {
            refused(format!("the environment variable `{}` (the token's secret) is not set", token.secret_env))
        })?;
        if secret.chars().count() < MIN_CHOSEN_SECRET_CHARS {
            return Err(refused(format!(
                "the secret in `{}` must have at least {MIN_CHOSEN_SECRET_CHARS} characters",
                token.secret_env
            )));
        }
        declared.push(Declared::Token { info, secret });
    }
    Ok(declared)
}

/// The line (from 1) of the first `"name"` string in `text`.
fn line_of(text: &str, name: &str) -> Option<usize> {
    let quoted = serde_json::to_string(name).ok()?;
    let at = text.find(&quoted)?;
    Some(text[..at].matches('\n').count() + 1)
}

/// Checks `text`, then creates or reconciles each basin and stream it declares through
/// `service` (with full access).
pub async fn apply_init_file(service: &Service, text: &str) -> Result<InitReport, InitError> {
    let declared = check(text).map_err(InitError::Invalid)?;
    let mut report = InitReport::default();
    for item in declared {
        match item {
            Declared::Basin { name, patch } => {
                let failed = |error| InitError::Apply { what: format!("basin `{name}`"), error };
                match service.basin_config(&name).await {
                    Ok(current) => match service.reconfigure_basin_if_changed(&name, &current, patch).await {
                        Ok(Some(_)) => report.reconfigured += 1,
                        Ok(None) => report.unchanged += 1,
                        Err(e) => return Err(failed(e)),
                    },
                    Err(e) if e.code().is_not_found() => {
                        service.create_basin(&name, patch.apply(BasinConfig::default()), None).await.map_err(failed)?;
                        report.created += 1;
                    }
                    Err(e) => return Err(failed(e)),
                }
            }
            Declared::Stream { basin, name, patch } => {
                let failed = |error| InitError::Apply { what: format!("stream `{basin}/{name}`"), error };
                match service.stream_config(&basin, &name).await {
                    Ok(current) => match service.reconfigure_stream_if_changed(&basin, &name, &current, patch).await {
                        Ok(Some(_)) => report.reconfigured += 1,
                        Ok(None) => report.unchanged += 1,
                        Err(e) => return Err(failed(e)),
                    },
                    Err(e) if e.code().is_not_found() => {
                        // A setting given as `null` is left unset: creation fills it
                        // from the basin's defaults.
                        let config = patch.apply(StreamConfig::default(), None);
                        service.create_stream(&basin, &name, config, None).await.map_err(failed)?;
                        report.created += 1;
                    }
                    Err(e) => return Err(failed(e)),
                }
            }
            Declared::Token { info, secret } => {
                let id = info.id.clone();
                let failed = |error| InitError::Apply { what: format!("access token `{id}`"), error };
                let query = ListQuery { prefix: id.clone(), start_after: String::new(), limit: Some(1) };
                let page = service.list_access_tokens(&query).await.map_err(failed)?;
                let current = page.items.into_iter().find(|t| t.id == id);
                match current {
                    Some(current) if current == info && service.is_secret_of(&id, &secret).await => {
                        report.unchanged += 1
                    }
                    Some(_) => {
                        service.revoke_access_token(&id).await.map_err(failed)?;
                        service.issue_access_token_with_secret(info, secret).await.map_err(failed)?;
                        report.reconfigured += 1;
                    }
                    None => {
                        service.issue_access_token_with_secret(info, secret).await.map_err(failed)?;
                        report.created += 1;
                    }
                }
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_file_is_refused_with_its_line() {
        let bad_json = "{\n  \"basins\": [\n    {\"name\": \"events-basin\",,}\n  ]\n}";
        assert!(check(bad_json).err().is_some_and(|e| e.starts_with("line 3:")), "{:?}", check(bad_json).err());
        let unknown = "{\"basins\": [\n  {\"name\": \"events-basin\", \"colour\": 1}\n]}";
        assert!(check(unknown).err().is_some_and(|e| e.starts_with("line 2:") && e.contains("colour")));
        let bad_name = "{\"basins\": [\n  {\"name\": \"events-basin\", \"streams\": [\n    {\"name\": \"\"}\n  ]}\n]}";
        assert!(check(bad_name).err().is_some_and(|e| e.starts_with("line 3:")), "{:?}", check(bad_name).err());
        let bad_config = "{\"basins\": [\n  {\"name\": \"events-basin\", \"streams\": [\n    {\"name\": \"s\",\n     \"config\": {\"retention_policy\": {\"age\": 0}}}\n  ]}\n]}";
        assert!(check(bad_config).err().is_some_and(|e| e.starts_with("line 3:") && e.contains("age")));
        assert_eq!(check("{\"basins\": []}").map(|d| d.len()), Ok(0));
    }
}
