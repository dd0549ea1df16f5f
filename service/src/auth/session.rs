//! [`SessionGuard`]: sessions outlive the request that opened them, so the caller's token
//! is checked again at most once per revocation bound; a session whose token was revoked
//! or expired ends with `authn` within the bound too.

use std::sync::Arc;

use tokio::time::Instant;

use super::access::Access;
use super::tokens::Authenticator;
use crate::ServiceError;

pub struct SessionGuard {
    auth: Arc<Authenticator>,
    access: Access,
    next_check: Instant,
}

impl SessionGuard {
    pub fn new(auth: Arc<Authenticator>, access: Access) -> Self {
        let next_check = Instant::now() + auth.revocation_bound();
        Self { auth, access, next_check }
    }

    /// How long until the next look, for a session that would otherwise wait longer;
    /// `None` when there is nothing to check.
    pub fn until_next_check(&self) -> Option<std::time::Duration> {
        match self.access {
            Access::Open | Access::Root => None,
            Access::Token(_) => Some(self.next_check.saturating_duration_since(Instant::now())),
        }
    }

    /// Refuses once the token is revoked or expired; looks at most once per bound.
    pub async fn check(&mut self) -> Result<(), ServiceError> {
        if self.access.permits_everything() || Instant::now() < self.next_check {
            return Ok(());
        }
        self.next_check = Instant::now() + self.auth.revocation_bound();
        self.auth.recheck(&self.access).await
    }
}
