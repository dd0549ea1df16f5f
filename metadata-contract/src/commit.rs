//! What a commit call carries and answers: sealed segments, their units and appends,
//! each unit's outcome, and the gateway pipeline position.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use shale_proto::Command;

use crate::{AppendAck, Result};

/// One append inside a segment: its block and its conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitAppend {
    pub basin: String,
    pub stream: String,
    /// Byte range of the block in the segment object.
    pub offset: u64,
    pub len: u32,
    /// When the gateway received the append (ms since the epoch).
    pub arrival: u64,
    /// The client's timestamp of each record, in order; its length is the record count.
    pub client_timestamps: Vec<Option<u64>>,
    /// Command records in the append, in order.
    pub commands: Vec<Command>,
    pub match_seq_num: Option<u64>,
    pub fencing_token: Option<String>,
    pub metered_bytes: u64,
    /// Set by an idempotent producer: a retry of a sequence already applied gets the
    /// original ack and applies nothing.
    pub producer: Option<ProducerStamp>,
    /// Set by a Kafka transactional producer: the append is staged in its open
    /// transaction, visible with offsets only once that commits.
    pub transaction: Option<crate::TransactionStamp>,
}

/// An idempotent producer's id and an append's sequence number in it, from any start:
/// each the previous plus one (S2's and `shale.v1`'s producers), or, with
/// `counts_records`, the previous plus the previous append's record count (Kafka's).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProducerStamp {
    pub id: String,
    pub seq: u64,
    pub counts_records: bool,
}

/// An idempotent producer as a stream's producer state keeps it: its latest applied
/// append's sequence, record count and last record's timestamp, and when it was applied
/// (metadata's clock).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerSummary {
    pub producer: String,
    pub last_seq: u64,
    pub last_count: u64,
    pub last_timestamp: u64,
    pub last_active_ms: u64,
}

impl ProducerStamp {
    /// Longest producer id, in bytes.
    pub const MAX_ID_BYTES: usize = 128;

    /// Checks the id: 1 to [`Self::MAX_ID_BYTES`] bytes.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.id.is_empty() || self.id.len() > Self::MAX_ID_BYTES {
            return Err(format!("producer_id must be 1 to {} bytes", Self::MAX_ID_BYTES));
        }
        Ok(())
    }
}

/// Appends that succeed or fail together. Most units hold one append; an atomic
/// multi-stream append is one unit of several.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitUnit {
    pub appends: Vec<CommitAppend>,
}

/// A sealed, uploaded segment to make visible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitRequest {
    pub segment_id: u128,
    pub units: Vec<CommitUnit>,
}

/// Per unit: an ack per append, or the error that failed the whole unit.
pub type UnitOutcome = Result<Vec<AppendAck>>;

/// Where a commit call stands in its gateway's pipeline: a gateway keeps several calls
/// in flight, numbered from 1 in the order it sends them, without gaps; `seen_through`
/// is the last call whose outcome it had processed when it sent this one. A unit that
/// fails poisons its streams for every later call of the pipeline sent before the
/// gateway saw that failure, and a call whose unanswered predecessors did not all reach
/// the instance it reaches (a takeover in between) is refused, so no caller gets record
/// N+1 acked after record N failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelinePosition {
    pub pipeline: u128,
    pub seq: u64,
    pub seen_through: u64,
    /// Whether this is the call's first send: its segments (fresh ids) cannot have been
    /// committed before, so metadata skips looking up their stored outcomes. False for
    /// a call sent again, which may have been applied already.
    pub first_send: bool,
}

type Outcomes = Result<Vec<Vec<UnitOutcome>>>;

/// A commit call applied in memory: resolves to its outcomes once they are durable.
pub struct CommitTicket(Pin<Box<dyn Future<Output = Outcomes> + Send>>);

impl CommitTicket {
    pub fn new(outcome: impl Future<Output = Outcomes> + Send + 'static) -> Self {
        Self(Box::pin(outcome))
    }
}

impl Future for CommitTicket {
    type Output = Outcomes;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}
