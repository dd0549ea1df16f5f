//! [`MetadataApi`]: everything gateways, readers and the client-facing service ask of
//! metadata. The server crate (`shale-metadata`) implements it in process;
//! [`crate::RemoteMetadata`] implements it over `shale.metadata.v1`.

use async_trait::async_trait;
use tokio::sync::watch;

use crate::{
    AgentList, AgentRecord, BasinConfig, BasinPatch, BasinRecord, CatalogCall, CatalogReply, CommitRequest,
    CommitTicket, IndexEntry, ListPage, Lookup, PipelinePosition, Position, Result, StreamConfig, StreamInfo,
    StreamPatch, StreamSummary, UnitOutcome,
};

/// The metadata service as its callers see it, wherever it runs. Implementors provide
/// four calls: the commit pipeline, [`Self::lookup`], tail subscriptions and
/// [`Self::catalog`]; the typed helpers are built on them once, here.
#[async_trait]
pub trait MetadataApi: Send + Sync + 'static {
    /// Applies a commit call (sealed segments, in order, in one write batch) and returns
    /// once it holds its place in the commit order: calls made one after another by one
    /// task are applied in that order. The ticket resolves to one outcome list per
    /// segment once durable. Idempotent per segment id.
    async fn sequence(&self, requests: Vec<CommitRequest>, position: Option<PipelinePosition>) -> Result<CommitTicket>;

    /// Index entries of a stream (see [`Lookup`]), durable ones only.
    async fn lookup(&self, query: Lookup) -> Result<Vec<IndexEntry>>;

    /// A receiver that changes to the new tail when a durable commit moves this
    /// stream's, and to `None` whenever updates may have been missed (waiters look the
    /// tail up then). Subscribe before reading the tail, then wait on it.
    fn subscribe_tail(&self, basin: &str, stream: &str) -> watch::Receiver<Option<Position>>;

    /// Basin and stream management (see [`CatalogCall`]).
    async fn catalog(&self, call: CatalogCall) -> Result<CatalogReply>;

    /// Drops any entry kept locally for the stream's records from `first_seq`: a reader
    /// found the object it names gone (compacted, trimmed), so the next lookup asks the
    /// index. Implementations that keep nothing do nothing.
    fn forget_entry(&self, _stream_id: u64, _first_seq: u64) {}

    /// Up to `limit` index entries from the one holding `seq`.
    async fn entries_from(&self, stream_id: u64, seq: u64, limit: usize) -> Result<Vec<IndexEntry>> {
        self.lookup(Lookup::From { stream_id, seq, limit }).await
    }

    /// The first index entry whose last record is at or after `timestamp`.
    async fn entry_at_time(&self, stream_id: u64, timestamp: u64) -> Result<Option<IndexEntry>> {
        Ok(self.lookup(Lookup::AtTime { stream_id, timestamp }).await?.into_iter().next())
    }

    /// [`Self::sequence`] and wait until durable.
    async fn commit_many(&self, requests: Vec<CommitRequest>) -> Result<Vec<Vec<UnitOutcome>>> {
        self.sequence(requests, None).await?.await
    }

    async fn basin(&self, basin: &str) -> Result<BasinRecord> {
        Ok(self.catalog(CatalogCall::GetBasin { basin: basin.into() }).await?.into_basin()?.0)
    }

    /// Creates a basin; a retry with the same `request_token` returns it with `false`.
    async fn create_basin_idempotent(
        &self,
        basin: &str,
        config: BasinConfig,
        request_token: Option<&str>,
    ) -> Result<(BasinRecord, bool)> {
        let request_token = request_token.map(str::to_string);
        self.catalog(CatalogCall::CreateBasin { basin: basin.into(), config, request_token }).await?.into_basin()
    }

    async fn create_basin(&self, basin: &str, config: BasinConfig) -> Result<BasinRecord> {
        Ok(self.create_basin_idempotent(basin, config, None).await?.0)
    }

    /// Applies a patch to the basin's config (atomically, at metadata).
    async fn reconfigure_basin(&self, basin: &str, patch: BasinPatch) -> Result<BasinRecord> {
        Ok(self.catalog(CatalogCall::ReconfigureBasin { basin: basin.into(), patch }).await?.into_basin()?.0)
    }

    async fn list_basins(&self, prefix: &str, start_after: &str, limit: usize) -> Result<ListPage<BasinRecord>> {
        let call = CatalogCall::ListBasins { prefix: prefix.into(), start_after: start_after.into(), limit };
        self.catalog(call).await?.into_basins()
    }

    async fn delete_basin(&self, basin: &str) -> Result<()> {
        self.catalog(CatalogCall::DeleteBasin { basin: basin.into() }).await?.into_done()
    }

    async fn stream(&self, basin: &str, stream: &str) -> Result<StreamInfo> {
        Ok(self.catalog(CatalogCall::GetStream { basin: basin.into(), stream: stream.into() }).await?.into_stream()?.0)
    }

    /// Creates a stream; a retry with the same `request_token` returns it with `false`.
    async fn create_stream_idempotent(
        &self,
        basin: &str,
        stream: &str,
        config: StreamConfig,
        request_token: Option<&str>,
    ) -> Result<(StreamInfo, bool)> {
        let request_token = request_token.map(str::to_string);
        let call = CatalogCall::CreateStream { basin: basin.into(), stream: stream.into(), config, request_token };
        self.catalog(call).await?.into_stream()
    }

    /// Creates a stream; settings it leaves unset come from the basin's default.
    async fn create_stream(&self, basin: &str, stream: &str, config: StreamConfig) -> Result<StreamInfo> {
        Ok(self.create_stream_idempotent(basin, stream, config, None).await?.0)
    }

    /// Applies a patch to the stream's config (atomically, at metadata).
    async fn reconfigure_stream(&self, basin: &str, stream: &str, patch: StreamPatch) -> Result<StreamInfo> {
        let call = CatalogCall::ReconfigureStream { basin: basin.into(), stream: stream.into(), patch };
        Ok(self.catalog(call).await?.into_stream()?.0)
    }

    async fn list_streams(
        &self,
        basin: &str,
        prefix: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<ListPage<StreamSummary>> {
        let call = CatalogCall::ListStreams {
            basin: basin.into(),
            prefix: prefix.into(),
            start_after: start_after.into(),
            limit,
        };
        self.catalog(call).await?.into_streams()
    }

    /// The stream's compaction cursor: its records below this sequence number are in
    /// compacted objects (0 before any compaction).
    async fn compacted_through(&self, basin: &str, stream: &str) -> Result<u64> {
        let call = CatalogCall::CompactedThrough { basin: basin.into(), stream: stream.into() };
        self.catalog(call).await?.into_compacted_through()
    }

    /// The stream's idempotent producers whose state has not expired.
    async fn producers(&self, basin: &str, stream: &str) -> Result<Vec<crate::ProducerSummary>> {
        let call = CatalogCall::ListProducers { basin: basin.into(), stream: stream.into() };
        self.catalog(call).await?.into_producers()
    }

    /// Registers or renews a Kafka-serving agent for `ttl_ms` (0: it leaves); the live
    /// agents.
    async fn agent_heartbeat(&self, agent: AgentRecord, ttl_ms: u64) -> Result<AgentList> {
        self.catalog(CatalogCall::AgentHeartbeat { agent, ttl_ms }).await?.into_agents()
    }

    /// A Kafka transactional producer's call: the records of the ids it is about, after it.
    async fn transaction(&self, call: crate::TransactionCall) -> Result<Vec<crate::TransactionState>> {
        self.catalog(CatalogCall::Transaction(call)).await?.into_transactions()
    }

    async fn delete_stream(&self, basin: &str, stream: &str) -> Result<()> {
        self.catalog(CatalogCall::DeleteStream { basin: basin.into(), stream: stream.into() }).await?.into_done()
    }
}
