//! [`ApiError`]: every error the service answers, and the one place it becomes an HTTP
//! status and S2 JSON body or a gRPC status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use shale_gateway::GatewayError;
use shale_metadata::MetadataError;
use shale_proto::ErrorCode;
use shale_reader::ReaderError;

/// Every error an HTTP handler returns. [`IntoResponse`] below is the one place they
/// become statuses and bodies.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("no such endpoint: {0}")]
    NoRoute(String),
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
    /// Refused by the HTTP stack before any handler ran (unknown method, body too large,
    /// a path that is not UTF-8): its own status, S2's JSON body.
    #[error("{message}")]
    Rejected { status: u16, message: String },
}

impl ApiError {
    pub fn bad(message: impl Into<String>) -> Self {
        ApiError::BadRequest(message.into())
    }

    pub fn http_status(&self) -> u16 {
        match self {
            ApiError::Rejected { status, .. } => *status,
            _ => self.code().http_status(),
        }
    }

    fn code(&self) -> ErrorCode {
        match self {
            ApiError::BadRequest(_) => ErrorCode::InvalidArgument,
            ApiError::NoRoute(_) | ApiError::ConsumerNotFound(_) => ErrorCode::NotFound,
            ApiError::Gateway(e) => e.code(),
            ApiError::Reader(e) => e.code(),
            ApiError::Metadata(e) => e.code(),
            ApiError::WrongRole { .. } => ErrorCode::WrongRole,
            ApiError::Timeout(_) => ErrorCode::RequestTimeout,
            ApiError::ShuttingDown => ErrorCode::ShuttingDown,
            ApiError::Tables(_) => ErrorCode::Unavailable,
            ApiError::Overloaded(_) => ErrorCode::Overloaded,
            ApiError::Unauthenticated(_) => ErrorCode::Unauthenticated,
            ApiError::PermissionDenied(_) => ErrorCode::PermissionDenied,
            ApiError::Rejected { status: 404, .. } => ErrorCode::NotFound,
            ApiError::Rejected { status: 400..=499, .. } => ErrorCode::InvalidArgument,
            ApiError::Rejected { .. } => ErrorCode::Internal,
        }
    }

    fn metadata(&self) -> Option<&MetadataError> {
        match self {
            ApiError::Gateway(GatewayError::Metadata(e))
            | ApiError::Reader(ReaderError::Metadata(e))
            | ApiError::Metadata(e) => Some(e),
            _ => None,
        }
    }

    /// The JSON body: S2's condition and range shapes where S2 defines them, else
    /// `{"code", "message"}`.
    pub fn body(&self) -> serde_json::Value {
        let metadata = self.metadata();
        // An atomic append across streams (a Shale extension): which stream, and why.
        if let Some(MetadataError::AtomicMember { stream, error }) = metadata {
            let mut body = json!({ "code": self.code().as_str(), "message": self.client_message(), "stream": stream });
            if let Some((key, value)) = condition(error) {
                body[key] = value;
            }
            return body;
        }
        if let Some((key, value)) = metadata.and_then(condition) {
            return json!({ key: value });
        }
        match self {
            ApiError::Reader(ReaderError::PastTail { tail }) => {
                json!({ "tail": { "seq_num": tail.seq_num, "timestamp": tail.timestamp } })
            }
            _ => json!({ "code": self.code().as_str(), "message": self.client_message() }),
        }
    }

    /// The message a client gets: the error's text, except that a store error of
    /// metadata's (SlateDB's text, which for a local store names paths on the server's
    /// disk) is summarised; the full text is logged.
    fn client_message(&self) -> String {
        match self.metadata() {
            Some(MetadataError::Storage(_)) => {
                "metadata storage unavailable; the server log has the details".to_string()
            }
            _ => self.to_string(),
        }
    }
}

/// S2's shape of a failed append condition: the field and the stream's actual value.
fn condition(error: &MetadataError) -> Option<(&'static str, serde_json::Value)> {
    match error {
        MetadataError::SeqNumMismatch { actual, .. } => Some(("seq_num_mismatch", json!(actual))),
        MetadataError::FencingTokenMismatch { actual } => Some(("fencing_token_mismatch", json!(actual))),
        MetadataError::ProducerSeqMismatch { expected, .. } => Some(("producer_seq_mismatch", json!(expected))),
        _ => None,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::warn!(status = status.as_u16(), error = %self, "request failed");
        }
        (status, Json(self.body())).into_response()
    }
}

/// The domain of the `google.rpc.ErrorInfo` in gRPC errors.
pub const ERROR_DOMAIN: &str = "shale";

/// The gRPC face of the same mapping: the code from [`ErrorCode::grpc_code`], the
/// message, and, in the details (`grpc-status-details-bin`), a `google.rpc.Status`
/// with one `google.rpc.ErrorInfo`: reason the error code in upper case (`NOT_FOUND`,
/// `SEQ_NUM_MISMATCH`, ...), domain [`ERROR_DOMAIN`], and the HTTP API's JSON body under
/// the metadata key `json`.
impl From<ApiError> for tonic::Status {
    fn from(error: ApiError) -> Self {
        use tonic_types::{ErrorDetails, StatusExt};
        let code = tonic::Code::from_i32(error.code().grpc_code());
        let reason = error.code().as_str().to_ascii_uppercase();
        let metadata = std::collections::HashMap::from([("json".to_string(), error.body().to_string())]);
        let details = ErrorDetails::with_error_info(reason, ERROR_DOMAIN, metadata);
        tonic::Status::with_error_details(code, error.client_message(), details)
    }
}
