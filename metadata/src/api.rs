//! [`MetadataApi`]: everything gateways, readers and the HTTP/gRPC handlers ask of the
//! metadata service. [`Metadata`] implements it in process (`shale serve`);
//! [`crate::RemoteMetadata`] implements it over `shale.metadata.v1` (the role commands).

use async_trait::async_trait;
use tokio::sync::watch;

use crate::{
    BasinConfig, BasinPatch, BasinRecord, CommitRequest, CommitTicket, IndexEntry, ListPage, Metadata,
    PipelinePosition, Position, Result, StreamConfig, StreamInfo, StreamPatch, StreamSummary, UnitOutcome,
};

/// The metadata service as its callers see it, wherever it runs.
#[async_trait]
pub trait MetadataApi: Send + Sync + 'static {
    /// Applies a commit call (sealed segments, in order, in one write batch) and returns
    /// once it holds its place in the commit order: calls made one after another by one
    /// task are applied in that order. The ticket resolves to one outcome list per
    /// segment once durable. Idempotent per segment id.
    async fn sequence(&self, requests: Vec<CommitRequest>, position: Option<PipelinePosition>) -> Result<CommitTicket>;

    /// [`Self::sequence`] and wait until durable.
    async fn commit_many(&self, requests: Vec<CommitRequest>) -> Result<Vec<Vec<UnitOutcome>>> {
        self.sequence(requests, None).await?.await
    }

    /// Up to `limit` index entries from the one holding `seq`.
    async fn entries_from(&self, stream_id: u64, seq: u64, limit: usize) -> Result<Vec<IndexEntry>>;

    /// The first index entry whose last record is at or after `timestamp`.
    async fn entry_at_time(&self, stream_id: u64, timestamp: u64) -> Result<Option<IndexEntry>>;

    /// A receiver that changes to the new tail when a durable commit moves this
    /// stream's, and to `None` whenever updates may have been missed (waiters look the
    /// tail up then). Subscribe before reading the tail, then wait on it.
    fn subscribe_tail(&self, basin: &str, stream: &str) -> watch::Receiver<Option<Position>>;

    async fn basin(&self, name: &str) -> Result<BasinRecord>;

    /// Creates a basin; a retry with the same `request_token` returns it with `false`.
    async fn create_basin_idempotent(
        &self,
        name: &str,
        config: BasinConfig,
        request_token: Option<&str>,
    ) -> Result<(BasinRecord, bool)>;

    /// Applies a patch to the basin's config (atomically, at metadata).
    async fn reconfigure_basin(&self, name: &str, patch: BasinPatch) -> Result<BasinRecord>;

    async fn list_basins(&self, prefix: &str, start_after: &str, limit: usize) -> Result<ListPage<BasinRecord>>;

    async fn delete_basin(&self, name: &str) -> Result<()>;

    async fn stream(&self, basin: &str, stream: &str) -> Result<StreamInfo>;

    /// Creates a stream; a retry with the same `request_token` returns it with `false`.
    async fn create_stream_idempotent(
        &self,
        basin: &str,
        stream: &str,
        config: StreamConfig,
        request_token: Option<&str>,
    ) -> Result<(StreamInfo, bool)>;

    /// Applies a patch to the stream's config (atomically, at metadata).
    async fn reconfigure_stream(&self, basin: &str, stream: &str, patch: StreamPatch) -> Result<StreamInfo>;

    async fn list_streams(
        &self,
        basin: &str,
        prefix: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<ListPage<StreamSummary>>;

    async fn delete_stream(&self, basin: &str, stream: &str) -> Result<()>;

    async fn create_basin(&self, name: &str, config: BasinConfig) -> Result<BasinRecord> {
        Ok(self.create_basin_idempotent(name, config, None).await?.0)
    }

    /// Creates a stream; settings it leaves unset come from the basin's default.
    async fn create_stream(&self, basin: &str, stream: &str, config: StreamConfig) -> Result<StreamInfo> {
        Ok(self.create_stream_idempotent(basin, stream, config, None).await?.0)
    }
}

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

    async fn basin(&self, name: &str) -> Result<BasinRecord> {
        Metadata::basin(self, name).await
    }

    async fn create_basin_idempotent(
        &self,
        name: &str,
        config: BasinConfig,
        request_token: Option<&str>,
    ) -> Result<(BasinRecord, bool)> {
        Metadata::create_basin_idempotent(self, name, config, request_token).await
    }

    async fn reconfigure_basin(&self, name: &str, patch: BasinPatch) -> Result<BasinRecord> {
        Metadata::reconfigure_basin(self, name, patch).await
    }

    async fn list_basins(&self, prefix: &str, start_after: &str, limit: usize) -> Result<ListPage<BasinRecord>> {
        Metadata::list_basins(self, prefix, start_after, limit).await
    }

    async fn delete_basin(&self, name: &str) -> Result<()> {
        Metadata::delete_basin(self, name).await
    }

    async fn stream(&self, basin: &str, stream: &str) -> Result<StreamInfo> {
        Metadata::stream(self, basin, stream).await
    }

    async fn create_stream_idempotent(
        &self,
        basin: &str,
        stream: &str,
        config: StreamConfig,
        request_token: Option<&str>,
    ) -> Result<(StreamInfo, bool)> {
        Metadata::create_stream_idempotent(self, basin, stream, config, request_token).await
    }

    async fn reconfigure_stream(&self, basin: &str, stream: &str, patch: StreamPatch) -> Result<StreamInfo> {
        Metadata::reconfigure_stream(self, basin, stream, patch).await
    }

    async fn list_streams(
        &self,
        basin: &str,
        prefix: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<ListPage<StreamSummary>> {
        Metadata::list_streams(self, basin, prefix, start_after, limit).await
    }

    async fn delete_stream(&self, basin: &str, stream: &str) -> Result<()> {
        Metadata::delete_stream(self, basin, stream).await
    }
}
