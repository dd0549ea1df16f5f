//! A read that follows the tail: history, then new records as they commit, with a
//! heartbeat as soon as it reaches the tail with nothing to send and whenever nothing
//! arrives for a while. Shared by SSE and the gRPC
//! `ReadSession`, which only differ in how they frame these events.

use std::sync::Arc;
use std::time::Duration;

use shale_metadata_contract::Position;
use shale_reader::{ReadCursor, ReadLimits, ReadOutput, ReadRequest, ReadStart, Reader, ReaderError};

use crate::auth::SessionGuard;
use crate::ServiceError;

/// Longest quiet spell before a heartbeat.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

pub enum FollowEvent {
    /// Records, and where a session resumed after them would start.
    Batch(ReadOutput, Resume),
    /// Nothing new within [`HEARTBEAT`]; the tail as last seen.
    Heartbeat(Position),
    /// A bounded read (`count`, `bytes` or `until`) is complete.
    Done,
    Error(ServiceError),
}

/// Where a session stands after a batch: the next sequence number and the records and
/// metered bytes sent so far (SSE's `Last-Event-ID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resume {
    pub next_seq: u64,
    pub sent_records: u64,
    pub sent_bytes: u64,
}

pub struct Follower {
    reader: Arc<Reader>,
    request: ReadRequest,
    /// What earlier batches learned: the session asks metadata when it opens, then
    /// follows the tail notifications.
    cursor: ReadCursor,
    bounded: bool,
    /// S2's `wait` on a session: once caught up, end after this long without new
    /// records (0 ends as soon as the reader reaches the tail). `None` follows forever.
    idle_limit: Option<Duration>,
    caught_up_since: Option<tokio::time::Instant>,
    /// Whether the session has said it reached the tail since it was last behind: the
    /// first time it finds nothing to send it says so at once with a heartbeat, as S2
    /// does, so a client waiting to be caught up (the TypeScript SDK's `caughtUp()`)
    /// need not wait for a quiet spell.
    tail_announced: bool,
    pub sent_records: u64,
    pub sent_bytes: u64,
    finished: bool,
    /// Ends the session when the caller's token is revoked or expires.
    guard: SessionGuard,
    /// True once the process is stopping: the session ends at once.
    draining: tokio::sync::watch::Receiver<bool>,
}

impl Follower {
    /// Checks the start (past the tail is an error unless clamped) before any event,
    /// from what `cursor` (opened by the caller) learned. `sent`: records and bytes sent
    /// before a resume.
    pub(crate) async fn start(
        reader: Arc<Reader>,
        request: ReadRequest,
        idle_limit: Option<Duration>,
        (sent_records, sent_bytes): (u64, u64),
        mut cursor: ReadCursor,
        guard: SessionGuard,
        draining: tokio::sync::watch::Receiver<bool>,
    ) -> Result<Self, ServiceError> {
        if let ReadStart::SeqNum(seq) = request.start {
            let tail = reader.tail_with(&request.basin, &request.stream, &mut cursor).await?;
            if seq > tail.seq_num && !request.clamp {
                return Err(ReaderError::PastTail { tail }.into());
            }
        }
        let bounded = request.limits.count.is_some() || request.limits.bytes.is_some() || request.until.is_some();
        Ok(Self {
            reader,
            request,
            cursor,
            bounded,
            idle_limit,
            caught_up_since: None,
            tail_announced: false,
            sent_records,
            sent_bytes,
            finished: false,
            guard,
            draining,
        })
    }

    fn remaining(&self) -> Option<ReadLimits> {
        let limits = self.request.limits;
        let count = limits.count.map(|c| c.saturating_sub(self.sent_records));
        let bytes = limits.bytes.map(|b| b.saturating_sub(self.sent_bytes));
        if count == Some(0) || bytes == Some(0) {
            return None;
        }
        Some(ReadLimits { count, bytes, ..limits })
    }

    /// The next event; `None` after `Done` or `Error`.
    pub async fn next(&mut self) -> Option<FollowEvent> {
        if self.finished {
            return None;
        }
        // At least once per heartbeat, so an idle session ends too.
        if let Err(error) = self.guard.check().await {
            self.finished = true;
            return Some(FollowEvent::Error(error));
        }
        if *self.draining.borrow() {
            self.finished = true;
            return Some(FollowEvent::Error(ServiceError::ShuttingDown));
        }
        let Some(limits) = self.remaining() else {
            self.finished = true;
            return Some(FollowEvent::Done);
        };
        let mut request = self.request.clone();
        request.limits = limits;
        request.wait = HEARTBEAT;
        if let Some(limit) = self.idle_limit {
            let idle = self.caught_up_since.map(|since| since.elapsed()).unwrap_or_default();
            request.wait = HEARTBEAT.min(limit.saturating_sub(idle));
        }
        if let Some(check) = self.guard.until_next_check() {
            request.wait = request.wait.min(check);
        }
        if !self.tail_announced {
            request.wait = Duration::ZERO;
        }
        let started = tokio::time::Instant::now();
        let (reader, cursor, draining) = (&self.reader, &mut self.cursor, &mut self.draining);
        let read = tokio::select! {
            read = reader.read_with(&request, cursor) => read,
            _ = draining.wait_for(|stopping| *stopping) => {
                self.finished = true;
                return Some(FollowEvent::Error(ServiceError::ShuttingDown));
            }
        };
        let event = match read {
            Ok(output) if !output.records.is_empty() => {
                let last = output.records.last().map(|r| r.seq_num).unwrap_or_default();
                self.sent_records += output.records.len() as u64;
                self.sent_bytes += output.records.iter().map(|r| r.metered_bytes()).sum::<u64>();
                self.request.start = ReadStart::SeqNum(last + 1);
                self.caught_up_since = None;
                // A batch that ends at the tail says so itself (it carries the tail).
                self.tail_announced = output.tail.seq_num <= last + 1;
                let resume =
                    Resume { next_seq: last + 1, sent_records: self.sent_records, sent_bytes: self.sent_bytes };
                FollowEvent::Batch(output, resume)
            }
            Ok(output) if output.reached_until && self.bounded => {
                self.finished = true;
                FollowEvent::Done
            }
            Ok(output) => {
                // Quiet: look the stream up again next time (trim point, config, deletion).
                self.cursor.refresh();
                // Caught up since this read began: it found nothing new for its whole wait.
                let since = *self.caught_up_since.get_or_insert(started);
                self.tail_announced = true;
                if self.idle_limit.is_some_and(|limit| since.elapsed() >= limit) {
                    self.finished = true;
                    FollowEvent::Done
                } else {
                    FollowEvent::Heartbeat(output.tail)
                }
            }
            Err(error) => {
                self.finished = true;
                FollowEvent::Error(error.into())
            }
        };
        Some(event)
    }

    /// The events as a stream, read ahead of the consumer: a task reads and renders (with
    /// `render`) up to `depth` events while earlier ones are still being sent, so a
    /// catch-up overlaps fetching and encoding the next batches with sending this one.
    /// The stream ends where `render` returns `None`, with the follower, or as soon as
    /// the consumer is dropped.
    pub fn run_ahead<T: Send + 'static>(
        mut self,
        depth: usize,
        render: impl Fn(FollowEvent) -> Option<T> + Send + 'static,
    ) -> tokio_stream::wrappers::ReceiverStream<T> {
        let (ahead, events) = tokio::sync::mpsc::channel(depth);
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    event = self.next() => event,
                    _ = ahead.closed() => return,
                };
                let Some(rendered) = event.and_then(&render) else { return };
                if ahead.send(rendered).await.is_err() {
                    return;
                }
            }
        });
        tokio_stream::wrappers::ReceiverStream::new(events)
    }

    /// The sequence number the next batch will start at.
    pub fn next_seq(&self) -> Option<u64> {
        match self.request.start {
            ReadStart::SeqNum(seq) => Some(seq),
            _ => None,
        }
    }
}
