//! Reads as server-sent events: `batch` events with resumable ids, `ping` heartbeats,
//! `error`, and a final `[DONE]` when the read is bounded. Follows the tail live.

use std::convert::Infallible;
use std::sync::Arc;

use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde_json::json;
use shale_reader::ReadStart;
use shale_storage::Clock;

use super::read_params::ReadParams;
use super::wire::{Format, ReadBatchJson};
use crate::ApiError;
use shale_service::{FollowEvent, Follower, Service};

/// Starts an SSE read. Resumes after `Last-Event-ID` (`<next seq>,<records>,<bytes>`).
pub async fn read_session(service: &Service, params: ReadParams, headers: &HeaderMap) -> Result<Response, ApiError> {
    let format = params.format;
    let mut request = params.session();
    if let Some(last) = headers.get("last-event-id") {
        let last = last.to_str().map_err(|_| ApiError::bad("Last-Event-ID is not ASCII"))?;
        let parts: Vec<u64> =
            last.split(',').map(str::parse).collect::<Result<_, _>>().map_err(|_| bad_event_id(last))?;
        let [next_seq, records, bytes] = parts[..] else { return Err(bad_event_id(last)) };
        request.read.start = ReadStart::SeqNum(next_seq);
        request.resumed_after = (records, bytes);
    }
    let clock = service.clock().clone();
    let follower = service.read_session(request).await?;
    Ok(Sse::new(events(follower, format, clock)).into_response())
}

fn bad_event_id(id: &str) -> ApiError {
    ApiError::bad(format!("Last-Event-ID `{id}` is not `<seq_num>,<count>,<bytes>`"))
}

/// Events rendered ahead of the client while it receives earlier ones, as S2S sessions do.
const READ_AHEAD_EVENTS: usize = 4;

fn events(follower: Follower, format: Format, clock: Arc<dyn Clock>) -> impl Stream<Item = Result<Event, Infallible>> {
    let events = follower.run_ahead(READ_AHEAD_EVENTS, move |event| {
        Some(match event {
            FollowEvent::Batch(output, resume) => {
                let batch = ReadBatchJson::new(&output.records, Some(output.tail), format);
                let id = format!("{},{},{}", resume.next_seq, resume.sent_records, resume.sent_bytes);
                Event::default().event("batch").id(id).data(serde_json::to_string(&batch).unwrap_or_default())
            }
            FollowEvent::Heartbeat(_) => {
                let now = clock.now_ms();
                Event::default().event("ping").data(json!({ "timestamp": now }).to_string())
            }
            FollowEvent::Done => Event::default().data("[DONE]"),
            FollowEvent::Error(error) => Event::default().event("error").data(ApiError::from(error).body().to_string()),
        })
    });
    events.map(Ok)
}
