//! Reads as server-sent events: `batch` events with resumable ids, `ping` heartbeats,
//! `error`, and a final `[DONE]` when the read is bounded. Follows the tail live.

use std::convert::Infallible;

use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream};
use serde_json::json;
use shale_reader::{ReadCursor, ReadStart};
use shale_storage::Clock;

use crate::follow::{FollowEvent, Follower};
use crate::records::ReadParams;
use crate::wire::{Format, ReadBatchJson};
use crate::{ApiError, AppState};

/// Starts an SSE read. Resumes after `Last-Event-ID` (`<next seq>,<records>,<bytes>`).
pub async fn read_session(
    state: AppState,
    mut params: ReadParams,
    headers: &HeaderMap,
    cursor: ReadCursor,
) -> Result<Response, ApiError> {
    let (mut sent_records, mut sent_bytes) = (0, 0);
    if let Some(last) = headers.get("last-event-id") {
        let last = last.to_str().map_err(|_| ApiError::bad("Last-Event-ID is not ASCII"))?;
        let parts: Vec<u64> =
            last.split(',').map(str::parse).collect::<Result<_, _>>().map_err(|_| bad_event_id(last))?;
        let [next_seq, records, bytes] = parts[..] else { return Err(bad_event_id(last)) };
        params.request.start = ReadStart::SeqNum(next_seq);
        (sent_records, sent_bytes) = (records, bytes);
    }
    let follower =
        Follower::start(state, params.request, params.session_wait, (sent_records, sent_bytes), cursor).await?;
    Ok(Sse::new(events(follower, params.format)).into_response())
}

fn bad_event_id(id: &str) -> ApiError {
    ApiError::bad(format!("Last-Event-ID `{id}` is not `<seq_num>,<count>,<bytes>`"))
}

fn events(follower: Follower, format: Format) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(follower, move |mut follower| async move {
        let event = match follower.next().await? {
            FollowEvent::Batch(output) => {
                let batch = ReadBatchJson::new(&output.records, Some(output.tail), format);
                let id = format!(
                    "{},{},{}",
                    follower.next_seq().unwrap_or_default(),
                    follower.sent_records,
                    follower.sent_bytes
                );
                Event::default().event("batch").id(id).data(serde_json::to_string(&batch).unwrap_or_default())
            }
            FollowEvent::Heartbeat(_) => {
                let now = shale_storage::SystemClock.now_ms();
                Event::default().event("ping").data(json!({ "timestamp": now }).to_string())
            }
            FollowEvent::Done => Event::default().data("[DONE]"),
            FollowEvent::Error(error) => Event::default().event("error").data(error.body().to_string()),
        };
        Some((Ok(event), follower))
    })
}
