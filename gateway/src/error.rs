use shale_metadata_contract::MetadataError;
use shale_proto::ErrorCode;

/// Everything an append can fail with.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("invalid append: {0}")]
    InvalidArgument(String),
    #[error("gateway overloaded: {inflight_bytes} bytes in flight, limit {limit}")]
    Overloaded { inflight_bytes: usize, limit: usize },
    #[error("segment upload failed: object=`{object}`: {reason}")]
    Upload { object: String, reason: String },
    #[error("an earlier append to stream `{stream}` failed; this one was not committed")]
    EarlierAppendFailed { stream: String },
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    #[error("gateway is shutting down")]
    ShuttingDown,
    /// The append's answer was lost inside the gateway (its pipeline stopped without
    /// answering): its commit may or may not have happened.
    #[error("the gateway stopped before the append's commit was answered; it may or may not have been applied")]
    Unanswered,
}

impl GatewayError {
    /// The one place gateway errors meet the transport code set.
    pub fn code(&self) -> ErrorCode {
        match self {
            GatewayError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            GatewayError::Overloaded { .. } => ErrorCode::Overloaded,
            GatewayError::Upload { .. } | GatewayError::EarlierAppendFailed { .. } => ErrorCode::Unavailable,
            GatewayError::Metadata(e) => e.code(),
            GatewayError::ShuttingDown => ErrorCode::ShuttingDown,
            GatewayError::Unanswered => ErrorCode::Indefinite,
        }
    }
}

/// Errors are handed to every caller of a failed segment, so they must be cloneable;
/// metadata errors are flattened to their message where they cannot be cloned.
impl Clone for GatewayError {
    fn clone(&self) -> Self {
        match self {
            GatewayError::InvalidArgument(m) => GatewayError::InvalidArgument(m.clone()),
            GatewayError::Overloaded { inflight_bytes, limit } => {
                GatewayError::Overloaded { inflight_bytes: *inflight_bytes, limit: *limit }
            }
            GatewayError::Upload { object, reason } => {
                GatewayError::Upload { object: object.clone(), reason: reason.clone() }
            }
            GatewayError::EarlierAppendFailed { stream } => {
                GatewayError::EarlierAppendFailed { stream: stream.clone() }
            }
            GatewayError::Metadata(e) => GatewayError::Metadata(e.clone()),
            GatewayError::ShuttingDown => GatewayError::ShuttingDown,
            GatewayError::Unanswered => GatewayError::Unanswered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// S2's SDKs retry `server_draining` as an error with no effect; only a refusal at
    /// submission may say so, never an answer lost after the append entered the pipeline.
    #[test]
    fn only_a_refused_submission_says_the_gateway_is_draining() {
        assert_eq!(GatewayError::ShuttingDown.code().as_str(), "server_draining");
        assert_eq!(GatewayError::Unanswered.code(), ErrorCode::Indefinite);
    }
}
