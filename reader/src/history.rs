//! Records below a stream's trim point that another tier still holds: the table tier
//! keeps history in Parquet after the log's retention removed it. A reader given a
//! [`History`] asks it for a read that starts below the trim point, and serves the log
//! from the trim point on.

use shale_proto::SequencedRecord;

use crate::ReaderError;

/// A read of history: records of one stream (the one created at `created_at_ms`) from
/// `from_seq`, below `before_seq` (the log's trim point), within the limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRead {
    pub basin: String,
    pub stream: String,
    pub created_at_ms: u64,
    pub from_seq: u64,
    pub before_seq: u64,
    pub count: u64,
    pub bytes: u64,
    /// Only records with timestamps below this (ms).
    pub until: Option<u64>,
}

/// Records a history read found, in sequence order and dense from the first, and
/// whether it stopped at `until`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistoryOutput {
    pub records: Vec<SequencedRecord>,
    pub reached_until: bool,
}

/// A tier that may hold records below a stream's trim point. None found (the stream's
/// basin does not serve reads from it, or it has nothing from `from_seq`) is an empty
/// output: the read goes on at the trim point.
#[async_trait::async_trait]
pub trait History: Send + Sync {
    async fn read(&self, read: &HistoryRead) -> Result<HistoryOutput, ReaderError>;
}
