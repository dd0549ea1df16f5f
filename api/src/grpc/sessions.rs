//! The streaming RPCs: pipelined append sessions and following read sessions.

use futures::StreamExt;
use shale_proto::grpc as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use super::{convert, EventStream};
use crate::service::{FollowEvent, ReadSessionRequest, Service, MAX_PENDING_APPENDS};
use crate::ApiError;

/// Acks in order; ends with an error status at the first failure.
pub fn append_session(
    service: &Service,
    inbound: Streaming<pb::AppendRequest>,
) -> Result<EventStream<pb::AppendAck>, ApiError> {
    let (acks_tx, acks) = mpsc::channel(MAX_PENDING_APPENDS);
    let inputs = inbound.map(|request| {
        request
            .map(convert::append_input)
            .map_err(|status| ApiError::bad(format!("append session input: {}", status.message())))
    });
    service.append_session(inputs, acks_tx)?;
    let acks = ReceiverStream::new(acks).map(|ack| ack.map(convert::ack).map_err(Status::from));
    Ok(Box::pin(acks))
}

/// History then the live tail, heartbeats while idle; ends when a bounded read is done,
/// on error, or when the client goes away.
pub async fn read_session(
    service: &Service,
    request: ReadSessionRequest,
) -> Result<EventStream<pb::ReadSessionResponse>, ApiError> {
    let mut follower = service.read_session(request).await?;
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        while let Some(event) = follower.next().await {
            let message = match event {
                FollowEvent::Batch(output) => Ok(pb::ReadSessionResponse {
                    event: Some(pb::read_session_response::Event::Batch(convert::read_response(
                        &output.records,
                        output.tail,
                    ))),
                }),
                FollowEvent::Heartbeat(tail) => Ok(pb::ReadSessionResponse {
                    event: Some(pb::read_session_response::Event::Heartbeat(convert::position(tail))),
                }),
                FollowEvent::Done => break,
                FollowEvent::Error(error) => Err(Status::from(error)),
            };
            if tx.send(message).await.is_err() {
                break;
            }
        }
    });
    Ok(Box::pin(ReceiverStream::new(rx)))
}
