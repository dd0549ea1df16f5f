//! The client side of `CommitStream`: one ordered pipeline of commit calls per client.
//!
//! Callers queue calls in order and get a ticket each. One task keeps a stream open to
//! the live metadata instance, sends every queued call on it, and resolves tickets from
//! the answers, which come back in the same order. When the stream breaks, or an answer
//! says "not here" (`not_leader`, `fenced`, `stopped`: refused before doing anything),
//! the task reconnects (following the leader like every other call) and resends every
//! unanswered call, in order: commits are idempotent per segment, so one applied before
//! the break returns its stored outcome. A call unanswered past `failover_timeout`
//! fails as `indefinite`, and so does every call behind it.

use std::collections::VecDeque;
use std::sync::Arc;

use shale_proto::metadata_rpc as pb;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::connection::{moves_on, Connection};
use crate::wire::{commit_outcomes_from_wire, error_from_wire};
use crate::{MetadataError, Result, UnitOutcome};

type Outcome = Result<Vec<Vec<UnitOutcome>>>;

/// A queued commit call and who waits for it.
pub(crate) struct Call {
    pub wire: pb::CommitRequest,
    pub reply: oneshot::Sender<Outcome>,
}

struct Unanswered {
    wire: pb::CommitRequest,
    reply: oneshot::Sender<Outcome>,
    queued_at: Instant,
}

impl Unanswered {
    /// The call as sent now. Only its first send says so: a call sent again may have
    /// been applied before its stream broke, and metadata then looks its segments'
    /// outcomes up.
    fn next_send(&mut self) -> pb::CommitRequest {
        let wire = self.wire.clone();
        if let Some(position) = self.wire.position.as_mut() {
            position.first_send = false;
        }
        wire
    }
}

/// Why a stream ended.
enum Broken {
    /// Reconnect and resend.
    Retry(String),
    /// Every caller went away and nothing is unanswered.
    Idle,
}

pub(crate) async fn run(inner: Arc<Connection>, mut calls: mpsc::UnboundedReceiver<Call>) {
    let mut unanswered: VecDeque<Unanswered> = VecDeque::new();
    loop {
        if unanswered.is_empty() {
            match calls.recv().await {
                Some(call) => unanswered.push_back(queued(call)),
                None => return,
            }
        }
        let failure = match inner.connected().await {
            Some((address, client)) => match pump(&inner, client, &mut unanswered, &mut calls).await {
                Broken::Idle => return,
                Broken::Retry(reason) => {
                    inner.abandon(&address).await;
                    format!("{address}: {reason}")
                }
            },
            None => "no metadata address accepted a connection".to_string(),
        };
        give_up_on_expired(&inner, &mut unanswered, &failure);
        tokio::time::sleep(super::connection::RETRY_PAUSE).await;
    }
}

fn queued(call: Call) -> Unanswered {
    Unanswered { wire: call.wire, reply: call.reply, queued_at: Instant::now() }
}

/// Fails the oldest calls once they have waited past the failover timeout, with every
/// call behind them (they were ordered after it).
fn give_up_on_expired(inner: &Connection, unanswered: &mut VecDeque<Unanswered>, failure: &str) {
    let expired =
        unanswered.front().is_some_and(|call| call.queued_at.elapsed() >= inner.config.timing.failover_timeout);
    if expired {
        tracing::warn!(calls = unanswered.len(), failure, "commit pipeline gave up");
        for call in unanswered.drain(..) {
            let _ = call.reply.send(Err(MetadataError::Indefinite(format!("commit: {failure}"))));
        }
    }
}

/// Runs one stream: resends the unanswered calls, then sends new ones as they come and
/// resolves answers in order, until the stream breaks.
async fn pump(
    inner: &Connection,
    mut client: super::connection::Client,
    unanswered: &mut VecDeque<Unanswered>,
    calls: &mut mpsc::UnboundedReceiver<Call>,
) -> Broken {
    let (outgoing, outgoing_rx) = mpsc::unbounded_channel();
    for call in unanswered.iter_mut() {
        let _ = outgoing.send(call.next_send());
    }
    let opened = tokio::time::timeout(
        inner.config.timing.call_timeout,
        client.commit_stream(tokio_stream::wrappers::UnboundedReceiverStream::new(outgoing_rx)),
    )
    .await;
    let mut answers = match opened {
        Ok(Ok(response)) => response.into_inner(),
        Ok(Err(status)) => return Broken::Retry(status.to_string()),
        Err(_) => return Broken::Retry("no answer opening the commit stream".into()),
    };
    let opened_at = Instant::now();
    let mut accepting = true;
    loop {
        let oldest = unanswered.front().map(|call| call.queued_at);
        let stalled = async {
            match oldest {
                Some(at) => tokio::time::sleep_until(at.max(opened_at) + inner.config.timing.call_timeout).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            call = calls.recv(), if accepting => match call {
                Some(call) => {
                    let mut call = queued(call);
                    let _ = outgoing.send(call.next_send());
                    unanswered.push_back(call);
                }
                None if unanswered.is_empty() => return Broken::Idle,
                None => accepting = false,
            },
            answer = answers.message() => {
                let answer = match answer {
                    Ok(Some(answer)) => answer,
                    Ok(None) => return Broken::Retry("commit stream ended".into()),
                    Err(status) => return Broken::Retry(status.to_string()),
                };
                if let Some(error) = answer.error.clone().map(error_from_wire) {
                    if moves_on(&error) {
                        return Broken::Retry(error.to_string());
                    }
                }
                let Some(call) = unanswered.pop_front() else {
                    return Broken::Retry("an answer to no call".into());
                };
                let outcome = commit_outcomes_from_wire(&call.wire.segments, answer);
                let _ = call.reply.send(outcome);
                if !accepting && unanswered.is_empty() {
                    return Broken::Idle;
                }
            }
            () = stalled => return Broken::Retry(format!("no answer within {:?}", inner.config.timing.call_timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metadata skips the outcome lookup only for a call's first send, so every later
    /// send of it (a new stream after a break) must say it is not the first.
    #[test]
    fn only_the_first_send_of_a_call_is_marked_first() {
        let position = pb::PipelinePosition { pipeline: vec![0; 16], seq: 1, seen_through: 0, first_send: true };
        let wire = pb::CommitRequest { segments: vec![], position: Some(position) };
        let (reply, _outcome) = oneshot::channel();
        let mut call = queued(Call { wire, reply });
        let first_send = |wire: pb::CommitRequest| wire.position.map(|p| p.first_send);
        assert_eq!(first_send(call.next_send()), Some(true));
        assert_eq!(first_send(call.next_send()), Some(false), "resent after a broken stream");
        assert_eq!(first_send(call.next_send()), Some(false));
    }
}
