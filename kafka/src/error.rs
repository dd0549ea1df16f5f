//! [`KafkaError`], what ends a connection or the listener, and [`code_of`], the one place
//! a service error becomes a Kafka error code.

use kafka_protocol::ResponseError;
use shale_metadata_contract::{MetadataError, TransactionRefusal};
use shale_proto::ErrorCode;
use shale_service::ServiceError;

/// What stops the listener or closes one connection. Errors a client can act on are
/// answered in the response's error codes instead (see [`code_of`]).
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    #[error("kafka settings: {0}")]
    Config(String),
    #[error("kafka socket: {0}")]
    Io(#[from] std::io::Error),
    /// A frame whose length is negative or past `max_request_bytes`.
    #[error("kafka frame of {len} bytes is outside 0..={max}")]
    FrameTooLarge { len: i64, max: usize },
    /// A request that does not decode at its version.
    #[error("malformed kafka request: {0}")]
    Malformed(String),
    #[error("encoding a kafka response: {0}")]
    Encode(String),
    /// A login that failed, a request before logging in, or a caller no longer let in.
    #[error("kafka client not let in: {0}")]
    Refused(String),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

/// Kafka's error code for a failed service call.
pub fn code_of(error: &ServiceError) -> ResponseError {
    if let Some(MetadataError::ProducerSeqMismatch { expected, got }) = error.metadata() {
        return if got < expected {
            ResponseError::DuplicateSequenceNumber
        } else {
            ResponseError::OutOfOrderSequenceNumber
        };
    }
    if let Some(MetadataError::Transaction { refusal, .. }) = error.metadata() {
        return match refusal {
            TransactionRefusal::ProducerFenced => ResponseError::ProducerFenced,
            TransactionRefusal::InvalidState => ResponseError::InvalidTxnState,
            TransactionRefusal::UnknownProducer => ResponseError::InvalidProducerIdMapping,
        };
    }
    match error.code() {
        ErrorCode::InvalidArgument
        | ErrorCode::BadQuery
        | ErrorCode::BadJson
        | ErrorCode::BadHeader
        | ErrorCode::BadProto
        | ErrorCode::BadFrame => ResponseError::InvalidRequest,
        code if code.is_not_found() => ResponseError::UnknownTopicOrPartition,
        ErrorCode::AlreadyExists => ResponseError::TopicAlreadyExists,
        ErrorCode::SeqNumMismatch | ErrorCode::FencingTokenMismatch => ResponseError::InvalidRecord,
        ErrorCode::ProducerSeqMismatch => ResponseError::OutOfOrderSequenceNumber,
        ErrorCode::RangeNotSatisfiable => ResponseError::OffsetOutOfRange,
        ErrorCode::Overloaded => ResponseError::ThrottlingQuotaExceeded,
        ErrorCode::Unavailable | ErrorCode::Fenced | ErrorCode::ShuttingDown | ErrorCode::WrongRole => {
            ResponseError::NotLeaderOrFollower
        }
        ErrorCode::Indefinite | ErrorCode::RequestTimeout => ResponseError::RequestTimedOut,
        ErrorCode::Unauthenticated => ResponseError::SaslAuthenticationFailed,
        ErrorCode::PermissionDenied => ResponseError::TopicAuthorizationFailed,
        _ => ResponseError::UnknownServerError,
    }
}

/// [`code_of`] as the `i16` responses carry.
pub fn code(error: &ServiceError) -> i16 {
    code_of(error).code()
}
