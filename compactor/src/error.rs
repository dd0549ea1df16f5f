use shale_metadata_contract::MetadataError;
use shale_proto::SegmentError;

/// Everything a compaction pass can fail with. A failed pass leaves the index as it was;
/// an object it uploaded and never committed is an orphan that collection deletes.
#[derive(Debug, thiserror::Error)]
pub enum CompactorError {
    #[error("compaction store request failed: object=`{object}`: {reason}")]
    Store { object: String, reason: String },
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// The merge task panicked or was cancelled (the runtime is shutting down).
    #[error("compaction merge did not finish: {0}")]
    Merge(String),
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// Where the table tier holds a stream through could not be read.
    #[error("reading the table tier's position: {0}")]
    TableTier(String),
}
