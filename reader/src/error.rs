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
    #[error(transparent)]
    Segment(#[from] SegmentError),
    #[error(transparent)]
    Metadata(#[from] MetadataError),
}

impl ReaderError {
    /// The one place reader errors meet the transport code set.
    pub fn code(&self) -> ErrorCode {
        match self {
            ReaderError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            ReaderError::PastTail { .. } => ErrorCode::RangeNotSatisfiable,
            ReaderError::Fetch { .. } => ErrorCode::Unavailable,
            ReaderError::Segment(_) => ErrorCode::Internal,
            ReaderError::Metadata(e) => e.code(),
        }
    }
}
