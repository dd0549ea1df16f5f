//! [`Authenticator`]: the root token, access tokens issued, listed and revoked through
//! metadata (stored as the SHA-256 of their secret), and the resolution of a presented
//! secret to an [`Access`], cached for [`AuthConfig::revocation_bound`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use sha2::{Digest, Sha256};
use shale_metadata_contract::{AccessTokenRecord, CatalogCall, ListPage, MetadataApi};
use shale_storage::Clock;

use super::access::{Access, Grant, Target};
use super::scope::{Operation, ResourceSet, TokenInfo};
use crate::ServiceError;

/// How long a process trusts what it learned about a token unless configured otherwise
/// (`[auth] revocation_bound`): a revoked token stops working on every process within
/// this long.
pub const DEFAULT_REVOCATION_BOUND: Duration = Duration::from_secs(5);

/// Longest access token id (S2's limit).
const MAX_TOKEN_ID_BYTES: usize = 96;
/// Random bytes in a secret.
const SECRET_BYTES: usize = 30;

type SecretHash = [u8; 32];

fn hash(secret: &str) -> SecretHash {
    Sha256::digest(secret.as_bytes()).into()
}

/// A token just issued: the secret is shown once, never stored.
#[derive(Debug)]
pub struct IssuedToken {
    pub secret: String,
}

/// The shortest secret an operator may choose for a token (an issued one has 43).
pub const MIN_CHOSEN_SECRET_CHARS: usize = 24;

/// Resolves secrets to callers, and issues, lists and revokes tokens.
pub struct Authenticator {
    root: Option<SecretHash>,
    metadata: Arc<dyn MetadataApi>,
    clock: Arc<dyn Clock>,
    /// What each presented secret resolved to (`None`: no such token), for the
    /// revocation bound.
    known: moka::future::Cache<SecretHash, Option<Arc<Grant>>>,
    failures: Failures,
    revocation_bound: Duration,
}

/// Refused requests, by reason.
#[derive(Default)]
struct Failures {
    missing: AtomicU64,
    unknown: AtomicU64,
    expired: AtomicU64,
    denied: AtomicU64,
}

impl Authenticator {
    /// With a root token every call needs a token; without one, access control is off.
    /// What is learned about a token is trusted for `revocation_bound`.
    pub fn new(
        root_token: Option<&str>,
        revocation_bound: Duration,
        metadata: Arc<dyn MetadataApi>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let known = moka::future::Cache::builder().max_capacity(100_000).time_to_live(revocation_bound).build();
        let root = root_token.map(hash);
        Self { root, metadata, clock, known, failures: Failures::default(), revocation_bound }
    }

    /// Whether calls need a token.
    pub fn is_on(&self) -> bool {
        self.root.is_some()
    }

    /// The caller behind an `Authorization` header value: `Bearer <secret>`.
    pub async fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Access, ServiceError> {
        if self.root.is_none() {
            return Ok(Access::Open);
        }
        let Some(secret) = authorization.and_then(bearer) else {
            self.failures.missing.fetch_add(1, Ordering::Relaxed);
            return Err(ServiceError::Unauthenticated(
                "missing access token: send `Authorization: Bearer <token>`".into(),
            ));
        };
        self.authenticate_secret(secret).await
    }

    /// The caller presenting `secret` (a token's, or the root token).
    pub async fn authenticate_secret(&self, secret: &str) -> Result<Access, ServiceError> {
        let Some(root) = &self.root else { return Ok(Access::Open) };
        let presented = hash(secret);
        if presented == *root {
            return Ok(Access::Root);
        }
        Ok(Access::Token(self.resolve(presented).await?))
    }

    /// The SCRAM keys of token `id` under `scram_hash`, and the caller it becomes once
    /// its proof checks out. Unknown, revoked and expired tokens, and tokens issued
    /// before SCRAM keys were kept, are refused alike.
    pub async fn scram_keys(
        &self,
        id: &str,
        scram_hash: super::ScramHash,
    ) -> Result<(super::ScramKeys, Access), ServiceError> {
        let refused = || ServiceError::Unauthenticated(format!("no access token `{id}` with SCRAM keys"));
        let call = CatalogCall::ListAccessTokens { prefix: id.into(), start_after: String::new(), limit: 1 };
        let page = self.metadata.catalog(call).await?.into_access_tokens()?;
        let Some(record) = page.items.into_iter().find(|record| record.id == id) else {
            self.failures.unknown.fetch_add(1, Ordering::Relaxed);
            return Err(refused());
        };
        let scram = super::stored::decode_scram(&record.info).ok().flatten().ok_or_else(refused)?;
        let secret_hash: SecretHash = record.secret_hash.as_slice().try_into().map_err(|_| refused())?;
        // Resolved as a presented secret would be: the same expiry and revocation rules.
        let grant = self.resolve(secret_hash).await?;
        Ok((scram.for_hash(scram_hash).clone(), Access::Token(grant)))
    }

    /// The live token whose secret hashes to `presented`: known (as of at most the
    /// revocation bound ago) and not expired.
    async fn resolve(&self, presented: SecretHash) -> Result<Arc<Grant>, ServiceError> {
        let grant = match self.known.get(&presented).await {
            Some(grant) => grant,
            None => {
                let call = CatalogCall::AccessTokenBySecret { secret_hash: presented.to_vec() };
                let record = self.metadata.catalog(call).await?.into_access_token()?;
                let grant = record.and_then(|record| grant(record, presented)).map(Arc::new);
                self.known.insert(presented, grant.clone()).await;
                grant
            }
        };
        let Some(grant) = grant else {
            self.failures.unknown.fetch_add(1, Ordering::Relaxed);
            return Err(ServiceError::Unauthenticated("unknown or revoked access token".into()));
        };
        if grant.expires_at_ms.is_some_and(|at| at <= self.clock.now_ms()) {
            self.failures.expired.fetch_add(1, Ordering::Relaxed);
            let at = grant.expires_at.as_deref().unwrap_or_default();
            return Err(ServiceError::Unauthenticated(format!("access token `{}` expired at {at}", grant.id)));
        }
        Ok(grant)
    }

    /// Whether a caller that was let in is still: its token not revoked (as of the
    /// revocation bound) nor expired. For sessions that outlive a request.
    pub async fn recheck(&self, access: &Access) -> Result<(), ServiceError> {
        match access {
            Access::Open | Access::Root => Ok(()),
            Access::Token(grant) => self.resolve(grant.secret_hash).await.map(|_| ()),
        }
    }

    /// How long a looked-up token is trusted.
    pub fn revocation_bound(&self) -> Duration {
        self.revocation_bound
    }

    /// Counts a request refused for lack of permission.
    pub fn count_denied(&self) {
        self.failures.denied.fetch_add(1, Ordering::Relaxed);
    }

    /// Issues a token on behalf of `issuer`: its scope and expiry may not exceed the
    /// issuer's. Returns the secret, which is not kept.
    pub async fn issue(&self, issuer: &Access, info: TokenInfo) -> Result<IssuedToken, ServiceError> {
        let mut random = [0u8; SECRET_BYTES];
        shale_storage::ids::fill_secret(&mut random);
        let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random);
        self.issue_with_secret(issuer, info, secret).await
    }

    /// As [`Self::issue`], with the secret the caller chose (an operator's declared
    /// token, from the init file): at least [`MIN_CHOSEN_SECRET_CHARS`] characters.
    pub async fn issue_with_secret(
        &self,
        issuer: &Access,
        mut info: TokenInfo,
        secret: String,
    ) -> Result<IssuedToken, ServiceError> {
        if !self.is_on() {
            return Err(ServiceError::bad(
                "access control is off (no root token configured): a token issued now would not be checked",
            ));
        }
        validate_id(&info.id)?;
        issuer.check(Operation::IssueAccessToken, Target::AccessToken(&info.id))?;
        if info.scope.operations().is_empty() {
            return Err(ServiceError::bad("the scope must permit at least one operation (`ops` or `op_groups`)"));
        }
        if info.auto_prefix_streams && !matches!(info.scope.streams, ResourceSet::Prefix(_)) {
            return Err(ServiceError::bad("auto_prefix_streams needs a stream scope that is a prefix"));
        }
        let requested_expiry = info.expires_at.as_deref().map(expiry_ms).transpose()?;
        if let Some(issuer) = issuer.token() {
            if !issuer.scope.covers(&info.scope) {
                return Err(ServiceError::PermissionDenied(format!(
                    "access token `{}` may not issue a token with a wider scope than its own",
                    issuer.id
                )));
            }
            if let Some(limit) = issuer.expires_at.as_deref() {
                let limit_ms = expiry_ms(limit)?;
                match requested_expiry {
                    None => info.expires_at = Some(limit.to_string()),
                    Some(at) if at > limit_ms => {
                        return Err(ServiceError::bad(format!(
                            "expires_at must not be later than the issuing token's expiry ({limit})"
                        )))
                    }
                    Some(_) => {}
                }
            }
        }
        if secret.chars().count() < MIN_CHOSEN_SECRET_CHARS {
            return Err(ServiceError::bad(format!(
                "a token's secret must have at least {MIN_CHOSEN_SECRET_CHARS} characters"
            )));
        }
        let scram = super::scram::ScramSecrets::derive(&secret);
        let encoded = super::stored::encode_with_scram(&info, Some(&scram));
        let record = AccessTokenRecord { id: info.id.clone(), secret_hash: hash(&secret).to_vec(), info: encoded };
        self.metadata.catalog(CatalogCall::IssueAccessToken { record }).await?.into_done()?;
        tracing::info!(id = %info.id, "access token issued");
        Ok(IssuedToken { secret })
    }

    /// Tokens the caller may see, by id.
    pub async fn list(
        &self,
        caller: &Access,
        prefix: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<ListPage<TokenInfo>, ServiceError> {
        caller.check(Operation::ListAccessTokens, Target::Account)?;
        let call = CatalogCall::ListAccessTokens { prefix: prefix.into(), start_after: start_after.into(), limit };
        let page = self.metadata.catalog(call).await?.into_access_tokens()?;
        let items = page
            .items
            .iter()
            .filter(|record| caller.sees_token(&record.id))
            .filter_map(|record| super::stored::decode(&record.info).ok())
            .collect();
        Ok(ListPage { items, has_more: page.has_more })
    }

    /// Revokes a token: at once on this process, within the revocation bound elsewhere.
    pub async fn revoke(&self, caller: &Access, id: &str) -> Result<(), ServiceError> {
        validate_id(id)?;
        caller.check(Operation::RevokeAccessToken, Target::AccessToken(id))?;
        self.metadata.catalog(CatalogCall::RevokeAccessToken { id: id.into() }).await?.into_done()?;
        self.known.invalidate_all();
        tracing::info!(%id, "access token revoked");
        Ok(())
    }

    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        let f = &self.failures;
        let _ = writeln!(out, "# HELP shale_auth_failures_total requests refused by access control, by reason");
        let _ = writeln!(out, "# TYPE shale_auth_failures_total counter");
        for (reason, count) in
            [("missing", &f.missing), ("unknown", &f.unknown), ("expired", &f.expired), ("denied", &f.denied)]
        {
            let _ = writeln!(out, "shale_auth_failures_total{{reason=\"{reason}\"}} {}", count.load(Ordering::Relaxed));
        }
    }
}

/// A stored token as a caller's grant; `None` (and a warning) when its record does not
/// decode, so a damaged record lets nobody in.
fn grant(record: AccessTokenRecord, secret_hash: SecretHash) -> Option<Grant> {
    let info = match super::stored::decode(&record.info) {
        Ok(info) => info,
        Err(e) => {
            tracing::warn!(id = %record.id, error = %e, "access token record does not decode; refusing it");
            return None;
        }
    };
    let expires_at_ms = match info.expires_at.as_deref().map(expiry_ms).transpose() {
        Ok(at) => at,
        Err(e) => {
            tracing::warn!(id = %record.id, error = %e, "access token expiry does not parse; refusing it");
            return None;
        }
    };
    Some(Grant { info, secret_hash, expires_at_ms })
}

/// The secret of `Bearer <secret>` (the scheme in any case).
fn bearer(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, secret) = value.split_once(' ')?;
    let secret = secret.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !secret.is_empty()).then_some(secret)
}

/// S2's rules for a token id.
fn validate_id(id: &str) -> Result<(), ServiceError> {
    if id.is_empty() || id.len() > MAX_TOKEN_ID_BYTES {
        return Err(ServiceError::bad(format!("access token id must be 1 to {MAX_TOKEN_ID_BYTES} bytes")));
    }
    if id == "." || id == ".." || id.contains('\0') {
        return Err(ServiceError::bad("access token id must not be `.`, `..` or contain NUL"));
    }
    Ok(())
}

/// An RFC 3339 time as milliseconds since the epoch.
fn expiry_ms(rfc3339: &str) -> Result<u64, ServiceError> {
    let at = time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .map_err(|e| ServiceError::bad(format!("expires_at `{rfc3339}` is not an RFC 3339 time: {e}")))?;
    Ok(u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_values_are_parsed_strictly() {
        assert_eq!(bearer(b"Bearer abc"), Some("abc"));
        assert_eq!(bearer(b"bearer  abc "), Some("abc"));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearer "), None);
        assert_eq!(bearer(b"abc"), None);
    }

    #[test]
    fn expiry_times_parse_with_any_offset() {
        assert_eq!(expiry_ms("1970-01-01T00:00:01Z").ok(), Some(1000));
        assert_eq!(expiry_ms("1970-01-01T01:00:01+01:00").ok(), Some(1000));
        assert!(expiry_ms("tomorrow").is_err());
    }
}
