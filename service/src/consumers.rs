//! Tracked consumers (a Shale extension): named positions per stream, committed as a
//! consumer reads, read back with their lag. Served by readers, which measure the lag:
//! records and metered bytes between the position and the tail, and the age of the
//! first unread record by this process's clock.

use std::time::Duration;

use shale_metadata_contract::{CatalogCall, ConsumerPosition, ListPage, StreamRecord};
use shale_reader::{ReadLimits, ReadRequest, ReadStart};

use super::{valid_stream, ListQuery, Service};
use crate::auth::Operation;
use crate::ServiceError;

/// How far a consumer is behind the tail.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ConsumerLag {
    pub records: u64,
    /// Metered bytes of the unread records; `None` when part of them was written before
    /// Shale recorded metered sizes in its index.
    pub bytes: Option<u64>,
    /// Now minus the timestamp of the first unread record (0 when caught up).
    pub seconds: f64,
}

/// A consumer's position and its lag.
#[derive(Clone, Debug, PartialEq)]
pub struct ConsumerView {
    pub position: ConsumerPosition,
    pub lag: ConsumerLag,
}

impl Service {
    /// Commits `name`'s position (at most the tail; with `match_seq_num`, only if the
    /// stored position, 0 when none, equals it), with `commit_metadata` beside it (a
    /// Kafka commit's metadata string; at most 4,096 bytes; empty for none).
    pub async fn commit_consumer(
        &self,
        basin: &str,
        stream: &str,
        name: &str,
        seq_num: u64,
        match_seq_num: Option<u64>,
        commit_metadata: String,
    ) -> Result<ConsumerView, ServiceError> {
        self.reader()?;
        let stream = self.allow_consumers(basin, stream)?;
        let call = CatalogCall::CommitConsumer {
            basin: basin.into(),
            stream,
            name: name.into(),
            seq_num,
            expected: match_seq_num,
            commit_metadata,
        };
        let position = self.metadata.catalog(call).await?.into_consumer()?;
        let position = position.ok_or_else(|| ServiceError::ConsumerNotFound(name.into()))?;
        let record = self.metadata.stream(basin, &position.stream).await?.record;
        self.view(position, &record).await
    }

    /// Removes a tracked consumer: whether there was one. What the caller may commit, it
    /// may remove.
    pub async fn delete_consumer(&self, basin: &str, stream: &str, name: &str) -> Result<bool, ServiceError> {
        self.reader()?;
        let stream = self.allow_consumers(basin, stream)?;
        let call = CatalogCall::DeleteConsumer { basin: basin.into(), stream, name: name.into() };
        Ok(self.metadata.catalog(call).await?.into_consumer()?.is_some())
    }

    /// `name`'s position on the stream without its lag (which reads the stream): `None`
    /// when it has none.
    pub async fn consumer_position(
        &self,
        basin: &str,
        stream: &str,
        name: &str,
    ) -> Result<Option<ConsumerPosition>, ServiceError> {
        self.reader()?;
        let stream = self.allow_consumers(basin, stream)?;
        let call = CatalogCall::GetConsumer { basin: basin.into(), stream, name: name.into() };
        Ok(self.metadata.catalog(call).await?.into_consumer()?)
    }

    /// The names of every consumer of the stream, without their lag.
    pub async fn consumer_names(&self, basin: &str, stream: &str) -> Result<Vec<String>, ServiceError> {
        self.reader()?;
        let stream = self.allow_consumers(basin, stream)?;
        let limit = ListQuery::default().limit();
        let mut names: Vec<String> = Vec::new();
        loop {
            let start_after = names.last().cloned().unwrap_or_default();
            let call = CatalogCall::ListConsumers { basin: basin.into(), stream: stream.clone(), start_after, limit };
            let page = self.metadata.catalog(call).await?.into_consumers()?;
            let more = page.has_more && !page.items.is_empty();
            names.extend(page.items.into_iter().map(|position| position.name));
            if !more {
                return Ok(names);
            }
        }
    }

    pub async fn consumer(&self, basin: &str, stream: &str, name: &str) -> Result<ConsumerView, ServiceError> {
        let position = self.consumer_position(basin, stream, name).await?;
        let position = position.ok_or_else(|| ServiceError::ConsumerNotFound(name.into()))?;
        let record = self.metadata.stream(basin, &position.stream).await?.record;
        self.view(position, &record).await
    }

    /// Metered bytes of `stream`'s records from its trim point to its tail, what a
    /// reader from its start has to read (Kafka's partition size). Where its index does
    /// not carry sizes (see [`ConsumerLag::bytes`]: entries key compaction rewrote), the
    /// bytes ever appended to it, which bound them. Needs `read` on the stream.
    pub async fn live_bytes(&self, basin: &str, stream: &str) -> Result<u64, ServiceError> {
        let stream = self.allow_consumers(basin, stream)?;
        self.live_bytes_of(basin, stream).await
    }

    /// S2's `storage` stream metric: the same bytes as [`Service::live_bytes`], under
    /// the `stream-metrics` operation instead of `read`.
    pub async fn stream_storage(&self, basin: &str, stream: &str) -> Result<u64, ServiceError> {
        valid_stream(basin, stream)?;
        let stream = self.allow_stream(Operation::StreamMetrics, basin, stream)?.into_owned();
        self.live_bytes_of(basin, stream).await
    }

    async fn live_bytes_of(&self, basin: &str, stream: String) -> Result<u64, ServiceError> {
        let record = self.metadata.stream(basin, &stream).await?.record;
        if record.trim_point == 0 {
            // Nothing trimmed: every byte appended is there, and nothing needs reading.
            return Ok(record.metered_bytes);
        }
        let start = ConsumerPosition {
            basin: basin.into(),
            stream,
            name: String::new(),
            seq_num: record.trim_point,
            updated_ms: 0,
            commit_metadata: String::new(),
        };
        Ok(self.lag(&start, &record).await?.bytes.unwrap_or(record.metered_bytes))
    }

    pub async fn list_consumers(
        &self,
        basin: &str,
        stream: &str,
        query: &ListQuery,
    ) -> Result<ListPage<ConsumerView>, ServiceError> {
        self.reader()?;
        let stream = self.allow_consumers(basin, stream)?;
        let call = CatalogCall::ListConsumers {
            basin: basin.into(),
            stream: stream.clone(),
            start_after: query.start_after.clone(),
            limit: query.limit(),
        };
        let page = self.metadata.catalog(call).await?.into_consumers()?;
        // One stream: its record (tail, metered total) serves every position's lag.
        let record = self.metadata.stream(basin, &stream).await?.record;
        let mut items = Vec::with_capacity(page.items.len());
        for position in page.items {
            items.push(self.view(position, &record).await?);
        }
        Ok(ListPage { items, has_more: page.has_more })
    }

    /// Consumers are the stream's readers: every call needs `read` on the stream.
    fn allow_consumers(&self, basin: &str, stream: &str) -> Result<String, ServiceError> {
        valid_stream(basin, stream)?;
        Ok(self.allow_stream(Operation::Read, basin, stream)?.into_owned())
    }

    async fn view(&self, mut position: ConsumerPosition, record: &StreamRecord) -> Result<ConsumerView, ServiceError> {
        let lag = self.lag(&position, record).await?;
        position.stream = self.access.shown_stream_name(position.stream);
        Ok(ConsumerView { position, lag })
    }

    /// The lag of a position: the tail and the stream's metered total from the stream's
    /// `record`; the unread part of the index entry holding the position read through the
    /// reader (its metered sizes, and the first unread record's timestamp).
    pub(crate) async fn lag(
        &self,
        position: &ConsumerPosition,
        record: &StreamRecord,
    ) -> Result<ConsumerLag, ServiceError> {
        if position.seq_num >= record.next_seq {
            return Ok(ConsumerLag { bytes: Some(0), ..ConsumerLag::default() });
        }
        let entry = self.metadata.entries_from(record.id, position.seq_num, 1).await?.into_iter().next();
        let reader = self.reader()?;
        let request = ReadRequest {
            basin: position.basin.clone(),
            stream: position.stream.clone(),
            start: ReadStart::SeqNum(position.seq_num),
            limits: ReadLimits {
                count: Some(entry.map_or(1, |e| e.end_seq().saturating_sub(position.seq_num).max(1))),
                ..ReadLimits::default()
            },
            until: None,
            clamp: true,
            wait: Duration::ZERO,
        };
        let mut cursor = reader.open(&position.basin, &position.stream).await?;
        let unread = reader.read_with(&request, &mut cursor).await?.records;
        let now = self.clock.now_ms();
        let seconds = unread.first().map_or(0.0, |r| now.saturating_sub(r.timestamp) as f64 / 1000.0);
        let bytes = entry.and_then(|entry| {
            let in_entry: u64 = unread.iter().filter(|r| r.seq_num < entry.end_seq()).map(|r| r.metered_bytes()).sum();
            Some(record.metered_bytes.saturating_sub(entry.metered_end?) + in_entry)
        });
        Ok(ConsumerLag { records: record.next_seq - position.seq_num, bytes, seconds })
    }
}
