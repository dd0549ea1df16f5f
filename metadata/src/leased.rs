//! [`MetadataApi`] in process, answered only while this instance may serve: not halted
//! and, with a lease, holding it. The one place of the lease rule: every call needs the
//! lease, and a read is answered only if the lease still holds once it is computed. The
//! metadata role's RPC server (`rpc::server`) answers through it, and so does `shale
//! serve` on a store other processes can reach (S3), where a second `serve` on the same
//! bucket would otherwise fence this one and leave it answering reads from a view that
//! no longer grows.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::watch;

use crate::{
    CatalogCall, CatalogReply, CommitRequest, CommitTicket, IndexEntry, LeaderLease, Lookup, Metadata, MetadataApi,
    PipelinePosition, Position, Result, Retry,
};

/// A [`Metadata`] behind its [`LeaderLease`], if it has one.
pub struct LeasedMetadata {
    metadata: Arc<Metadata>,
    lease: Option<Arc<LeaderLease>>,
}

impl LeasedMetadata {
    pub fn new(metadata: Arc<Metadata>, lease: Option<Arc<LeaderLease>>) -> Self {
        Self { metadata, lease }
    }

    /// Ok while this instance may answer: not halted, and holding its lease if it has one.
    pub fn check(&self) -> Result<()> {
        match &self.lease {
            Some(lease) => lease.check(&self.metadata),
            None => self.metadata.check_usable(),
        }
    }

    /// The instance, for calls the trait does not carry (the tail feed).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// `value` if this instance may still answer now that it is computed.
    fn answer<T>(&self, value: T) -> Result<T> {
        self.check()?;
        Ok(value)
    }
}

#[async_trait]
impl MetadataApi for LeasedMetadata {
    async fn sequence(&self, requests: Vec<CommitRequest>, position: Option<PipelinePosition>) -> Result<CommitTicket> {
        self.check()?;
        self.metadata.sequence(requests, position).await
    }

    async fn lookup(&self, query: Lookup) -> Result<Vec<IndexEntry>> {
        self.check()?;
        let entries = self.metadata.run_lookup(query).await?;
        self.answer(entries)
    }

    /// Tails move only while this instance commits; once fenced it halts and the process
    /// exits, which ends every watcher.
    fn subscribe_tail(&self, basin: &str, stream: &str) -> watch::Receiver<Option<Position>> {
        self.metadata.subscribe_tail(basin, stream)
    }

    async fn catalog(&self, call: CatalogCall) -> Result<CatalogReply> {
        self.check()?;
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
