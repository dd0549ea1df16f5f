//! Records: append, append sessions, reads (one-off and sessions that follow the tail),
//! check tail. S2's read rules live here: the limits, create-on-read, and the past-tail
//! check, each resolved from the one metadata lookup a read open makes.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use shale_gateway::{AppendInput, PendingAppend};
use shale_metadata_contract::{AppendAck, MetadataError, Position, ProducerStamp, ProducerSummary};
use shale_proto::Command;
use shale_reader::{ReadCursor, ReadOutput, ReadRequest, ReaderError};
use tokio::sync::mpsc;

use super::follow::Follower;
use super::{append_pipeline, valid_stream, Service};
use crate::auth::Operation;
use crate::ServiceError;

/// Most streams one atomic append may name.
pub const MAX_ATOMIC_STREAMS: usize = 100;

/// Longest `wait` S2 allows, in seconds.
const MAX_WAIT_SECS: u64 = 60;

/// An idempotent producer's fields as every transport carries them: both or neither.
pub fn producer_stamp(id: Option<String>, seq: Option<u64>) -> Result<Option<ProducerStamp>, ServiceError> {
    match (id, seq) {
        (Some(id), Some(seq)) => Ok(Some(ProducerStamp { id, seq, counts_records: false })),
        (None, None) => Ok(None),
        _ => Err(ServiceError::bad("producer_id and producer_seq go together: give both or neither")),
    }
}

/// A read session: a read that goes on past what is there now.
#[derive(Clone, Debug)]
pub struct ReadSessionRequest {
    pub read: ReadRequest,
    /// Once caught up, end after this long without new records; `None` follows forever.
    pub idle_limit: Option<Duration>,
    /// Records and bytes a resumed session had already delivered (they count toward
    /// `count` and `bytes`).
    pub resumed_after: (u64, u64),
}

impl Service {
    pub async fn append(&self, input: AppendInput) -> Result<AppendAck, ServiceError> {
        let gateway = self.gateway()?;
        let input = self.authorize_append(input)?;
        Ok(gateway.append(input).await?)
    }

    /// Submits an append without waiting for its commit: appends submitted one after
    /// another from one task are sequenced in that order, so a transport can pipeline
    /// them and await their acks in order.
    pub fn submit_append(&self, input: AppendInput) -> Result<PendingAppend, ServiceError> {
        let gateway = self.gateway()?;
        let input = self.authorize_append(input)?;
        Ok(gateway.submit(vec![input])?)
    }

    /// Appends to several streams of one basin atomically: every stream advances or none
    /// does; a refusal names the stream and the condition that failed.
    pub async fn append_atomic(&self, inputs: Vec<AppendInput>) -> Result<Vec<AppendAck>, ServiceError> {
        let gateway = self.gateway()?;
        if inputs.is_empty() || inputs.len() > MAX_ATOMIC_STREAMS {
            return Err(ServiceError::bad(format!("an atomic append names 1 to {MAX_ATOMIC_STREAMS} streams")));
        }
        if inputs.iter().any(|input| input.producer.is_some()) {
            return Err(ServiceError::bad(
                "an atomic append takes no producer_id: retry it with match_seq_num instead",
            ));
        }
        let mut streams = std::collections::HashSet::new();
        if let Some(repeated) = inputs.iter().find(|input| !streams.insert((&input.basin, &input.stream))) {
            return Err(ServiceError::bad(format!("stream `{}` appears twice in one atomic append", repeated.stream)));
        }
        let inputs = inputs.into_iter().map(|input| self.authorize_append(input)).collect::<Result<Vec<_>, _>>()?;
        Ok(gateway.append_atomic(inputs).await?)
    }

    /// Checks that the caller may append these records (command records need `trim` or
    /// `fence`, others `append`) and gives the input the stream's full name.
    fn authorize_append(&self, mut input: AppendInput) -> Result<AppendInput, ServiceError> {
        valid_stream(&input.basin, &input.stream)?;
        if self.access.permits_everything() {
            return Ok(input);
        }
        let mut operations = std::collections::BTreeSet::new();
        for record in &input.records {
            operations.insert(match record.command() {
                Ok(Some(Command::Trim(_))) => Operation::Trim,
                Ok(Some(Command::Fence(_))) => Operation::Fence,
                // A malformed command is refused by the gateway, after this check.
                Ok(None) | Err(_) => Operation::Append,
            });
        }
        if operations.is_empty() {
            operations.insert(Operation::Append);
        }
        let mut stream = None;
        for op in operations {
            stream = Some(self.allow_stream(op, &input.basin, &input.stream)?.into_owned());
        }
        if let Some(stream) = stream {
            input.stream = stream;
        }
        Ok(input)
    }

    /// Starts an append session: inputs are submitted as they arrive and acked in order
    /// on `acks`; the first failure is the last item sent. Every input must name the
    /// same stream.
    pub fn append_session<S>(
        &self,
        inputs: S,
        acks: mpsc::Sender<Result<AppendAck, ServiceError>>,
    ) -> Result<(), ServiceError>
    where
        S: Stream<Item = Result<AppendInput, ServiceError>> + Unpin + Send + 'static,
    {
        use futures::StreamExt;
        let gateway = self.gateway()?.clone();
        let service = self.clone();
        let guard = Arc::new(tokio::sync::Mutex::new(self.session_guard()));
        let inputs = Box::pin(inputs.then(move |input| {
            let (service, guard) = (service.clone(), guard.clone());
            async move {
                guard.lock().await.check().await?;
                service.authorize_append(input?)
            }
        }));
        tokio::spawn(async move { append_pipeline::run(&gateway, inputs, acks).await });
        Ok(())
    }

    /// A one-off read: at most S2's limits, waiting up to `wait` for new records.
    pub async fn read(&self, request: &ReadRequest) -> Result<ReadOutput, ServiceError> {
        self.read_with(request, &mut ReadCursor::default()).await
    }

    /// [`Self::read`], going on from what `cursor` learned in earlier reads of the same
    /// stream (a new or refreshed cursor looks the stream up first): a transport that
    /// reads one stream again and again, as a Kafka consumer's fetches do, asks metadata
    /// once rather than per read, and reads ahead as a session does.
    pub async fn read_with(&self, request: &ReadRequest, cursor: &mut ReadCursor) -> Result<ReadOutput, ServiceError> {
        let reader = self.reader()?;
        validate_read(request)?;
        let request = self.authorize_read(request)?;
        if !cursor.is_open() {
            self.look_up(&request, cursor).await?;
        }
        Ok(reader.read_with(&request, cursor).await?)
    }

    /// Looks `request`'s stream up again into `cursor` (its trim point, tail and identity
    /// as they are now), as the first read of a refreshed cursor does, checking that the
    /// caller may read it.
    pub async fn look_up_for_read(&self, request: &ReadRequest, cursor: &mut ReadCursor) -> Result<(), ServiceError> {
        validate_read(request)?;
        let request = self.authorize_read(request)?;
        cursor.refresh();
        self.look_up(&request, cursor).await
    }

    /// Checks that the caller may read the stream; the request with its full name.
    fn authorize_read<'a>(&self, request: &'a ReadRequest) -> Result<std::borrow::Cow<'a, ReadRequest>, ServiceError> {
        valid_stream(&request.basin, &request.stream)?;
        let stream = self.allow_stream(Operation::Read, &request.basin, &request.stream)?;
        Ok(match stream {
            std::borrow::Cow::Borrowed(_) => std::borrow::Cow::Borrowed(request),
            std::borrow::Cow::Owned(stream) => std::borrow::Cow::Owned(ReadRequest { stream, ..request.clone() }),
        })
    }

    /// Opens a read session; a start past the tail is refused here, before any event,
    /// unless the request clamps.
    pub async fn read_session(&self, mut request: ReadSessionRequest) -> Result<Follower, ServiceError> {
        let reader = self.reader()?.clone();
        validate_read(&request.read)?;
        if let std::borrow::Cow::Owned(read) = self.authorize_read(&request.read)? {
            request.read = read;
        }
        let cursor = self.open_read(&request.read).await?;
        let (guard, draining) = (self.session_guard(), self.draining.watch());
        Follower::start(reader, request.read, request.idle_limit, request.resumed_after, cursor, guard, draining).await
    }

    /// The stream's idempotent producers whose state has not expired, each with its
    /// latest applied append. Needs `read` on the stream, as Kafka's DescribeProducers.
    pub async fn producers(&self, basin: &str, stream: &str) -> Result<Vec<ProducerSummary>, ServiceError> {
        valid_stream(basin, stream)?;
        let stream = self.allow_stream(Operation::Read, basin, stream)?;
        Ok(self.metadata.producers(basin, &stream).await?)
    }

    /// The stream's tail; a missing stream is created first when its basin creates
    /// streams on read, as s2-lite does for a check of the tail.
    pub async fn check_tail(&self, basin: &str, stream: &str) -> Result<Position, ServiceError> {
        let reader = self.reader()?;
        valid_stream(basin, stream)?;
        let stream = self.allow_stream(Operation::CheckTail, basin, stream)?;
        match reader.check_tail(basin, &stream).await {
            Err(ReaderError::Metadata(MetadataError::StreamNotFound { .. }))
                if self.create_on_read(basin, &stream).await? =>
            {
                Ok(reader.check_tail(basin, &stream).await?)
            }
            tail => Ok(tail?),
        }
    }

    /// Opens a read cursor on the stream (its one metadata lookup), creating the stream
    /// first when it is missing and its basin creates streams on read.
    async fn open_read(&self, request: &ReadRequest) -> Result<ReadCursor, ServiceError> {
        let mut cursor = ReadCursor::default();
        self.look_up(request, &mut cursor).await?;
        Ok(cursor)
    }

    /// Looks the stream up into `cursor`, keeping what it read ahead; creates the stream
    /// when it is missing and its basin creates streams on read (the cursor then starts
    /// afresh, and its first read looks the new stream up).
    async fn look_up(&self, request: &ReadRequest, cursor: &mut ReadCursor) -> Result<(), ServiceError> {
        valid_stream(&request.basin, &request.stream)?;
        let reader = self.reader()?;
        match reader.look_up(&request.basin, &request.stream, cursor).await {
            Err(ReaderError::Metadata(MetadataError::StreamNotFound { .. }))
                if self.create_on_read(&request.basin, &request.stream).await? =>
            {
                *cursor = ReadCursor::default();
                Ok(())
            }
            found => Ok(found?),
        }
    }

    /// Creates the missing stream `stream` when its basin creates streams on read:
    /// whether it now exists.
    async fn create_on_read(&self, basin: &str, stream: &str) -> Result<bool, ServiceError> {
        if !self.metadata.basin(basin).await?.config.create_stream_on_read {
            return Ok(false);
        }
        match self.metadata.create_stream(basin, stream, Default::default()).await {
            Ok(_) | Err(MetadataError::StreamExists { .. }) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }
}

/// S2's read limits, for every transport. `count` and `bytes` above S2's per-call
/// maximum are not refused: the reader clamps each call to it, as S2 does, and in a
/// session they bound the whole session.
fn validate_read(request: &ReadRequest) -> Result<(), ServiceError> {
    if request.wait > Duration::from_secs(MAX_WAIT_SECS) {
        return Err(ServiceError::bad(format!("wait must be at most {MAX_WAIT_SECS} seconds")));
    }
    Ok(())
}
