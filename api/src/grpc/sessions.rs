//! The streaming RPCs: pipelined append sessions and following read sessions.

use std::sync::Arc;

use futures::StreamExt;
use shale_gateway::Gateway;
use shale_proto::grpc as pb;
use shale_reader::{ReadCursor, ReadRequest};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use super::{convert, EventStream};
use crate::follow::{FollowEvent, Follower};
use crate::{ApiError, AppState};

/// Acks in order; ends with an error status at the first failure.
pub fn append_session(gateway: Arc<Gateway>, inbound: Streaming<pb::AppendRequest>) -> EventStream<pb::AppendAck> {
    let (acks_tx, acks) = mpsc::channel(crate::append_pipeline::MAX_PENDING);
    tokio::spawn(async move {
        let inputs = inbound.map(|request| {
            request
                .map(convert::append_input)
                .map_err(|status| ApiError::bad(format!("append session input: {}", status.message())))
        });
        crate::append_pipeline::run(&gateway, inputs, acks_tx).await;
    });
    let acks = ReceiverStream::new(acks).map(|ack| ack.map(convert::ack).map_err(Status::from));
    Box::pin(acks)
}

/// History then the live tail, heartbeats while idle; ends when a bounded read is done,
/// on error, or when the client goes away.
pub async fn read_session(
    state: AppState,
    request: ReadRequest,
    cursor: ReadCursor,
) -> Result<EventStream<pb::ReadSessionResponse>, ApiError> {
    let mut follower = Follower::start(state, request, None, (0, 0), cursor).await?;
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
