//! [`Overlay`]: what a commit call has changed so far (stream records, index entries,
//! producers, staged transactional appends), applied to the database in one batch.

use std::collections::HashMap;

use shale_metadata_contract::records::encode_stored;
use shale_proto::metadata_rpc as pb;

use crate::producers::ProducerState;
use crate::{BasinRecord, CommitAppend, IndexEntry, StreamRecord, TransactionState, WriterState};

/// A stream by `(basin, stream)`.
pub(crate) type StreamKey = (String, String);

pub(crate) fn stream_key(append: &CommitAppend) -> StreamKey {
    (append.basin.clone(), append.stream.clone())
}

/// Streams touched so far in this commit, with their updated records. Start one with
/// [`Overlay::on`].
#[derive(Default)]
pub(crate) struct Overlay {
    pub streams: HashMap<StreamKey, StreamRecord>,
    pub basins: HashMap<String, Option<BasinRecord>>,
    pub entries: Vec<(StreamKey, u64, IndexEntry)>,
    pub next_stream_id: u64,
    pub failed_streams: std::collections::HashSet<StreamKey>,
    pub producers: HashMap<ProducerKey, ProducerState>,
    /// Streams whose trim point a command record moved.
    pub trimmed: std::collections::HashSet<StreamKey>,
    /// Transactional ids whose record changed, and the appends staged in them.
    pub transactions: HashMap<String, TransactionState>,
    pub staged: Vec<Staged>,
}

/// A producer on a stream: (stream id, producer id).
pub(crate) type ProducerKey = (u64, String);

impl Overlay {
    /// An empty overlay over the writer's state (its stream id counter: an overlay's is
    /// written back as the next one).
    pub fn on(writer: &WriterState) -> Overlay {
        Overlay { next_stream_id: writer.next_stream_id, ..Overlay::default() }
    }

    /// An empty overlay for one unit, over this one's stream id counter.
    pub fn tentative(&self) -> Overlay {
        Overlay { next_stream_id: self.next_stream_id, ..Overlay::default() }
    }
}

/// An append staged in an open transaction, keyed where it is stored.
pub(crate) struct Staged {
    pub key: Vec<u8>,
    pub append: pb::StagedAppend,
}

impl Staged {
    pub fn value(&self) -> Vec<u8> {
        encode_stored(self.append.clone())
    }

    pub fn segment_id(&self) -> u128 {
        <[u8; 16]>::try_from(self.append.segment_id.as_slice()).map(u128::from_be_bytes).unwrap_or_default()
    }

    /// The append as a commit would have carried it, without conditions.
    pub fn as_append(&self) -> CommitAppend {
        let a = &self.append;
        CommitAppend {
            basin: a.basin.clone(),
            stream: a.stream.clone(),
            offset: a.offset,
            len: a.len,
            arrival: a.arrival,
            client_timestamps: a
                .client_timestamps
                .iter()
                .zip(&a.timestamp_given)
                .map(|(timestamp, given)| given.then_some(*timestamp))
                .collect(),
            commands: Vec::new(),
            match_seq_num: None,
            fencing_token: None,
            metered_bytes: a.metered_bytes,
            producer: None,
            transaction: None,
        }
    }
}
