//! [`MetadataApi`] implemented by the in-process service: what `shale serve` and the
//! metadata role's RPC server call.

use async_trait::async_trait;
use tokio::sync::watch;

use crate::{
    CatalogCall, CatalogReply, CommitRequest, CommitTicket, IndexEntry, Lookup, Metadata, MetadataApi,
    PipelinePosition, Position, Result,
};

#[async_trait]
impl MetadataApi for Metadata {
    async fn sequence(&self, requests: Vec<CommitRequest>, position: Option<PipelinePosition>) -> Result<CommitTicket> {
        self.run_sequence(requests, position).await
    }

    async fn lookup(&self, query: Lookup) -> Result<Vec<IndexEntry>> {
        self.run_lookup(query).await
    }

    fn subscribe_tail(&self, basin: &str, stream: &str) -> watch::Receiver<Option<Position>> {
        self.tails.subscribe(basin, stream)
    }

    fn forget_entry(&self, stream_id: u64, first_seq: u64) {
        self.tails.forget_entry(stream_id, first_seq);
    }

    async fn catalog(&self, call: CatalogCall) -> Result<CatalogReply> {
        self.run_catalog(call).await
    }
}
