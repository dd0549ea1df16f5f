//! Tracked consumers: a named position per stream (`n/<stream id><name>`), committed
//! by the consumer as it reads, read back to resume and to measure lag. Removed with
//! the stream.

use slatedb::config::DurabilityLevel;
use slatedb::WriteBatch;

use crate::{keys, ConsumerPosition, ListPage, Metadata, MetadataError, Result, Stored};

impl Metadata {
    /// Stores `name`'s position on the stream, with `commit_metadata` beside it: at most
    /// its tail; with `expected`, only if the stored position (0 when none) equals it.
    pub async fn commit_consumer(
        &self,
        basin: &str,
        stream: &str,
        name: &str,
        seq_num: u64,
        expected: Option<u64>,
        commit_metadata: String,
    ) -> Result<ConsumerPosition> {
        self.check_usable()?;
        if name.is_empty() || name.len() > ConsumerPosition::MAX_NAME_BYTES {
            let max = ConsumerPosition::MAX_NAME_BYTES;
            return Err(MetadataError::InvalidArgument(format!("a consumer name is 1 to {max} bytes")));
        }
        check_commit_metadata(&commit_metadata)?;
        let writer = self.writer.lock().await;
        self.check_usable()?;
        let not_found = || MetadataError::StreamNotFound { basin: basin.into(), stream: stream.into() };
        let refusal = match self.latest_stream(&writer, basin, stream).await? {
            None => Err(not_found()),
            Some(record) if seq_num > record.next_seq => Err(MetadataError::InvalidArgument(format!(
                "consumer position {seq_num} is past the tail ({})",
                record.next_seq
            ))),
            Some(record) => Ok(record.id),
        };
        let stream_id = match refusal {
            Ok(id) => id,
            Err(error) => {
                self.settle(writer).await?;
                return Err(error);
            }
        };
        let key = keys::consumer(stream_id, name);
        if let Some(expected) = expected {
            let actual = self.get_latest::<ConsumerPosition>(&key).await?.map_or(0, |p| p.seq_num);
            if actual != expected {
                self.settle(writer).await?;
                return Err(MetadataError::SeqNumMismatch { expected, actual });
            }
        }
        let position = ConsumerPosition {
            basin: basin.into(),
            stream: stream.into(),
            name: name.into(),
            seq_num,
            updated_ms: self.clock.now_ms(),
            commit_metadata,
        };
        let mut batch = WriteBatch::new();
        batch.put(&key, position.to_stored());
        self.write_durably(writer, batch).await?;
        Ok(position)
    }

    /// Removes `name`'s position on the stream and returns it; `None` when it had none.
    pub async fn delete_consumer(&self, basin: &str, stream: &str, name: &str) -> Result<Option<ConsumerPosition>> {
        self.check_usable()?;
        let writer = self.writer.lock().await;
        self.check_usable()?;
        let stream_id = match self.latest_stream(&writer, basin, stream).await? {
            Some(record) => record.id,
            None => {
                self.settle(writer).await?;
                return Err(MetadataError::StreamNotFound { basin: basin.into(), stream: stream.into() });
            }
        };
        let key = keys::consumer(stream_id, name);
        let Some(removed) = self.get_latest::<ConsumerPosition>(&key).await? else {
            self.settle(writer).await?;
            return Ok(None);
        };
        let mut batch = WriteBatch::new();
        batch.delete(&key);
        self.write_durably(writer, batch).await?;
        Ok(Some(removed))
    }

    /// `name`'s durable position on the stream, if it committed one.
    pub async fn consumer(&self, basin: &str, stream: &str, name: &str) -> Result<Option<ConsumerPosition>> {
        self.check_usable()?;
        let stream_id = self.durable_stream_id(basin, stream).await?;
        self.get_durable(&keys::consumer(stream_id, name)).await
    }

    /// A stream's consumers by name after `start_after`; with an empty `basin`, every
    /// stream's (in stream id order).
    pub async fn list_consumers(
        &self,
        basin: &str,
        stream: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<ListPage<ConsumerPosition>> {
        self.check_usable()?;
        let (prefix, start) = if basin.is_empty() {
            (b"n/".to_vec(), Vec::new())
        } else {
            let stream_id = self.durable_stream_id(basin, stream).await?;
            (keys::of_stream(b"n/", stream_id), keys::consumer(stream_id, start_after))
        };
        self.scan_page(&prefix, &start, limit, DurabilityLevel::Remote, ConsumerPosition::from_stored).await
    }

    async fn durable_stream_id(&self, basin: &str, stream: &str) -> Result<u64> {
        Ok(self.get_stream(basin, stream).await?.record.id)
    }
}

/// Refuses commit metadata longer than [`ConsumerPosition::MAX_COMMIT_METADATA_BYTES`].
pub(crate) fn check_commit_metadata(commit_metadata: &str) -> Result<()> {
    let max = ConsumerPosition::MAX_COMMIT_METADATA_BYTES;
    if commit_metadata.len() > max {
        let len = commit_metadata.len();
        return Err(MetadataError::InvalidArgument(format!("commit metadata of {len} bytes is over {max}")));
    }
    Ok(())
}
