//! Access tokens: stored by id (`a/`) with the SHA-256 of their secret, found by that
//! hash (`h/`). What a token permits is the client API's business; metadata keeps it as
//! bytes.

use slatedb::config::DurabilityLevel;
use slatedb::WriteBatch;

use crate::{keys, AccessTokenRecord, ListPage, Metadata, MetadataError, Result, Stored};

/// Length of a SHA-256 digest.
const SECRET_HASH_LEN: usize = 32;

impl Metadata {
    /// Stores a new token; [`MetadataError::AccessTokenExists`] when its id is taken.
    pub async fn issue_access_token(&self, record: AccessTokenRecord) -> Result<()> {
        self.check_usable()?;
        if record.id.is_empty() || record.secret_hash.len() != SECRET_HASH_LEN {
            return Err(MetadataError::InvalidArgument("an access token needs an id and a SHA-256 secret hash".into()));
        }
        let writer = self.writer.lock().await;
        self.check_usable()?;
        let key = keys::access_token(&record.id);
        if self.get_latest::<AccessTokenRecord>(&key).await?.is_some() {
            self.settle(writer).await?;
            return Err(MetadataError::AccessTokenExists(record.id));
        }
        let mut batch = WriteBatch::new();
        batch.put(keys::access_token_secret(&record.secret_hash), record.id.as_bytes());
        batch.put(&key, record.to_stored());
        self.write_durably(writer, batch).await
    }

    /// The token whose secret hashes to `secret_hash`, durable state only.
    pub async fn access_token_by_secret(&self, secret_hash: &[u8]) -> Result<Option<AccessTokenRecord>> {
        self.check_usable()?;
        let id_key = keys::access_token_secret(secret_hash);
        let id = self.db.get_with_options(&id_key, &Self::durable_read()).await.map_err(|e| self.storage_error(e))?;
        let Some(id) = id else { return Ok(None) };
        let id = String::from_utf8_lossy(&id);
        let record: Option<AccessTokenRecord> = self.get_durable(&keys::access_token(&id)).await?;
        // A revoke removes both keys in one batch; a record whose hash differs is not this token.
        Ok(record.filter(|r| r.secret_hash == secret_hash))
    }

    /// Tokens whose ids start with `prefix` and sort after `start_after`.
    pub async fn list_access_tokens(
        &self,
        prefix: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<ListPage<AccessTokenRecord>> {
        self.check_usable()?;
        let scan_prefix = keys::access_token(prefix);
        let start = keys::access_token(start_after);
        self.scan_page(&scan_prefix, &start, limit, DurabilityLevel::Remote, AccessTokenRecord::from_stored).await
    }

    /// Removes the token and its secret's key in one batch.
    pub async fn revoke_access_token(&self, id: &str) -> Result<()> {
        self.check_usable()?;
        let writer = self.writer.lock().await;
        self.check_usable()?;
        let key = keys::access_token(id);
        let Some(record) = self.get_latest::<AccessTokenRecord>(&key).await? else {
            self.settle(writer).await?;
            return Err(MetadataError::AccessTokenNotFound(id.to_string()));
        };
        let mut batch = WriteBatch::new();
        batch.delete(keys::access_token_secret(&record.secret_hash));
        batch.delete(&key);
        self.write_durably(writer, batch).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use shale_storage::object_store::memory::InMemory;
    use shale_storage::SystemClock;

    use crate::{AccessTokenRecord, Metadata, MetadataError};

    fn token(id: &str, hash_byte: u8) -> AccessTokenRecord {
        AccessTokenRecord { id: id.into(), secret_hash: vec![hash_byte; 32], info: b"{\"scope\":{}}".to_vec() }
    }

    #[tokio::test]
    async fn tokens_are_issued_found_by_secret_listed_and_revoked() {
        let metadata = Metadata::open(Arc::new(InMemory::new()), "metadata", Arc::new(SystemClock)).await.unwrap();
        metadata.issue_access_token(token("team-a/reader", 1)).await.unwrap();
        metadata.issue_access_token(token("team-b/writer", 2)).await.unwrap();
        let again = metadata.issue_access_token(token("team-a/reader", 3)).await;
        assert!(matches!(again, Err(MetadataError::AccessTokenExists(id)) if id == "team-a/reader"));
        // The refused issue stored nothing under its secret.
        assert_eq!(metadata.access_token_by_secret(&[3; 32]).await.unwrap(), None);

        assert_eq!(metadata.access_token_by_secret(&[1; 32]).await.unwrap(), Some(token("team-a/reader", 1)));
        let page = metadata.list_access_tokens("team-", "team-a/reader", 10).await.unwrap();
        assert_eq!(page.items.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), vec!["team-b/writer"]);
        assert!(!page.has_more);

        metadata.revoke_access_token("team-a/reader").await.unwrap();
        assert_eq!(metadata.access_token_by_secret(&[1; 32]).await.unwrap(), None);
        let gone = metadata.revoke_access_token("team-a/reader").await;
        assert!(matches!(gone, Err(MetadataError::AccessTokenNotFound(_))));
        let short_hash = AccessTokenRecord { secret_hash: vec![1; 4], ..token("x", 0) };
        assert!(matches!(metadata.issue_access_token(short_hash).await, Err(MetadataError::InvalidArgument(_))));
    }
}
