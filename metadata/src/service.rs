//! [`MetadataApi`] implemented by the in-process service: what `shale serve` and the
//! metadata role's RPC server call.

use async_trait::async_trait;
use tokio::sync::watch;

use crate::{
    CatalogCall, CatalogReply, CommitRequest, CommitTicket, IndexEntry, Metadata, MetadataApi, PipelinePosition,
    Position, Result,
};

#[async_trait]
impl MetadataApi for Metadata {
    async fn sequence(&self, requests: Vec<CommitRequest>, position: Option<PipelinePosition>) -> Result<CommitTicket> {
        Metadata::sequence(self, requests, position).await
    }

    async fn entries_from(&self, stream_id: u64, seq: u64, limit: usize) -> Result<Vec<IndexEntry>> {
        Metadata::entries_from(self, stream_id, seq, limit).await
    }

    async fn entry_at_time(&self, stream_id: u64, timestamp: u64) -> Result<Option<IndexEntry>> {
        Metadata::entry_at_time(self, stream_id, timestamp).await
    }

    fn subscribe_tail(&self, basin: &str, stream: &str) -> watch::Receiver<Option<Position>> {
        Metadata::subscribe_tail(self, basin, stream)
    }

    async fn catalog(&self, call: CatalogCall) -> Result<CatalogReply> {
        self.run_catalog(call).await
    }
}
