//! [`ServiceError`]: every error a service call answers, with its [`ErrorCode`]. Each
//! transport renders it once: `shale-api` as S2's JSON body or a gRPC status, `shale-kafka`
//! as Kafka error codes.

use shale_gateway::GatewayError;
use shale_metadata_contract::MetadataError;
use shale_proto::ErrorCode;
use shale_reader::ReaderError;

/// Every error the service answers.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    BadRequest(String),
    /// A part of the request that could not be read: `code` is one of S2's `bad_query`,
    /// `bad_json`, `bad_header`, `bad_proto`, `bad_frame`.
    #[error("{message}")]
    Unreadable { code: ErrorCode, message: String },
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    #[error(transparent)]
    Reader(#[from] ReaderError),
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    #[error("this is a {role} process; it does not serve {call}: send it to a {use_role}")]
    WrongRole { role: &'static str, call: &'static str, use_role: &'static str },
    #[error("no answer within {0:?}; a write may or may not have been applied")]
    Timeout(std::time::Duration),
    /// Too much is being handled at once; retry shortly.
    #[error("overloaded: {0}")]
    Overloaded(String),
    /// No token, or one that is unknown, revoked or expired.
    #[error("{0}")]
    Unauthenticated(String),
    /// The token does not permit the call; the message names what is missing.
    #[error("{0}")]
    PermissionDenied(String),
    #[error("consumer `{0}` has committed no position on this stream")]
    ConsumerNotFound(String),
    /// Reading a basin table's state failed.
    #[error(transparent)]
    Tables(#[from] shale_tables::TablesError),
    /// The process is stopping: live reads end with this; resume on another server.
    #[error("the server is shutting down; resume the read on another server or after its restart")]
    ShuttingDown,
}

impl ServiceError {
    pub fn bad(message: impl Into<String>) -> Self {
        ServiceError::BadRequest(message.into())
    }

    /// A part of the request that could not be read, under S2's code for that part.
    pub fn unreadable(code: ErrorCode, message: impl Into<String>) -> Self {
        ServiceError::Unreadable { code, message: message.into() }
    }

    /// The code every transport maps from.
    pub fn code(&self) -> ErrorCode {
        match self {
            ServiceError::BadRequest(_) => ErrorCode::InvalidArgument,
            ServiceError::Unreadable { code, .. } => *code,
            ServiceError::ConsumerNotFound(_) => ErrorCode::NotFound,
            ServiceError::Gateway(e) => e.code(),
            ServiceError::Reader(e) => e.code(),
            ServiceError::Metadata(e) => e.code(),
            ServiceError::WrongRole { .. } => ErrorCode::WrongRole,
            ServiceError::Timeout(_) => ErrorCode::RequestTimeout,
            ServiceError::ShuttingDown => ErrorCode::ShuttingDown,
            ServiceError::Tables(_) => ErrorCode::Unavailable,
            ServiceError::Overloaded(_) => ErrorCode::Overloaded,
            ServiceError::Unauthenticated(_) => ErrorCode::Unauthenticated,
            ServiceError::PermissionDenied(_) => ErrorCode::PermissionDenied,
        }
    }

    /// The metadata error underneath, wherever it came through.
    pub fn metadata(&self) -> Option<&MetadataError> {
        match self {
            ServiceError::Gateway(GatewayError::Metadata(e))
            | ServiceError::Reader(ReaderError::Metadata(e))
            | ServiceError::Metadata(e) => Some(e),
            _ => None,
        }
    }

    /// The message a client gets: the error's text, except that a store error of
    /// metadata's (SlateDB's text, which for a local store names paths on the server's
    /// disk) is summarised; the full text is logged.
    pub fn client_message(&self) -> String {
        match self.metadata() {
            Some(MetadataError::Storage(_)) => {
                "metadata storage unavailable; the server log has the details".to_string()
            }
            _ => self.to_string(),
        }
    }
}
