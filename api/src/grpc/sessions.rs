//! The streaming RPCs: pipelined append sessions and following read sessions.

use futures::StreamExt;
use shale_proto::grpc as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use super::{convert, EventStream};
use crate::ApiError;
use shale_service::ServiceError;
use shale_service::{FollowEvent, ReadSessionRequest, Service, MAX_PENDING_APPENDS};

/// Acks in order; ends with an error status at the first failure.
pub fn append_session(
    service: &Service,
    inbound: Streaming<pb::AppendRequest>,
) -> Result<EventStream<pb::AppendAck>, ApiError> {
    let (acks_tx, acks) = mpsc::channel(MAX_PENDING_APPENDS);
    let inputs = inbound.map(|request| {
        request
            .map_err(|status| ServiceError::bad(format!("append session input: {}", status.message())))
            .and_then(convert::append_input)
    });
    service.append_session(inputs, acks_tx)?;
    let acks = ReceiverStream::new(acks).map(|ack| ack.map(convert::ack).map_err(|e| Status::from(ApiError::from(e))));
    Ok(Box::pin(acks))
}

/// Messages rendered ahead of the client while it receives earlier ones.
const READ_AHEAD_MESSAGES: usize = 16;

/// History then the live tail, heartbeats while idle; ends when a bounded read is done,
/// on error, or when the client goes away.
pub async fn read_session(
    service: &Service,
    request: ReadSessionRequest,
) -> Result<EventStream<pb::ReadSessionResponse>, ApiError> {
    let follower = service.read_session(request).await?;
    let messages = follower.run_ahead(READ_AHEAD_MESSAGES, |event| match event {
        FollowEvent::Batch(output, _) => Some(Ok(pb::ReadSessionResponse {
            event: Some(pb::read_session_response::Event::Batch(convert::read_response(&output.records, output.tail))),
        })),
        FollowEvent::Heartbeat(tail) => Some(Ok(pb::ReadSessionResponse {
            event: Some(pb::read_session_response::Event::Heartbeat(convert::position(tail))),
        })),
        FollowEvent::Done => None,
        FollowEvent::Error(error) => Some(Err(Status::from(ApiError::from(error)))),
    });
    Ok(Box::pin(messages))
}
