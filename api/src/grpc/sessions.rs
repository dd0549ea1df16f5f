//! The streaming RPCs: pipelined append sessions and following read sessions.

use futures::stream::FuturesOrdered;
use futures::StreamExt;
use shale_gateway::{GatewayError, PendingAppend};
use shale_proto::grpc as pb;
use shale_reader::ReadRequest;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use super::{convert, EventStream};
use crate::follow::{FollowEvent, Follower};
use crate::{ApiError, AppState};

/// Batches a session may have submitted but not yet acknowledged. Beyond it the session
/// stops reading requests, which pushes back on the client through HTTP/2 flow control.
const MAX_PENDING: usize = 256;

/// Acks in order; ends with an error status at the first failure.
pub fn append_session(state: AppState, inbound: Streaming<pb::AppendRequest>) -> EventStream<pb::AppendAck> {
    let (tx, rx) = mpsc::channel(MAX_PENDING);
    tokio::spawn(async move {
        if let Err(status) = run_append_session(state, inbound, &tx).await {
            let _ = tx.send(Err(status)).await;
        }
    });
    Box::pin(ReceiverStream::new(rx))
}

async fn run_append_session(
    state: AppState,
    mut inbound: Streaming<pb::AppendRequest>,
    tx: &mpsc::Sender<Result<pb::AppendAck, Status>>,
) -> Result<(), Status> {
    let mut pending: FuturesOrdered<PendingAppend> = FuturesOrdered::new();
    let mut stream: Option<(String, String)> = None;
    let mut inbound_open = true;
    loop {
        tokio::select! {
            biased;
            Some(result) = pending.next(), if !pending.is_empty() => {
                let acks = result.map_err(|e| Status::from(ApiError::from(e)))?;
                for ack in acks {
                    if tx.send(Ok(convert::ack(ack))).await.is_err() {
                        return Ok(());
                    }
                }
            }
            message = inbound.message(), if inbound_open && pending.len() < MAX_PENDING => match message? {
                Some(request) => {
                    let this = (request.basin.clone(), request.stream.clone());
                    match &stream {
                        None => stream = Some(this),
                        Some(first) if *first != this => {
                            return Err(ApiError::bad("an append session writes to one stream; start another session for another").into());
                        }
                        Some(_) => {}
                    }
                    let input = convert::append_input(request);
                    loop {
                        match state.gateway.submit(vec![input.clone()]) {
                            Ok(ack) => {
                                pending.push_back(ack);
                                break;
                            }
                            // Wait for our own oldest batch rather than fail the session.
                            Err(GatewayError::Overloaded { .. }) if !pending.is_empty() => {
                                if let Some(result) = pending.next().await {
                                    let acks = result.map_err(|e| Status::from(ApiError::from(e)))?;
                                    for ack in acks {
                                        if tx.send(Ok(convert::ack(ack))).await.is_err() {
                                            return Ok(());
                                        }
                                    }
                                }
                            }
                            Err(e) => return Err(ApiError::from(e).into()),
                        }
                    }
                }
                None => inbound_open = false,
            },
            else => return Ok(()),
        }
    }
}

/// History then the live tail, heartbeats while idle; ends when a bounded read is done,
/// on error, or when the client goes away.
pub async fn read_session(state: AppState, request: ReadRequest) -> Result<EventStream<pb::ReadSessionResponse>, ApiError> {
    let mut follower = Follower::start(state, request, 0, 0).await?;
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        while let Some(event) = follower.next().await {
            let message = match event {
                FollowEvent::Batch(output) => Ok(pb::ReadSessionResponse {
                    event: Some(pb::read_session_response::Event::Batch(convert::read_response(&output.records, output.tail))),
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
