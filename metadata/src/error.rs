use shale_proto::ErrorCode;

/// Everything the metadata service can fail with.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("basin `{0}` not found")]
    BasinNotFound(String),
    #[error("basin `{0}` already exists")]
    BasinExists(String),
    #[error("stream `{stream}` not found in basin `{basin}`")]
    StreamNotFound { basin: String, stream: String },
    #[error("stream `{stream}` already exists in basin `{basin}`")]
    StreamExists { basin: String, stream: String },
    #[error("sequence number mismatch: expected {expected}, tail is {actual}")]
    SeqNumMismatch { expected: u64, actual: u64 },
    #[error("fencing token mismatch: stream's token is `{actual}`")]
    FencingTokenMismatch { actual: String },
    #[error("invalid request: {0}")]
    InvalidArgument(String),
    #[error("an earlier append to stream `{stream}` in basin `{basin}` failed; this one was not committed")]
    EarlierAppendFailed { basin: String, stream: String },
    #[error("another member of the atomic group failed: {0}")]
    AtomicGroupFailed(String),
    #[error("metadata instance was fenced by a newer one")]
    Fenced,
    #[error("commit outcome unknown: {0}")]
    Indefinite(String),
    #[error("metadata storage unavailable: {0}")]
    Storage(#[from] slatedb::Error),
    /// No live metadata answered, or the call was refused before it did anything.
    #[error("metadata unavailable: {0}")]
    Unavailable(String),
    /// This instance does not hold the leader lease (starting up, or taken over).
    #[error("this metadata instance is not the leader")]
    NotLeader,
    #[error("metadata is stopped after a failed durable write; restart to recover")]
    Stopped,
    #[error("corrupt metadata at key `{key}`: {reason}")]
    Corrupt { key: String, reason: String },
}

impl MetadataError {
    /// The one place metadata errors meet the transport code set.
    pub fn code(&self) -> ErrorCode {
        match self {
            MetadataError::BasinNotFound(_) | MetadataError::StreamNotFound { .. } => ErrorCode::NotFound,
            MetadataError::BasinExists(_) | MetadataError::StreamExists { .. } => ErrorCode::AlreadyExists,
            MetadataError::SeqNumMismatch { .. } => ErrorCode::SeqNumMismatch,
            MetadataError::FencingTokenMismatch { .. } => ErrorCode::FencingTokenMismatch,
            MetadataError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            MetadataError::AtomicGroupFailed(_) => ErrorCode::SeqNumMismatch,
            MetadataError::Fenced => ErrorCode::Fenced,
            MetadataError::Indefinite(_) => ErrorCode::Indefinite,
            MetadataError::Storage(_)
            | MetadataError::EarlierAppendFailed { .. }
            | MetadataError::Stopped
            | MetadataError::Unavailable(_)
            | MetadataError::NotLeader => ErrorCode::Unavailable,
            MetadataError::Corrupt { .. } => ErrorCode::Internal,
        }
    }

    /// Whether slatedb reports that a newer writer fenced this one.
    pub(crate) fn is_fenced(error: &slatedb::Error) -> bool {
        matches!(error.kind(), slatedb::ErrorKind::Closed(slatedb::CloseReason::Fenced))
    }
}

/// Storage errors cannot be cloned; their copies keep the message as `Unavailable`.
impl Clone for MetadataError {
    fn clone(&self) -> Self {
        match self {
            MetadataError::BasinNotFound(b) => MetadataError::BasinNotFound(b.clone()),
            MetadataError::BasinExists(b) => MetadataError::BasinExists(b.clone()),
            MetadataError::StreamNotFound { basin, stream } => {
                MetadataError::StreamNotFound { basin: basin.clone(), stream: stream.clone() }
            }
            MetadataError::StreamExists { basin, stream } => {
                MetadataError::StreamExists { basin: basin.clone(), stream: stream.clone() }
            }
            MetadataError::SeqNumMismatch { expected, actual } => {
                MetadataError::SeqNumMismatch { expected: *expected, actual: *actual }
            }
            MetadataError::FencingTokenMismatch { actual } => {
                MetadataError::FencingTokenMismatch { actual: actual.clone() }
            }
            MetadataError::InvalidArgument(m) => MetadataError::InvalidArgument(m.clone()),
            MetadataError::AtomicGroupFailed(m) => MetadataError::AtomicGroupFailed(m.clone()),
            MetadataError::EarlierAppendFailed { basin, stream } => {
                MetadataError::EarlierAppendFailed { basin: basin.clone(), stream: stream.clone() }
            }
            MetadataError::Fenced => MetadataError::Fenced,
            MetadataError::Indefinite(m) => MetadataError::Indefinite(m.clone()),
            MetadataError::Storage(e) => MetadataError::Unavailable(e.to_string()),
            MetadataError::Unavailable(m) => MetadataError::Unavailable(m.clone()),
            MetadataError::NotLeader => MetadataError::NotLeader,
            MetadataError::Stopped => MetadataError::Stopped,
            MetadataError::Corrupt { key, reason } => {
                MetadataError::Corrupt { key: key.clone(), reason: reason.clone() }
            }
        }
    }
}

pub type Result<T, E = MetadataError> = std::result::Result<T, E>;
