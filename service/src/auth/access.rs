//! [`Access`]: what one request may do, decided once per request by the auth layer and
//! checked by every service call.

use std::borrow::Cow;
use std::sync::Arc;

use super::scope::{Operation, ResourceSet, TokenInfo};
use crate::ServiceError;

/// The caller of one request.
#[derive(Clone, Debug)]
pub enum Access {
    /// Access control is off (no root token configured): everything is permitted.
    Open,
    /// The root token: everything is permitted.
    Root,
    /// An issued token: what its scope permits.
    Token(Arc<Grant>),
}

/// An issued token as presented: what it permits, and the hash of the secret it was
/// presented with (to check it again during a long session).
#[derive(Debug)]
pub struct Grant {
    pub info: TokenInfo,
    pub(super) secret_hash: [u8; 32],
    /// `info.expires_at` in ms since the epoch.
    pub(super) expires_at_ms: Option<u64>,
}

impl std::ops::Deref for Grant {
    type Target = TokenInfo;

    fn deref(&self) -> &TokenInfo {
        &self.info
    }
}

/// What an operation acts on.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    Account,
    Basin(&'a str),
    /// A stream by its full name (after auto-prefixing).
    Stream {
        basin: &'a str,
        stream: &'a str,
    },
    AccessToken(&'a str),
}

impl Access {
    /// Refuses with `permission_denied`, naming what is missing, unless the caller may
    /// run `op` on `target`.
    pub fn check(&self, op: Operation, target: Target<'_>) -> Result<(), ServiceError> {
        let Access::Token(token) = self else { return Ok(()) };
        let scope = &token.scope;
        let denied = |what: String| ServiceError::PermissionDenied(format!("access token `{}` {what}", token.id));
        if !scope.permits(op) {
            return Err(denied(format!("does not permit the `{}` operation", op.name())));
        }
        let basin_allowed = |basin: &str| {
            if scope.basins.matches(basin) {
                Ok(())
            } else {
                Err(denied(format!("has no access to basin `{basin}` (needed for `{}`)", op.name())))
            }
        };
        match target {
            Target::Account => Ok(()),
            Target::Basin(basin) => basin_allowed(basin),
            Target::Stream { basin, stream } => {
                basin_allowed(basin)?;
                if scope.streams.matches(stream) {
                    Ok(())
                } else {
                    Err(denied(format!("has no access to stream `{stream}` (needed for `{}`)", op.name())))
                }
            }
            Target::AccessToken(id) => {
                if scope.access_tokens.matches(id) {
                    Ok(())
                } else {
                    Err(denied(format!("has no access to access token `{id}` (needed for `{}`)", op.name())))
                }
            }
        }
    }

    /// Whether every call is allowed as it is (access control off, or the root token).
    pub fn permits_everything(&self) -> bool {
        matches!(self, Access::Open | Access::Root)
    }

    /// The prefix added to stream names this caller gives, when its token auto-prefixes.
    fn stream_prefix(&self) -> Option<&str> {
        match self {
            Access::Token(token) if token.auto_prefix_streams => match &token.scope.streams {
                ResourceSet::Prefix(prefix) => Some(prefix),
                _ => None,
            },
            _ => None,
        }
    }

    /// A stream name as the caller gave it, made full (auto-prefixed).
    pub fn full_stream_name<'a>(&self, name: &'a str) -> Cow<'a, str> {
        match self.stream_prefix() {
            Some(prefix) => Cow::Owned(format!("{prefix}{name}")),
            None => Cow::Borrowed(name),
        }
    }

    /// A full stream name as the caller sees it (the auto-prefix removed).
    pub fn shown_stream_name(&self, name: String) -> String {
        match self.stream_prefix().and_then(|prefix| name.strip_prefix(prefix)) {
            Some(rest) => rest.to_string(),
            None => name,
        }
    }

    /// Whether a listing shows this basin, stream or token to the caller.
    pub fn sees_basin(&self, basin: &str) -> bool {
        self.sees(|token| token.scope.basins.matches(basin))
    }

    pub fn sees_stream(&self, stream: &str) -> bool {
        self.sees(|token| token.scope.streams.matches(stream))
    }

    /// Whether the caller's streams are every stream (no scope narrows them).
    pub fn reaches_every_stream(&self) -> bool {
        self.sees(|token| token.scope.streams.covers(&ResourceSet::Prefix(String::new())))
    }

    pub fn sees_token(&self, id: &str) -> bool {
        self.sees(|token| token.scope.access_tokens.matches(id))
    }

    fn sees(&self, test: impl Fn(&Grant) -> bool) -> bool {
        match self {
            Access::Open | Access::Root => true,
            Access::Token(token) => test(token),
        }
    }

    /// The token, for a caller that holds one.
    pub fn token(&self) -> Option<&TokenInfo> {
        match self {
            Access::Token(grant) => Some(&grant.info),
            _ => None,
        }
    }
}

impl Access {
    /// The caller the auth layer found (`None`: the request did not pass the layer, and
    /// is refused).
    pub fn found(access: Option<&Access>) -> Result<Access, ServiceError> {
        access.cloned().ok_or_else(|| ServiceError::Unauthenticated("the request was not authenticated".into()))
    }

    /// Refuses unless the caller may read a process's `/metrics`.
    pub fn allow_metrics(&self) -> Result<(), ServiceError> {
        self.check(Operation::AccountMetrics, Target::Account)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn token(json: serde_json::Value) -> Access {
        Access::Token(Arc::new(Grant {
            info: super::super::stored::decode(json.to_string().as_bytes()).unwrap(),
            secret_hash: [0; 32],
            expires_at_ms: None,
        }))
    }

    #[test]
    fn a_read_only_team_token_reads_its_basins_and_nothing_else() {
        let access = token(serde_json::json!({
            "id": "ro", "scope": { "basins": { "prefix": "team-a-" }, "streams": { "prefix": "" },
                                   "op_groups": { "stream": { "read": true } } }
        }));
        let stream = |basin| Target::Stream { basin, stream: "s" };
        access.check(Operation::Read, stream("team-a-x")).unwrap();
        let append = access.check(Operation::Append, stream("team-a-x")).unwrap_err();
        assert!(append.to_string().contains("`append`"), "{append}");
        let other = access.check(Operation::Read, stream("team-b-x")).unwrap_err();
        assert!(other.to_string().contains("basin `team-b-x`"), "{other}");
        assert!(Access::Open.check(Operation::DeleteBasin, Target::Basin("x")).is_ok());
    }

    #[test]
    fn auto_prefixed_names_are_full_inside_and_short_outside() {
        let access = token(serde_json::json!({
            "id": "t", "auto_prefix_streams": true,
            "scope": { "basins": { "prefix": "" }, "streams": { "prefix": "users/7/" }, "ops": ["read"] }
        }));
        assert_eq!(access.full_stream_name("clicks"), "users/7/clicks");
        assert_eq!(access.shown_stream_name("users/7/clicks".into()), "clicks");
        assert!(access.sees_stream("users/7/clicks"));
        assert!(!access.sees_stream("users/8/clicks"));
        assert_eq!(Access::Root.full_stream_name("clicks"), "clicks");
    }
}
