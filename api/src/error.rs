//! [`ApiError`]: the service's errors and the HTTP stack's own refusals, and the one place
//! they become an HTTP status and S2 JSON body or a gRPC status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use shale_gateway::GatewayError;
use shale_metadata_contract::MetadataError;
use shale_proto::ErrorCode;
use shale_reader::ReaderError;
use shale_service::ServiceError;

/// Every error a handler returns: the service's, or a refusal of the HTTP stack's own.
/// [`IntoResponse`] below and the `tonic::Status` conversion are the one place they
/// become statuses and bodies.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error("no such endpoint: {0}")]
    NoRoute(String),
    /// An S2 endpoint or option Shale does not serve: S2's 501 `not_implemented`.
    #[error("{0}")]
    NotImplemented(String),
    /// Refused by the HTTP stack before any handler ran (unknown method, body too large,
    /// a path that is not UTF-8): its own status, S2's JSON body.
    #[error("{message}")]
    Rejected { status: u16, message: String },
}

impl From<GatewayError> for ApiError {
    fn from(error: GatewayError) -> Self {
        ApiError::Service(error.into())
    }
}

impl From<ReaderError> for ApiError {
    fn from(error: ReaderError) -> Self {
        ApiError::Service(error.into())
    }
}

impl From<MetadataError> for ApiError {
    fn from(error: MetadataError) -> Self {
        ApiError::Service(error.into())
    }
}

impl ApiError {
    pub fn bad(message: impl Into<String>) -> Self {
        ApiError::Service(ServiceError::bad(message))
    }

    /// A query string that could not be read.
    pub fn bad_query(message: impl Into<String>) -> Self {
        ApiError::Service(ServiceError::unreadable(ErrorCode::BadQuery, message))
    }

    /// A JSON body that could not be read.
    pub fn bad_json(message: impl Into<String>) -> Self {
        ApiError::Service(ServiceError::unreadable(ErrorCode::BadJson, message))
    }

    /// A header that is missing or could not be read.
    pub fn bad_header(message: impl Into<String>) -> Self {
        ApiError::Service(ServiceError::unreadable(ErrorCode::BadHeader, message))
    }

    /// A protobuf body that could not be decoded.
    pub fn bad_proto(message: impl Into<String>) -> Self {
        ApiError::Service(ServiceError::unreadable(ErrorCode::BadProto, message))
    }

    pub fn http_status(&self) -> u16 {
        match self {
            ApiError::Rejected { status, .. } => *status,
            _ => self.code().http_status(),
        }
    }

    fn code(&self) -> ErrorCode {
        match self {
            ApiError::Service(e) => e.code(),
            ApiError::NoRoute(_) | ApiError::Rejected { status: 404, .. } => ErrorCode::NotFound,
            ApiError::NotImplemented(_) => ErrorCode::NotImplemented,
            ApiError::Rejected { status: 400..=499, .. } => ErrorCode::InvalidArgument,
            ApiError::Rejected { .. } => ErrorCode::Internal,
        }
    }

    fn metadata(&self) -> Option<&MetadataError> {
        match self {
            ApiError::Service(e) => e.metadata(),
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
            ApiError::Service(ServiceError::Reader(ReaderError::PastTail { tail })) => {
                json!({ "tail": { "seq_num": tail.seq_num, "timestamp": tail.timestamp } })
            }
            _ => json!({ "code": self.code().as_str(), "message": self.client_message() }),
        }
    }

    fn client_message(&self) -> String {
        match self {
            ApiError::Service(e) => e.client_message(),
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
        if status.is_server_error() && status != StatusCode::NOT_IMPLEMENTED {
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
