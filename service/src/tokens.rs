//! Access tokens (S2's `/v1/access-tokens`): issue, list, revoke, for the caller's
//! [`crate::auth::Access`].

use shale_metadata_contract::ListPage;

use super::{ListQuery, Service};
use crate::auth::{IssuedToken, TokenInfo};
use crate::ServiceError;

impl Service {
    /// Issues a token no wider than the caller's; answers its secret.
    pub async fn issue_access_token(&self, info: TokenInfo) -> Result<IssuedToken, ServiceError> {
        self.catalog()?;
        self.auth.issue(&self.access, info).await
    }

    /// Issues a token with the secret the caller chose (the init file's declared tokens).
    pub async fn issue_access_token_with_secret(
        &self,
        info: TokenInfo,
        secret: String,
    ) -> Result<IssuedToken, ServiceError> {
        self.catalog()?;
        self.auth.issue_with_secret(&self.access, info, secret).await
    }

    /// Whether `secret` is token `id`'s (a live token presenting it becomes that token).
    pub async fn is_secret_of(&self, id: &str, secret: &str) -> bool {
        matches!(self.auth.authenticate_secret(secret).await, Ok(crate::auth::Access::Token(grant)) if grant.id == id)
    }

    pub async fn list_access_tokens(&self, query: &ListQuery) -> Result<ListPage<TokenInfo>, ServiceError> {
        self.catalog()?;
        let limit = query.limit();
        self.auth.list(&self.access, &query.prefix, &query.start_after, limit).await
    }

    pub async fn revoke_access_token(&self, id: &str) -> Result<(), ServiceError> {
        self.catalog()?;
        self.auth.revoke(&self.access, id).await
    }
}
