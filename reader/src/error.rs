use shale_metadata_contract::{MetadataError, Position};
use shale_proto::{ErrorCode, SegmentError};

/// Everything a read can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ReaderError {
    #[error("invalid read: {0}")]
    InvalidArgument(String),
    #[error("read starts past the tail at {}", tail.seq_num)]
    PastTail { tail: Position },
    #[error("segment fetch failed: object=`{object}`: {reason}")]
    Fetch { object: String, reason: String },
    /// The object an index entry named is gone: its records were trimmed, expired or
    /// deleted (or rewritten elsewhere) after the entry was looked up.
    #[error("segment object gone: object=`{object}`")]
    Gone { object: String },
    #[error(transparent)]
    Segment(#[from] SegmentError),
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// The history tier (the table tier) failed to read.
    #[error("history read failed: {0}")]
    History(String),
}

impl ReaderError {
    /// The one place reader errors meet the transport code set.
    pub fn code(&self) -> ErrorCode {
        match self {
            ReaderError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            ReaderError::PastTail { .. } => ErrorCode::RangeNotSatisfiable,
            ReaderError::Fetch { .. } | ReaderError::Gone { .. } | ReaderError::History(_) => ErrorCode::Unavailable,
            ReaderError::Segment(_) => ErrorCode::Internal,
            ReaderError::Metadata(e) => e.code(),
        }
    }
}
