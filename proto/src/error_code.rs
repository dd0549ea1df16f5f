//! The one code set all Shale errors map to, and its transport mapping. Handlers never
//! pick status codes themselves: they ask the error for its [`ErrorCode`].

/// What went wrong, as a client should act on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The request is malformed or breaks a limit.
    InvalidArgument,
    /// The basin or stream does not exist.
    NotFound,
    /// The basin or stream already exists.
    AlreadyExists,
    /// The basin or stream is being deleted.
    Deleting,
    /// `match_seq_num` did not equal the stream's tail.
    SeqNumMismatch,
    /// `fencing_token` did not equal the stream's token.
    FencingTokenMismatch,
    /// `producer_seq` was not the producer's next sequence (a gap, or a duplicate whose
    /// ack is no longer kept).
    ProducerSeqMismatch,
    /// A read started past the tail and was not clamped.
    RangeNotSatisfiable,
    /// Too much in flight; retry later.
    Overloaded,
    /// Storage failed; the operation did not happen.
    Unavailable,
    /// The outcome is unknown: the write may or may not have happened.
    Indefinite,
    /// This metadata instance was fenced by a newer one.
    Fenced,
    /// No answer within the server's request timeout; a write may or may not have
    /// happened.
    RequestTimeout,
    /// The server is shutting down.
    ShuttingDown,
    /// A bug or corrupted data.
    Internal,
    /// This process runs a role that does not serve the call (e.g. an append sent to a
    /// reader).
    WrongRole,
    /// No credentials, or ones no token matches (unknown, revoked, expired).
    Unauthenticated,
    /// The token does not permit the operation on the resource.
    PermissionDenied,
    /// No access token has the id.
    AccessTokenNotFound,
    /// An S2 endpoint or option Shale does not serve (S2's own `not_implemented`).
    NotImplemented,
}

impl ErrorCode {
    /// The stable string clients see in `{"code": ...}`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "invalid",
            ErrorCode::NotFound => "not_found",
            ErrorCode::AlreadyExists => "already_exists",
            ErrorCode::Deleting => "deletion_pending",
            ErrorCode::SeqNumMismatch => "seq_num_mismatch",
            ErrorCode::FencingTokenMismatch => "fencing_token_mismatch",
            ErrorCode::ProducerSeqMismatch => "producer_seq_mismatch",
            ErrorCode::RangeNotSatisfiable => "range_not_satisfiable",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Indefinite => "indefinite",
            ErrorCode::Fenced => "fenced",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Internal => "internal",
            ErrorCode::WrongRole => "wrong_role",
            ErrorCode::Unauthenticated => "authn",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::AccessTokenNotFound => "access_token_not_found",
            ErrorCode::NotImplemented => "not_implemented",
        }
    }

    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidArgument => 400,
            ErrorCode::NotFound => 404,
            ErrorCode::AlreadyExists | ErrorCode::Deleting => 409,
            ErrorCode::SeqNumMismatch | ErrorCode::FencingTokenMismatch | ErrorCode::ProducerSeqMismatch => 412,
            ErrorCode::RangeNotSatisfiable => 416,
            ErrorCode::Overloaded => 429,
            ErrorCode::Unavailable | ErrorCode::Fenced | ErrorCode::ShuttingDown => 503,
            ErrorCode::Indefinite => 504,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::Internal => 500,
            ErrorCode::WrongRole => 421,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::PermissionDenied => 403,
            ErrorCode::AccessTokenNotFound => 404,
            ErrorCode::NotImplemented => 501,
        }
    }

    /// The gRPC status code number (`tonic::Code as i32`).
    pub fn grpc_code(self) -> i32 {
        match self {
            ErrorCode::InvalidArgument => 3,
            ErrorCode::NotFound => 5,
            ErrorCode::AlreadyExists => 6,
            ErrorCode::Deleting => 9,
            ErrorCode::SeqNumMismatch | ErrorCode::FencingTokenMismatch | ErrorCode::ProducerSeqMismatch => 9,
            ErrorCode::RangeNotSatisfiable => 11,
            ErrorCode::Overloaded => 8,
            ErrorCode::Unavailable | ErrorCode::Fenced | ErrorCode::ShuttingDown => 14,
            ErrorCode::Indefinite | ErrorCode::RequestTimeout => 4,
            ErrorCode::Internal => 13,
            ErrorCode::WrongRole => 12,
            ErrorCode::Unauthenticated => 16,
            ErrorCode::PermissionDenied => 7,
            ErrorCode::AccessTokenNotFound => 5,
            ErrorCode::NotImplemented => 12,
        }
    }
}
