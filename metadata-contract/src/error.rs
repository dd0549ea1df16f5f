//! [`MetadataError`]: everything a metadata call can fail with, on either side of the
//! internal RPC, and its one mapping to the shared code set.

use std::sync::Arc;

use shale_proto::ErrorCode;

/// Everything the metadata service can fail with.
#[derive(Clone, Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("basin `{0}` not found")]
    BasinNotFound(String),
    #[error("basin `{0}` already exists")]
    BasinExists(String),
    #[error("stream `{stream}` not found in basin `{basin}`")]
    StreamNotFound { basin: String, stream: String },
    #[error("stream `{stream}` already exists in basin `{basin}`")]
    StreamExists { basin: String, stream: String },
    #[error("access token `{0}` already exists")]
    AccessTokenExists(String),
    #[error("access token `{0}` not found")]
    AccessTokenNotFound(String),
    #[error("sequence number mismatch: expected {expected}, tail is {actual}")]
    SeqNumMismatch { expected: u64, actual: u64 },
    #[error("fencing token mismatch: stream's token is `{actual}`")]
    FencingTokenMismatch { actual: String },
    /// An idempotent producer's append out of order: `got` skips ahead of `expected`, or
    /// is a duplicate older than the acks kept (it was applied; its ack is gone).
    #[error("producer sequence mismatch: expected {expected}, got {got}")]
    ProducerSeqMismatch { expected: u64, got: u64 },
    #[error("invalid request: {0}")]
    InvalidArgument(String),
    #[error("an earlier append to stream `{stream}` in basin `{basin}` failed; this one was not committed")]
    EarlierAppendFailed { basin: String, stream: String },
    #[error("another member of the atomic group failed: {0}")]
    AtomicGroupFailed(String),
    /// One stream of an atomic append across streams failed (so none was applied).
    #[error("stream `{stream}`: {error}")]
    AtomicMember { stream: String, error: Box<MetadataError> },
    /// A Kafka transaction call that does not fit the transactional id's state.
    #[error("transaction refused: {message}")]
    Transaction { refusal: crate::TransactionRefusal, message: String },
    #[error("metadata instance was fenced by a newer one")]
    Fenced,
    #[error("commit outcome unknown: {0}")]
    Indefinite(String),
    #[error("metadata storage unavailable: {0}")]
    Storage(#[source] Arc<dyn std::error::Error + Send + Sync>),
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
            MetadataError::BasinNotFound(_) => ErrorCode::BasinNotFound,
            MetadataError::StreamNotFound { .. } => ErrorCode::StreamNotFound,
            MetadataError::BasinExists(_)
            | MetadataError::StreamExists { .. }
            | MetadataError::AccessTokenExists(_) => ErrorCode::AlreadyExists,
            MetadataError::AccessTokenNotFound(_) => ErrorCode::AccessTokenNotFound,
            MetadataError::SeqNumMismatch { .. } => ErrorCode::SeqNumMismatch,
            MetadataError::FencingTokenMismatch { .. } => ErrorCode::FencingTokenMismatch,
            MetadataError::ProducerSeqMismatch { .. } => ErrorCode::ProducerSeqMismatch,
            MetadataError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            MetadataError::AtomicGroupFailed(_) => ErrorCode::SeqNumMismatch,
            MetadataError::Transaction { refusal: crate::TransactionRefusal::ProducerFenced, .. } => {
                ErrorCode::FencingTokenMismatch
            }
            MetadataError::Transaction { .. } => ErrorCode::InvalidArgument,
            MetadataError::Fenced => ErrorCode::Fenced,
            MetadataError::Indefinite(_) => ErrorCode::Indefinite,
            MetadataError::Storage(_)
            | MetadataError::EarlierAppendFailed { .. }
            | MetadataError::Stopped
            | MetadataError::Unavailable(_)
            | MetadataError::NotLeader => ErrorCode::Unavailable,
            MetadataError::Corrupt { .. } => ErrorCode::Internal,
            MetadataError::AtomicMember { error, .. } => error.code(),
        }
    }

    /// A failure of the store under metadata, kept whole as the source.
    pub fn storage(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        MetadataError::Storage(Arc::new(error))
    }
}

pub type Result<T, E = MetadataError> = std::result::Result<T, E>;
