//! Pipelined appends to one stream, shared by the gRPC `AppendSession` and S2S append
//! sessions: each input is submitted to the gateway the moment it arrives, so inputs are
//! sequenced in arrival order, and acks go out in that same order.

use futures::stream::FuturesOrdered;
use futures::{Stream, StreamExt};
use shale_gateway::{AppendInput, GatewayError, PendingAppend};
use shale_metadata_contract::AppendAck;
use tokio::sync::mpsc;

use crate::ServiceError;

/// Inputs a session may have submitted but not yet acknowledged. Beyond it the session
/// stops reading input, which pushes back on the client through transport flow control.
pub const MAX_PENDING: usize = 256;

/// Runs a session until the input ends and every ack is sent, the receiver goes away, or
/// the first failure, which is sent as the last item.
pub async fn run<S>(gateway: &shale_gateway::Gateway, inputs: S, acks: mpsc::Sender<Result<AppendAck, ServiceError>>)
where
    S: Stream<Item = Result<AppendInput, ServiceError>> + Unpin,
{
    if let Err(error) = pipeline(gateway, inputs, &acks).await {
        let _ = acks.send(Err(error)).await;
    }
}

async fn pipeline<S>(
    gateway: &shale_gateway::Gateway,
    mut inputs: S,
    acks: &mpsc::Sender<Result<AppendAck, ServiceError>>,
) -> Result<(), ServiceError>
where
    S: Stream<Item = Result<AppendInput, ServiceError>> + Unpin,
{
    let mut pending: FuturesOrdered<PendingAppend> = FuturesOrdered::new();
    let mut stream: Option<(String, String)> = None;
    let mut inputs_open = true;
    loop {
        tokio::select! {
            biased;
            Some(result) = pending.next(), if !pending.is_empty() => {
                if !deliver(result, acks).await? {
                    return Ok(());
                }
            }
            input = inputs.next(), if inputs_open && pending.len() < MAX_PENDING => match input {
                Some(input) => {
                    let input = match input {
                        Ok(input) => input,
                        Err(error) => return drain_then_fail(pending, acks, error).await,
                    };
                    let this = (input.basin.clone(), input.stream.clone());
                    match &stream {
                        None => stream = Some(this),
                        Some(first) if *first != this => {
                            let error = ServiceError::bad("an append session writes to one stream; start another session for another");
                            return drain_then_fail(pending, acks, error).await;
                        }
                        Some(_) => {}
                    }
                    let mut unit = match gateway.encode(vec![input]) {
                        Ok(unit) => unit,
                        Err(e) => return drain_then_fail(pending, acks, e.into()).await,
                    };
                    loop {
                        match gateway.submit_encoded(unit) {
                            Ok(ack) => {
                                pending.push_back(ack);
                                break;
                            }
                            // Wait for this session's oldest batch rather than fail it.
                            Err((GatewayError::Overloaded { .. }, back)) if !pending.is_empty() => {
                                unit = back;
                                if let Some(result) = pending.next().await {
                                    if !deliver(result, acks).await? {
                                        return Ok(());
                                    }
                                }
                            }
                            Err((e, _)) => return drain_then_fail(pending, acks, e.into()).await,
                        }
                    }
                }
                None => inputs_open = false,
            },
            else => return Ok(()),
        }
    }
}

/// Ends a session on an input that cannot be submitted: every input already submitted
/// is answered first (it may be committed, and a client that saw only the error would
/// resend it), then the error.
async fn drain_then_fail(
    mut pending: FuturesOrdered<PendingAppend>,
    acks: &mpsc::Sender<Result<AppendAck, ServiceError>>,
    error: ServiceError,
) -> Result<(), ServiceError> {
    while let Some(result) = pending.next().await {
        if !deliver(result, acks).await? {
            return Ok(());
        }
    }
    Err(error)
}

/// Sends one ack; `Ok(false)` when the receiver has gone.
async fn deliver(
    result: Result<Vec<AppendAck>, GatewayError>,
    acks: &mpsc::Sender<Result<AppendAck, ServiceError>>,
) -> Result<bool, ServiceError> {
    for ack in result? {
        if acks.send(Ok(ack)).await.is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}
