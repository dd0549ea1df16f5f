//! The one code set all Shale errors map to, and its transport mapping. Handlers never
//! pick status codes themselves: they ask the error for its [`ErrorCode`]. The strings
//! are S2's error codes where S2 has one for the case (S2's SDKs decide retries from the
//! code and status together), Shale's own otherwise.

/// What went wrong, as a client should act on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The request breaks a rule or a limit (it was read whole).
    InvalidArgument,
    /// The query string could not be read: an unknown parameter, a value of the wrong type.
    BadQuery,
    /// The JSON body could not be read.
    BadJson,
    /// A header is missing or could not be read.
    BadHeader,
    /// The protobuf body could not be decoded.
    BadProto,
    /// An S2S session frame could not be read.
    BadFrame,
    /// The basin does not exist.
    BasinNotFound,
    /// The stream does not exist.
    StreamNotFound,
    /// Something else named does not exist: a tracked consumer, an endpoint.
    NotFound,
    /// The basin, stream or access token already exists.
    AlreadyExists,
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
    /// Every code, for checks that walk them all.
    pub const ALL: [ErrorCode; 26] = [
        ErrorCode::InvalidArgument,
        ErrorCode::BadQuery,
        ErrorCode::BadJson,
        ErrorCode::BadHeader,
        ErrorCode::BadProto,
        ErrorCode::BadFrame,
        ErrorCode::BasinNotFound,
        ErrorCode::StreamNotFound,
        ErrorCode::NotFound,
        ErrorCode::AlreadyExists,
        ErrorCode::SeqNumMismatch,
        ErrorCode::FencingTokenMismatch,
        ErrorCode::ProducerSeqMismatch,
        ErrorCode::RangeNotSatisfiable,
        ErrorCode::Overloaded,
        ErrorCode::Unavailable,
        ErrorCode::Indefinite,
        ErrorCode::Fenced,
        ErrorCode::RequestTimeout,
        ErrorCode::ShuttingDown,
        ErrorCode::Internal,
        ErrorCode::WrongRole,
        ErrorCode::Unauthenticated,
        ErrorCode::PermissionDenied,
        ErrorCode::AccessTokenNotFound,
        ErrorCode::NotImplemented,
    ];

    /// Whether what was named does not exist (a basin, a stream or anything else).
    pub fn is_not_found(self) -> bool {
        matches!(self, ErrorCode::BasinNotFound | ErrorCode::StreamNotFound | ErrorCode::NotFound)
    }

    /// The stable string clients see in `{"code": ...}`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "invalid",
            ErrorCode::BadQuery => "bad_query",
            ErrorCode::BadJson => "bad_json",
            ErrorCode::BadHeader => "bad_header",
            ErrorCode::BadProto => "bad_proto",
            ErrorCode::BadFrame => "bad_frame",
            ErrorCode::BasinNotFound => "basin_not_found",
            ErrorCode::StreamNotFound => "stream_not_found",
            ErrorCode::NotFound => "not_found",
            ErrorCode::AlreadyExists => "resource_already_exists",
            ErrorCode::SeqNumMismatch => "seq_num_mismatch",
            ErrorCode::FencingTokenMismatch => "fencing_token_mismatch",
            ErrorCode::ProducerSeqMismatch => "producer_seq_mismatch",
            ErrorCode::RangeNotSatisfiable => "range_not_satisfiable",
            ErrorCode::Overloaded => "rate_limited",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Indefinite => "indefinite",
            ErrorCode::Fenced => "fenced",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::ShuttingDown => "server_draining",
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
            ErrorCode::InvalidArgument
            | ErrorCode::BadQuery
            | ErrorCode::BadJson
            | ErrorCode::BadHeader
            | ErrorCode::BadProto
            | ErrorCode::BadFrame => 400,
            ErrorCode::BasinNotFound | ErrorCode::StreamNotFound | ErrorCode::NotFound => 404,
            ErrorCode::AlreadyExists => 409,
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
            ErrorCode::InvalidArgument
            | ErrorCode::BadQuery
            | ErrorCode::BadJson
            | ErrorCode::BadHeader
            | ErrorCode::BadProto
            | ErrorCode::BadFrame => 3,
            ErrorCode::BasinNotFound | ErrorCode::StreamNotFound | ErrorCode::NotFound => 5,
            ErrorCode::AlreadyExists => 6,
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
