//! Basin and stream management as one call: [`CatalogCall`] lists every operation once,
//! [`CatalogReply`] what they answer. The in-process service dispatches on it, the RPC
//! carries it whole, so adding an operation adds a variant here, its wire form in
//! `wire.rs` and its logic in the server, and no transport code.

use crate::{BasinConfig, BasinPatch, BasinRecord, MetadataError, Result, StreamConfig, StreamInfo, StreamPatch};

/// One page of a listing, and whether more follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListPage<T> {
    pub items: Vec<T>,
    pub has_more: bool,
}

/// A stream as listings show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSummary {
    pub name: String,
    pub created_at_ms: u64,
}

/// An index lookup: the reads of a stream's index entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Up to `limit` entries from the one holding `seq`, in sequence order.
    From { stream_id: u64, seq: u64, limit: usize },
    /// The first entry whose last record is at or after `timestamp`.
    AtTime { stream_id: u64, timestamp: u64 },
}

/// Every basin and stream management operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CatalogCall {
    GetBasin {
        basin: String,
    },
    /// A retry with the same `request_token` returns the basin with `created: false`.
    CreateBasin {
        basin: String,
        config: BasinConfig,
        request_token: Option<String>,
    },
    /// Applied to the latest config under the writer lock, so patches compose.
    ReconfigureBasin {
        basin: String,
        patch: BasinPatch,
    },
    ListBasins {
        prefix: String,
        start_after: String,
        limit: usize,
    },
    /// Deletes the basin and every stream in it.
    DeleteBasin {
        basin: String,
    },
    /// The durable stream record, tail included.
    GetStream {
        basin: String,
        stream: String,
    },
    /// Settings the config leaves unset come from the basin's default.
    CreateStream {
        basin: String,
        stream: String,
        config: StreamConfig,
        request_token: Option<String>,
    },
    ReconfigureStream {
        basin: String,
        stream: String,
        patch: StreamPatch,
    },
    ListStreams {
        basin: String,
        prefix: String,
        start_after: String,
        limit: usize,
    },
    DeleteStream {
        basin: String,
        stream: String,
    },
}

/// What may be done again after an attempt that was sent and not answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Reads: always.
    Read,
    /// Writes that give the same result when applied twice.
    Idempotent,
    /// Other writes: an unanswered attempt ends the call as `indefinite`.
    Once,
}

impl CatalogCall {
    /// A short name for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            CatalogCall::GetBasin { .. } => "get_basin",
            CatalogCall::CreateBasin { .. } => "create_basin",
            CatalogCall::ReconfigureBasin { .. } => "reconfigure_basin",
            CatalogCall::ListBasins { .. } => "list_basins",
            CatalogCall::DeleteBasin { .. } => "delete_basin",
            CatalogCall::GetStream { .. } => "get_stream",
            CatalogCall::CreateStream { .. } => "create_stream",
            CatalogCall::ReconfigureStream { .. } => "reconfigure_stream",
            CatalogCall::ListStreams { .. } => "list_streams",
            CatalogCall::DeleteStream { .. } => "delete_stream",
        }
    }

    /// Creates are idempotent with a request token; reconfigurations set absolute
    /// values; a delete sent twice could answer "not found" for its own success.
    pub fn retry(&self) -> Retry {
        match self {
            CatalogCall::GetBasin { .. }
            | CatalogCall::ListBasins { .. }
            | CatalogCall::GetStream { .. }
            | CatalogCall::ListStreams { .. } => Retry::Read,
            CatalogCall::CreateBasin { request_token, .. } | CatalogCall::CreateStream { request_token, .. } => {
                if request_token.is_some() {
                    Retry::Idempotent
                } else {
                    Retry::Once
                }
            }
            CatalogCall::ReconfigureBasin { .. } | CatalogCall::ReconfigureStream { .. } => Retry::Idempotent,
            CatalogCall::DeleteBasin { .. } | CatalogCall::DeleteStream { .. } => Retry::Once,
        }
    }
}

/// What a [`CatalogCall`] answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CatalogReply {
    /// `created` is false for a get, a reconfiguration, or a retried create.
    Basin {
        record: BasinRecord,
        created: bool,
    },
    Stream {
        info: StreamInfo,
        created: bool,
    },
    Basins(ListPage<BasinRecord>),
    Streams(ListPage<StreamSummary>),
    Done,
}

impl CatalogReply {
    pub fn into_basin(self) -> Result<(BasinRecord, bool)> {
        match self {
            CatalogReply::Basin { record, created } => Ok((record, created)),
            other => Err(unexpected("a basin", &other)),
        }
    }

    pub fn into_stream(self) -> Result<(StreamInfo, bool)> {
        match self {
            CatalogReply::Stream { info, created } => Ok((info, created)),
            other => Err(unexpected("a stream", &other)),
        }
    }

    pub fn into_basins(self) -> Result<ListPage<BasinRecord>> {
        match self {
            CatalogReply::Basins(page) => Ok(page),
            other => Err(unexpected("a basin page", &other)),
        }
    }

    pub fn into_streams(self) -> Result<ListPage<StreamSummary>> {
        match self {
            CatalogReply::Streams(page) => Ok(page),
            other => Err(unexpected("a stream page", &other)),
        }
    }

    pub fn into_done(self) -> Result<()> {
        match self {
            CatalogReply::Done => Ok(()),
            other => Err(unexpected("nothing", &other)),
        }
    }
}

fn unexpected(wanted: &str, got: &CatalogReply) -> MetadataError {
    MetadataError::Corrupt { key: "catalog reply".into(), reason: format!("expected {wanted}, got {got:?}") }
}
