//! What the metadata service offers, apart from how it is built: gateways, readers and
//! the client-facing service depend on this crate only, never on SlateDB.
//!
//! - `api`: [`MetadataApi`], the trait every caller uses, in process or remote;
//! - `catalog`: [`CatalogCall`] and [`CatalogReply`], every basin and stream management
//!   operation as one call (one variant per operation, generic transport);
//! - `compaction`: the plans compactors ask for and the replacements they hand back;
//! - `commit`: what a commit call carries ([`CommitRequest`] of units and appends) and
//!   answers ([`UnitOutcome`], [`CommitTicket`]), and the gateway [`PipelinePosition`];
//! - `model`: basin and stream records and configs, index entries, positions, acks;
//! - `records`: their stored form (versioned protobuf; older JSON still read);
//! - `tails`: per-stream tail notifications ([`TailWatch`], [`TailUpdate`]);
//! - `error`: [`MetadataError`] and its one mapping to the shared code set;
//! - `rpc`: [`RemoteMetadata`], the `shale.metadata.v1` client with failover, and
//!   `wire`/`wire_catalog`, the message conversions client and server share;
//! - `transactions`: Kafka transactions' records and calls ([`TransactionCall`]);
//! - `leader_record`: where the leader says it listens, read by clients to find it.

mod api;
mod catalog;
mod commit;
mod compaction;
mod error;
pub mod leader_record;
mod model;
pub mod records;
mod rpc;
mod tails;
mod timing;
pub mod transactions;
pub mod wire;
pub mod wire_catalog;

pub use api::MetadataApi;
pub use catalog::{
    AccessTokenRecord, AgentList, AgentRecord, CatalogCall, CatalogReply, ConsumerPosition, ListPage, Lookup, Retry,
    StreamSummary, MAX_AGENT_TTL_MS,
};
pub use commit::{
    CommitAppend, CommitRequest, CommitTicket, CommitUnit, PipelinePosition, ProducerStamp, ProducerSummary,
    UnitOutcome,
};
pub use compaction::{CompactionPlan, CompactionRun, KeyCompactionTarget, KeyCursor, Replacement};
pub use error::{MetadataError, Result};
pub use leader_record::{LeaderRecord, LEADER_RECORD};
pub use model::{
    AppendAck, BasinConfig, BasinPatch, BasinRecord, BodyFormat, DeleteOnEmpty, IndexEntry, KeyCompactionConfig,
    KeyCompactionPolicy, Position, RetentionPolicy, StreamConfig, StreamInfo, StreamPatch, StreamRecord, StreamSetting,
    TablesConfig, TimestampingConfig, DEFAULT_DELETE_RETENTION_MS,
};
pub use records::Stored;
pub use rpc::{BearerToken, ClusterToken, RemoteConfig, RemoteMetadata, MAX_MESSAGE_BYTES};
pub use tails::{TailUpdate, TailWatch};
pub use timing::ClusterTiming;
pub use transactions::{
    GroupOffset, TransactionCall, TransactionOffset, TransactionOp, TransactionOutcome, TransactionRefusal,
    TransactionStamp, TransactionState,
};
