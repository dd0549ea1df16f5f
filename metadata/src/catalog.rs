//! Basins and streams: create, get, list, reconfigure, delete.

use shale_metadata_contract::records;
use shale_proto::names;
use slatedb::config::DurabilityLevel;
use slatedb::WriteBatch;

use crate::{
    agenda, keys, BasinConfig, BasinPatch, BasinRecord, CatalogCall, CatalogReply, ListPage, Metadata, MetadataError,
    Result, Stored, StreamConfig, StreamInfo, StreamPatch, StreamRecord, StreamSummary,
};

/// Deleting a basin removes its stream keys in batches of this many.
const DELETE_BATCH: usize = 1000;

impl Metadata {
    /// Runs one management call: the single place each [`CatalogCall`] meets its logic.
    pub(crate) async fn run_catalog(&self, call: CatalogCall) -> Result<CatalogReply> {
        Ok(match call {
            CatalogCall::GetBasin { basin } => {
                CatalogReply::Basin { record: self.get_basin(&basin).await?, created: false }
            }
            CatalogCall::CreateBasin { basin, config, request_token } => {
                let (record, created) = self.apply_create_basin(&basin, config, request_token.as_deref()).await?;
                CatalogReply::Basin { record, created }
            }
            CatalogCall::ReconfigureBasin { basin, patch } => {
                CatalogReply::Basin { record: self.apply_reconfigure_basin(&basin, patch).await?, created: false }
            }
            CatalogCall::ListBasins { prefix, start_after, limit } => {
                CatalogReply::Basins(self.scan_basins(&prefix, &start_after, limit).await?)
            }
            CatalogCall::DeleteBasin { basin } => {
                self.apply_delete_basin(&basin).await?;
                CatalogReply::Done
            }
            CatalogCall::GetStream { basin, stream } => {
                CatalogReply::Stream { info: self.get_stream(&basin, &stream).await?, created: false }
            }
            CatalogCall::CreateStream { basin, stream, config, request_token } => {
                let (info, created) =
                    self.apply_create_stream(&basin, &stream, config, request_token.as_deref()).await?;
                CatalogReply::Stream { info, created }
            }
            CatalogCall::ReconfigureStream { basin, stream, patch } => CatalogReply::Stream {
                info: self.apply_reconfigure_stream(&basin, &stream, patch).await?,
                created: false,
            },
            CatalogCall::ListStreams { basin, prefix, start_after, limit } => {
                CatalogReply::Streams(self.scan_streams(&basin, &prefix, &start_after, limit).await?)
            }
            CatalogCall::DeleteStream { basin, stream } => {
                self.apply_delete_stream(&basin, &stream).await?;
                CatalogReply::Done
            }
            CatalogCall::PlanCompaction {
                shard,
                shards,
                min_age_ms,
                max_bytes,
                remerge_below,
                min_bytes,
                max_wait_ms,
            } => {
                let settings = crate::compaction::PlanSettings {
                    shard,
                    shards,
                    min_age_ms,
                    max_bytes,
                    remerge_below,
                    min_bytes,
                    max_wait_ms,
                };
                CatalogReply::CompactionPlan(self.plan_compaction(settings).await?)
            }
            CatalogCall::CompactedThrough { basin, stream } => {
                CatalogReply::CompactedThrough(self.compacted_through(&basin, &stream).await?)
            }
            CatalogCall::ListProducers { basin, stream } => {
                CatalogReply::Producers(self.list_producers(&basin, &stream).await?)
            }
            CatalogCall::CommitCompaction { segment_id, replacements } => {
                CatalogReply::CompactionAccepted(self.commit_compaction(segment_id, replacements).await?)
            }
            CatalogCall::PlanKeyCompaction { shard, shards } => {
                CatalogReply::KeyCompactionTargets(self.plan_key_compaction(shard, shards).await?)
            }
            CatalogCall::PlanDefragment { shard, shards, max_bytes } => {
                CatalogReply::CompactionPlan(self.plan_defragment(shard, shards, max_bytes).await?)
            }
            CatalogCall::KeyCompacted { stream_id, cursor } => {
                self.key_compacted(stream_id, cursor).await?;
                CatalogReply::Done
            }
            CatalogCall::IssueAccessToken { record } => {
                self.issue_access_token(record).await?;
                CatalogReply::Done
            }
            CatalogCall::AccessTokenBySecret { secret_hash } => {
                CatalogReply::AccessToken(self.access_token_by_secret(&secret_hash).await?)
            }
            CatalogCall::ListAccessTokens { prefix, start_after, limit } => {
                CatalogReply::AccessTokens(self.list_access_tokens(&prefix, &start_after, limit).await?)
            }
            CatalogCall::RevokeAccessToken { id } => {
                self.revoke_access_token(&id).await?;
                CatalogReply::Done
            }
            CatalogCall::CommitConsumer { basin, stream, name, seq_num, expected, commit_metadata } => {
                let position = self.commit_consumer(&basin, &stream, &name, seq_num, expected, commit_metadata).await?;
                CatalogReply::Consumer(Some(position))
            }
            CatalogCall::GetConsumer { basin, stream, name } => {
                CatalogReply::Consumer(self.consumer(&basin, &stream, &name).await?)
            }
            CatalogCall::DeleteConsumer { basin, stream, name } => {
                CatalogReply::Consumer(self.delete_consumer(&basin, &stream, &name).await?)
            }
            CatalogCall::ListConsumers { basin, stream, start_after, limit } => {
                CatalogReply::Consumers(self.list_consumers(&basin, &stream, &start_after, limit).await?)
            }
            CatalogCall::AgentHeartbeat { agent, ttl_ms } => {
                CatalogReply::Agents(self.agents.heartbeat(agent, ttl_ms, self.clock.now_ms()))
            }
            CatalogCall::Transaction(call) => CatalogReply::Transactions(self.transaction(call).await?),
        })
    }

    /// Creates a basin. When it exists and was created with the same `request_token` and
    /// config, this is a retry of that create: returns the basin and `false` (not newly
    /// created).
    pub(crate) async fn apply_create_basin(
        &self,
        name: &str,
        config: BasinConfig,
        request_token: Option<&str>,
    ) -> Result<(BasinRecord, bool)> {
        self.check_usable()?;
        names::validate_basin(name).map_err(MetadataError::InvalidArgument)?;
        config.validate().map_err(MetadataError::InvalidArgument)?;
        let writer = self.writer.lock().await;
        self.check_usable()?;
        let key = keys::basin(name);
        let request_token =
            request_token.map(|token| records::creation_key(token, &records::basin_config_to_wire(&config)));
        if let Some(existing) = self.get_latest::<BasinRecord>(&key).await? {
            self.settle(writer).await?;
            if request_token.is_some() && existing.request_token == request_token {
                return Ok((existing, false));
            }
            return Err(MetadataError::BasinExists(name.to_string()));
        }
        let record = BasinRecord { name: name.to_string(), created_at_ms: self.clock.now_ms(), config, request_token };
        let mut batch = WriteBatch::new();
        batch.put(&key, record.to_stored());
        self.write_durably(writer, batch).await?;
        Ok((record, true))
    }

    pub(crate) async fn get_basin(&self, name: &str) -> Result<BasinRecord> {
        self.check_usable()?;
        self.get_durable(&keys::basin(name)).await?.ok_or_else(|| MetadataError::BasinNotFound(name.to_string()))
    }

    /// Applies `patch` to the basin's latest config under the writer lock, so concurrent
    /// patches of different fields all take effect.
    pub(crate) async fn apply_reconfigure_basin(&self, name: &str, patch: BasinPatch) -> Result<BasinRecord> {
        self.check_usable()?;
        let writer = self.writer.lock().await;
        let mut record = match self.latest_basin(name).await {
            Ok(record) => record,
            Err(e) => return self.settle(writer).await.and(Err(e)),
        };
        let config = patch.apply(record.config.clone());
        if let Err(reason) = config.validate() {
            return self.settle(writer).await.and(Err(MetadataError::InvalidArgument(reason)));
        }
        record.config = config;
        let mut batch = WriteBatch::new();
        batch.put(keys::basin(name), record.to_stored());
        self.write_durably(writer, batch).await?;
        Ok(record)
    }

    /// The latest basin record, durable or not (writer only).
    async fn latest_basin(&self, name: &str) -> Result<BasinRecord> {
        self.get_latest(&keys::basin(name)).await?.ok_or_else(|| MetadataError::BasinNotFound(name.to_string()))
    }

    /// Lists basins whose names start with `prefix` and sort after `start_after`.
    pub(crate) async fn scan_basins(
        &self,
        prefix: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<ListPage<BasinRecord>> {
        self.check_usable()?;
        let scan_prefix = [keys::BASIN_PREFIX, prefix.as_bytes()].concat();
        let start = keys::basin(start_after);
        let page =
            self.scan_page(&scan_prefix, &start, limit, DurabilityLevel::Remote, BasinRecord::from_stored).await?;
        Ok(page)
    }

    /// Deletes a basin and every stream in it. Index entries and blocks of its streams
    /// become garbage for GC.
    pub(crate) async fn apply_delete_basin(&self, name: &str) -> Result<()> {
        self.check_usable()?;
        let writer = self.writer.lock().await;
        if let Err(e) = self.latest_basin(name).await {
            return self.settle(writer).await.and(Err(e));
        }
        loop {
            let prefix = keys::streams_of_basin(name);
            let page = self
                .scan_page(&prefix, &[], DELETE_BATCH, DurabilityLevel::Memory, |k, v| {
                    Ok((k.to_vec(), StreamRecord::from_stored(k, v)?))
                })
                .await?;
            if page.items.is_empty() {
                break;
            }
            let mut batch = WriteBatch::new();
            for (key, record) in &page.items {
                batch.delete(key);
                batch.put(keys::deleted_stream(record.id), []);
            }
            self.apply(batch).await?;
            writer.streams.invalidate_all();
            // Held across the wait: the next page is read from what this one left.
            self.durability.push(Vec::new()).wait().await?;
        }
        let mut batch = WriteBatch::new();
        batch.delete(keys::basin(name));
        self.write_durably(writer, batch).await
    }

    /// Creates a stream; a retry with the same `request_token` and config returns it with
    /// `false`.
    pub(crate) async fn apply_create_stream(
        &self,
        basin: &str,
        stream: &str,
        config: StreamConfig,
        request_token: Option<&str>,
    ) -> Result<(StreamInfo, bool)> {
        self.check_usable()?;
        names::validate_stream(stream).map_err(MetadataError::InvalidArgument)?;
        config.validate().map_err(MetadataError::InvalidArgument)?;
        let mut writer = self.writer.lock().await;
        self.check_usable()?;
        let basin_record = match self.latest_basin(basin).await {
            Ok(record) => record,
            Err(e) => return self.settle(writer).await.and(Err(e)),
        };
        let key = keys::stream(basin, stream);
        let request_token =
            request_token.map(|token| records::creation_key(token, &records::stream_config_to_wire(&config)));
        if let Some(existing) = self.latest_stream(&writer, basin, stream).await? {
            self.settle(writer).await?;
            if request_token.is_some() && existing.request_token == request_token {
                return Ok((
                    StreamInfo { basin: basin.to_string(), name: stream.to_string(), record: existing },
                    false,
                ));
            }
            return Err(MetadataError::StreamExists { basin: basin.to_string(), stream: stream.to_string() });
        }
        let id = writer.next_stream_id;
        let mut record = self.new_stream_record(id, config, &basin_record.config);
        record.request_token = request_token;
        let mut batch = WriteBatch::new();
        batch.put(&key, record.to_stored());
        batch.put(keys::NEXT_STREAM_ID, (id + 1).to_be_bytes());
        if let Some(due) = agenda::reclaim_due_at_creation(&record) {
            writer.scheduled.reclaim_at(&mut batch, &key, &record, due);
        }
        if let Err(e) = self.mark_key_compaction(&mut batch, &key, &record).await {
            return self.settle(writer).await.and(Err(e));
        }
        // Before the write: a failed write halts the instance, so the id is never reused.
        writer.next_stream_id = id + 1;
        writer.streams.insert((basin.to_string(), stream.to_string()), record.clone());
        self.write_durably(writer, batch).await?;
        Ok((StreamInfo { basin: basin.to_string(), name: stream.to_string(), record }, true))
    }

    pub(crate) fn new_stream_record(&self, id: u64, config: StreamConfig, basin: &BasinConfig) -> StreamRecord {
        let config = match &basin.default_stream_config {
            Some(defaults) => config.with_defaults(defaults),
            None => config,
        };
        StreamRecord {
            id,
            created_at_ms: self.clock.now_ms(),
            config,
            next_seq: 0,
            last_timestamp: 0,
            trim_point: 0,
            fencing_token: String::new(),
            record_count: 0,
            metered_bytes: 0,
            request_token: None,
        }
    }

    /// The stream's durable state, tail included.
    pub(crate) async fn get_stream(&self, basin: &str, stream: &str) -> Result<StreamInfo> {
        self.check_usable()?;
        let record: StreamRecord =
            self.get_durable(&keys::stream(basin, stream)).await?.ok_or_else(|| not_found(basin, stream))?;
        Ok(StreamInfo { basin: basin.to_string(), name: stream.to_string(), record })
    }

    /// Applies `patch` to the stream's latest config under the writer lock, so concurrent
    /// patches of different fields all take effect.
    pub(crate) async fn apply_reconfigure_stream(
        &self,
        basin: &str,
        stream: &str,
        patch: StreamPatch,
    ) -> Result<StreamInfo> {
        self.check_usable()?;
        let writer = self.writer.lock().await;
        let Some(mut record) = self.latest_stream(&writer, basin, stream).await? else {
            self.settle(writer).await?;
            return Err(not_found(basin, stream));
        };
        // Reset settings go back to the basin's defaults, read only when there are any.
        let basin_defaults = match patch.reset.is_empty() {
            true => None,
            false => match self.latest_basin(basin).await {
                Ok(record) => record.config.default_stream_config,
                Err(e) => return self.settle(writer).await.and(Err(e)),
            },
        };
        let config = patch.apply(record.config.clone(), basin_defaults.as_ref());
        if let Err(reason) = config.validate() {
            return self.settle(writer).await.and(Err(MetadataError::InvalidArgument(reason)));
        }
        record.config = config;
        let mut batch = WriteBatch::new();
        let key = keys::stream(basin, stream);
        batch.put(&key, record.to_stored());
        // A new retention or delete_on_empty rule may be due already: looked at next pass.
        writer.scheduled.reclaim_at(&mut batch, &key, &record, self.clock.now_ms());
        if let Err(e) = self.mark_key_compaction(&mut batch, &key, &record).await {
            return self.settle(writer).await.and(Err(e));
        }
        writer.streams.insert((basin.to_string(), stream.to_string()), record.clone());
        self.write_durably(writer, batch).await?;
        Ok(StreamInfo { basin: basin.to_string(), name: stream.to_string(), record })
    }

    /// Lists streams of `basin` whose names start with `prefix` and sort after
    /// `start_after`.
    pub(crate) async fn scan_streams(
        &self,
        basin: &str,
        prefix: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<ListPage<StreamSummary>> {
        self.check_usable()?;
        let scan_prefix = [keys::streams_of_basin(basin), prefix.as_bytes().to_vec()].concat();
        let start = keys::stream(basin, start_after);
        let name_from = keys::streams_of_basin(basin).len();
        self.scan_page(&scan_prefix, &start, limit, DurabilityLevel::Remote, |key, value| {
            let record = StreamRecord::from_stored(key, value)?;
            Ok(StreamSummary {
                name: String::from_utf8_lossy(&key[name_from..]).into_owned(),
                created_at_ms: record.created_at_ms,
                tail: record.next_seq,
            })
        })
        .await
    }

    /// Deletes a stream. Its index entries and blocks become garbage for GC; a stream
    /// created later under the same name starts empty.
    pub(crate) async fn apply_delete_stream(&self, basin: &str, stream: &str) -> Result<()> {
        self.check_usable()?;
        let writer = self.writer.lock().await;
        let Some(record) = self.latest_stream(&writer, basin, stream).await? else {
            self.settle(writer).await?;
            return Err(not_found(basin, stream));
        };
        let mut batch = WriteBatch::new();
        batch.delete(keys::stream(basin, stream));
        batch.put(keys::deleted_stream(record.id), []);
        writer.streams.invalidate(&(basin.to_string(), stream.to_string()));
        self.write_durably(writer, batch).await
    }

    /// Scans keys starting with `prefix`, strictly after `start_after_key` when that sorts
    /// inside the prefix, decoding up to `limit` items.
    pub(crate) async fn scan_page<T>(
        &self,
        prefix: &[u8],
        start_after_key: &[u8],
        limit: usize,
        durability_filter: DurabilityLevel,
        decode: impl Fn(&[u8], &[u8]) -> Result<T>,
    ) -> Result<ListPage<T>> {
        let end = keys::prefix_end(prefix);
        let start = if start_after_key > prefix { start_after_key.to_vec() } else { prefix.to_vec() };
        let options = Self::scan_options(durability_filter);
        let mut iter =
            self.db.scan_with_options(start.clone()..end, &options).await.map_err(|e| self.storage_error(e))?;
        let mut items = Vec::new();
        while let Some(kv) = iter.next().await.map_err(|e| self.storage_error(e))? {
            if start_after_key > prefix && kv.key.as_ref() == start_after_key {
                continue;
            }
            if items.len() == limit {
                return Ok(ListPage { items, has_more: true });
            }
            items.push(decode(&kv.key, &kv.value)?);
        }
        Ok(ListPage { items, has_more: false })
    }
}

fn not_found(basin: &str, stream: &str) -> MetadataError {
    MetadataError::StreamNotFound { basin: basin.to_string(), stream: stream.to_string() }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use shale_storage::object_store::memory::InMemory;
    use shale_storage::{Clock, SystemClock};

    use crate::{keys, Metadata, MetadataApi, Stored, StreamPatch, StreamRecord};

    /// A data directory written before records were protobuf: JSON values under `b/` and
    /// `s/`. It opens, reads, takes appends and PATCHes, and what it rewrites is protobuf.
    #[tokio::test]
    async fn records_stored_as_json_open_and_migrate_when_rewritten() {
        let store = Arc::new(InMemory::new());
        let db = slatedb::Db::open("metadata", store.clone()).await.expect("opens");
        db.put(keys::basin("old"), br#"{"name":"old","created_at_ms":1,"config":{"default_stream_config":null,"create_stream_on_append":false,"create_stream_on_read":true}}"#)
            .await
            .expect("writes");
        db.put(keys::stream("old", "s"), br#"{"id":1,"created_at_ms":2,"config":{"retention_policy":{"age":60}},"next_seq":5,"last_timestamp":9,"trim_point":0,"fencing_token":"","record_count":5,"metered_bytes":50}"#)
            .await
            .expect("writes");
        db.put(keys::NEXT_STREAM_ID, 2u64.to_be_bytes()).await.expect("writes");
        db.close().await.expect("closes");

        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let metadata = Metadata::open(store, "metadata", clock).await.expect("opens");
        assert!(metadata.basin("old").await.expect("basin reads").config.create_stream_on_read);
        let info = metadata.stream("old", "s").await.expect("stream reads");
        assert_eq!((info.record.id, info.record.next_seq, info.record.last_timestamp), (1, 5, 9));

        let patch = StreamPatch { storage_class: Some("express".into()), ..StreamPatch::default() };
        metadata.reconfigure_stream("old", "s", patch).await.expect("patches");
        let raw = metadata.db.get(keys::stream("old", "s")).await.expect("reads").expect("present");
        assert_ne!(raw.first(), Some(&b'{'), "a rewritten record is in the new format");
        let rewritten = StreamRecord::from_stored(b"s/old/s", &raw).expect("decodes");
        assert_eq!(rewritten.config.retention_policy, info.record.config.retention_policy);
        assert_eq!(rewritten.config.storage_class.as_deref(), Some("express"));
        assert_eq!(rewritten.next_seq, 5);
        let created = metadata.create_stream("old", "t", Default::default()).await.expect("creates");
        assert_eq!(created.record.id, 2, "stream ids continue from the stored counter");
        metadata.close().await.expect("closes");
    }
}
