//! Reads as server-sent events: `batch` events with resumable ids, `ping` heartbeats,
//! `error`, and a final `[DONE]` when the read is bounded. Follows the tail live.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream};
use serde_json::json;
use shale_reader::{ReadLimits, ReadStart, ReaderError};
use shale_storage::Clock;

use crate::records::ReadParams;
use crate::wire::ReadBatchJson;
use crate::{ApiError, AppState};

/// Longest quiet spell before a `ping`.
const HEARTBEAT: Duration = Duration::from_secs(5);

struct Session {
    state: AppState,
    params: ReadParams,
    /// Whether the client set `count`, `bytes` or `until`: then the session ends.
    bounded: bool,
    sent_records: u64,
    sent_bytes: u64,
    done: bool,
}

/// Starts an SSE read. Resumes after `Last-Event-ID` (`<next seq>,<records>,<bytes>`).
pub async fn read_session(state: AppState, mut params: ReadParams, headers: &HeaderMap) -> Result<Response, ApiError> {
    let request = &mut params.request;
    let bounded = request.limits.count.is_some() || request.limits.bytes.is_some() || request.until.is_some();
    let (mut sent_records, mut sent_bytes) = (0, 0);
    if let Some(last) = headers.get("last-event-id") {
        let last = last.to_str().map_err(|_| ApiError::bad("Last-Event-ID is not ASCII"))?;
        let parts: Vec<u64> = last.split(',').map(str::parse).collect::<Result<_, _>>().map_err(|_| bad_event_id(last))?;
        let [next_seq, records, bytes] = parts[..] else { return Err(bad_event_id(last)) };
        request.start = ReadStart::SeqNum(next_seq);
        (sent_records, sent_bytes) = (records, bytes);
    }
    // A start past the tail fails the request itself, before any event.
    if let ReadStart::SeqNum(seq) = request.start {
        let tail = state.reader.check_tail(&request.basin, &request.stream).await?;
        if seq > tail.seq_num && !request.clamp {
            return Err(ReaderError::PastTail { tail }.into());
        }
    }
    let session = Session { state, params, bounded, sent_records, sent_bytes, done: false };
    Ok(Sse::new(events(session)).into_response())
}

fn bad_event_id(id: &str) -> ApiError {
    ApiError::bad(format!("Last-Event-ID `{id}` is not `<seq_num>,<count>,<bytes>`"))
}

fn events(session: Session) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(session, |mut s| async move {
        if s.done {
            return None;
        }
        let event = s.next_event().await;
        Some((Ok(event), s))
    })
}

impl Session {
    fn remaining(&self) -> Option<ReadLimits> {
        let limits = self.params.request.limits;
        let count = limits.count.map(|c| c.saturating_sub(self.sent_records));
        let bytes = limits.bytes.map(|b| b.saturating_sub(self.sent_bytes));
        if count == Some(0) || bytes == Some(0) {
            return None;
        }
        Some(ReadLimits { count, bytes })
    }

    fn finish(&mut self) -> Event {
        self.done = true;
        Event::default().data("[DONE]")
    }

    async fn next_event(&mut self) -> Event {
        let Some(limits) = self.remaining() else { return self.finish() };
        let mut request = self.params.request.clone();
        request.limits = limits;
        request.wait = HEARTBEAT;
        match self.state.reader.read(&request).await {
            Ok(output) if !output.records.is_empty() => {
                let last = output.records.last().map(|r| r.seq_num).unwrap_or_default();
                self.sent_records += output.records.len() as u64;
                self.sent_bytes += output.records.iter().map(|r| r.metered_bytes()).sum::<u64>();
                self.params.request.start = ReadStart::SeqNum(last + 1);
                let batch = ReadBatchJson::new(&output.records, Some(output.tail), self.params.format);
                let id = format!("{},{},{}", last + 1, self.sent_records, self.sent_bytes);
                let data = serde_json::to_string(&batch).unwrap_or_default();
                Event::default().event("batch").id(id).data(data)
            }
            Ok(output) if output.reached_until && self.bounded => self.finish(),
            Ok(_) => {
                let now = shale_storage::SystemClock.now_ms();
                Event::default().event("ping").data(json!({ "timestamp": now }).to_string())
            }
            Err(error) => {
                self.done = true;
                let error = ApiError::from(error);
                Event::default().event("error").data(error.body().to_string())
            }
        }
    }
}
