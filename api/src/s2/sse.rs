//! Reads as server-sent events: `batch` events with resumable ids, `ping` heartbeats,
//! `error`, and a final `[DONE]` when the read is bounded. Follows the tail live.

use std::convert::Infallible;
use std::fmt::Write;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::json;
use shale_reader::ReadStart;
use shale_storage::Clock;

use super::batch_json;
use super::read_params::ReadParams;
use super::wire::Format;
use crate::ApiError;
use shale_service::{FollowEvent, Follower, Service};

/// Starts an SSE read. Resumes after `Last-Event-ID` (`<next seq>,<records>,<bytes>`).
pub async fn read_session(service: &Service, params: ReadParams, headers: &HeaderMap) -> Result<Response, ApiError> {
    let format = params.format;
    let mut request = params.session();
    if let Some(last) = headers.get("last-event-id") {
        let last = last.to_str().map_err(|_| ApiError::bad_header("Last-Event-ID is not ASCII"))?;
        let parts: Vec<u64> =
            last.split(',').map(str::parse).collect::<Result<_, _>>().map_err(|_| bad_event_id(last))?;
        let [next_seq, records, bytes] = parts[..] else { return Err(bad_event_id(last)) };
        request.read.start = ReadStart::SeqNum(next_seq);
        request.resumed_after = (records, bytes);
    }
    let clock = service.clock().clone();
    let follower = service.read_session(request).await?;
    let headers = [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")];
    Ok((headers, Body::from_stream(events(follower, format, clock))).into_response())
}

fn bad_event_id(id: &str) -> ApiError {
    ApiError::bad_header(format!("Last-Event-ID `{id}` is not `<seq_num>,<count>,<bytes>`"))
}

/// Events rendered ahead of the client while it receives earlier ones, as S2S sessions do.
const READ_AHEAD_EVENTS: usize = 4;

/// Each event as its text on the wire (`event:`, `id:`, `data:` lines and a blank line),
/// written in one buffer: a batch's JSON goes straight into its event.
fn events(follower: Follower, format: Format, clock: Arc<dyn Clock>) -> impl Stream<Item = Result<Bytes, Infallible>> {
    let events = follower.run_ahead(READ_AHEAD_EVENTS, move |event| {
        Some(match event {
            FollowEvent::Batch(output, resume) => {
                let mut text = String::from("event: batch\nid: ");
                // Writing to a `String` cannot fail.
                let _ = write!(text, "{},{},{}", resume.next_seq, resume.sent_records, resume.sent_bytes);
                text.push_str("\ndata: ");
                batch_json::push_read_batch(&mut text, &output.records, Some(output.tail), format);
                text.push_str("\n\n");
                Bytes::from(text)
            }
            FollowEvent::Heartbeat(tail) => {
                // The tail too, as S2's ping carries it: the TypeScript SDK reads a
                // session's tail (and so whether it is caught up) from its pings.
                let now = clock.now_ms();
                let tail = json!({ "seq_num": tail.seq_num, "timestamp": tail.timestamp });
                event_text(Some("ping"), &json!({ "timestamp": now, "tail": tail }).to_string())
            }
            FollowEvent::Done => event_text(None, "[DONE]"),
            FollowEvent::Error(error) => event_text(Some("error"), &ApiError::from(error).body().to_string()),
        })
    });
    events.map(Ok)
}

/// An event named `name` (a message when `None`) carrying `data`, a `data:` line for each
/// of its lines.
fn event_text(name: Option<&str>, data: &str) -> Bytes {
    let mut text = String::with_capacity(data.len() + 32);
    if let Some(name) = name {
        text.push_str("event: ");
        text.push_str(name);
        text.push('\n');
    }
    for line in data.split('\n') {
        text.push_str("data: ");
        text.push_str(line);
        text.push('\n');
    }
    text.push('\n');
    Bytes::from(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_its_lines_then_a_blank_line() {
        assert_eq!(&event_text(Some("ping"), r#"{"timestamp":1}"#)[..], b"event: ping\ndata: {\"timestamp\":1}\n\n");
        assert_eq!(&event_text(None, "[DONE]")[..], b"data: [DONE]\n\n");
        assert_eq!(&event_text(Some("error"), "a\nb")[..], b"event: error\ndata: a\ndata: b\n\n");
    }
}
