//! [`MetadataApi`] in process, answered only under the leader lease: what `shale serve`
//! uses on a store other processes can reach (S3), where a second `serve` on the same
//! bucket would otherwise fence this one and leave it answering reads from a view that
//! no longer grows. The rule is the metadata role's (`rpc::server`): every call needs
//! the lease, and a read is answered only if the lease still holds once it is computed.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::watch;

use crate::{
    CatalogCall, CatalogReply, CommitRequest, CommitTicket, IndexEntry, LeaderLease, Lookup, Metadata, MetadataApi,
    PipelinePosition, Position, Result, Retry,
};

/// A [`Metadata`] behind its [`LeaderLease`].
pub struct LeasedMetadata {
    metadata: Arc<Metadata>,
    lease: Arc<LeaderLease>,
}

impl LeasedMetadata {
    pub fn new(metadata: Arc<Metadata>, lease: Arc<LeaderLease>) -> Self {
        Self { metadata, lease }
    }

    /// `value` if the lease still holds now that it is computed.
    fn answer<T>(&self, value: T) -> Result<T> {
        self.lease.check(&self.metadata)?;
        Ok(value)
    }
}

#[async_trait]
impl MetadataApi for LeasedMetadata {
    async fn sequence(&self, requests: Vec<CommitRequest>, position: Option<PipelinePosition>) -> Result<CommitTicket> {
        self.lease.check(&self.metadata)?;
        self.metadata.sequence(requests, position).await
    }

    async fn lookup(&self, query: Lookup) -> Result<Vec<IndexEntry>> {
        self.lease.check(&self.metadata)?;
        let entries = self.metadata.run_lookup(query).await?;
        self.answer(entries)
    }

    /// Tails move only while this instance commits; once fenced it halts and the process
    /// exits, which ends every watcher.
    fn subscribe_tail(&self, basin: &str, stream: &str) -> watch::Receiver<Option<Position>> {
        self.metadata.subscribe_tail(basin, stream)
    }

    async fn catalog(&self, call: CatalogCall) -> Result<CatalogReply> {
        self.lease.check(&self.metadata)?;
        let read = call.retry() == Retry::Read;
        let reply = self.metadata.run_catalog(call).await?;
        // A write that took effect is answered whatever the lease says now.
        if read {
            self.answer(reply)
        } else {
            Ok(reply)
        }
    }
}
