//! Basin and stream management as one call: [`CatalogCall`] lists every operation once,
//! [`CatalogReply`] what they answer. The in-process service dispatches on it, the RPC
//! carries it whole, so adding an operation adds a variant here, its wire form in
//! `wire.rs` and its logic in the server, and no transport code.

use crate::{
    BasinConfig, BasinPatch, BasinRecord, CompactionPlan, KeyCompactionTarget, KeyCursor, MetadataError, Replacement,
    Result, StreamConfig, StreamInfo, StreamPatch,
};

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
    /// The durable tail (next sequence number): listings need no call per stream.
    pub tail: u64,
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
    /// What a compactor should rewrite next (see [`CompactionPlan`]).
    PlanCompaction {
        shard: u32,
        shards: u32,
        min_age_ms: u64,
        max_bytes: u64,
        /// A stream's last compacted entry smaller than this is merged again with the
        /// entries after it.
        remerge_below: u64,
        /// The compactor waits until `min_bytes` are eligible or the oldest has waited
        /// `max_wait_ms`; meanwhile metadata may answer from its last walk, without reading
        /// every marked stream again, while too little was committed since for the wait to
        /// end (0: always walk).
        min_bytes: u64,
        max_wait_ms: u64,
    },
    /// The stream's compaction cursor: its records below it are in compacted objects.
    CompactedThrough {
        basin: String,
        stream: String,
    },
    /// The stream's idempotent producers whose state has not expired.
    ListProducers {
        basin: String,
        stream: String,
    },
    /// Swaps entries for their rewritten form in the compacted object `segment_id`.
    CommitCompaction {
        segment_id: u128,
        replacements: Vec<Replacement>,
    },
    /// The streams of a compactor's shard whose key compaction may be due (see
    /// [`KeyCompactionTarget`]).
    PlanKeyCompaction {
        shard: u32,
        shards: u32,
    },
    /// Entries of the streams in the shard that lie in fragmented compacted objects (less
    /// than half their bytes still named), as runs to rewrite, up to about `max_bytes`.
    PlanDefragment {
        shard: u32,
        shards: u32,
        max_bytes: u64,
    },
    /// Records how far a stream's key compaction went.
    KeyCompacted {
        stream_id: u64,
        cursor: KeyCursor,
    },
    /// Stores a new access token; its id must be unused.
    IssueAccessToken {
        record: AccessTokenRecord,
    },
    /// The token whose secret hashes to `secret_hash`, if any.
    AccessTokenBySecret {
        secret_hash: Vec<u8>,
    },
    ListAccessTokens {
        prefix: String,
        start_after: String,
        limit: usize,
    },
    /// Removes the token; its secret stops working.
    RevokeAccessToken {
        id: String,
    },
    /// Stores a tracked consumer's position (and `commit_metadata` beside it): at most
    /// the stream's tail; with `expected`, only if the stored position (0 when none)
    /// equals it.
    CommitConsumer {
        basin: String,
        stream: String,
        name: String,
        seq_num: u64,
        expected: Option<u64>,
        commit_metadata: String,
    },
    GetConsumer {
        basin: String,
        stream: String,
        name: String,
    },
    /// Removes a tracked consumer, replying the position removed (`None` when there was
    /// none; a retry after a lost answer finds none).
    DeleteConsumer {
        basin: String,
        stream: String,
        name: String,
    },
    /// A stream's consumers by name; with an empty `basin`, every stream's.
    ListConsumers {
        basin: String,
        stream: String,
        start_after: String,
        limit: usize,
    },
    /// Registers or renews a Kafka-serving agent for `ttl_ms` (0: it leaves), replying
    /// the live agents. Kept in the leader's memory, not in the database: a new leader
    /// learns the agents from their next heartbeats.
    AgentHeartbeat {
        agent: AgentRecord,
        ttl_ms: u64,
    },
    /// A Kafka transactional producer's call; replies the id's record after it (see
    /// [`crate::transactions`]).
    Transaction(crate::TransactionCall),
}

/// The longest ttl an agent may register for: past it, a killed agent would be named
/// for too long.
pub const MAX_AGENT_TTL_MS: u64 = 60_000;

/// A Kafka-serving agent as it registers with metadata.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AgentRecord {
    /// The broker id clients know it by.
    pub id: i32,
    /// The address clients are told to connect to.
    pub host: String,
    pub port: u16,
    /// Its zone (Kafka's `broker.rack`); empty when not set.
    pub rack: String,
}

/// The live agents, by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentList {
    pub agents: Vec<AgentRecord>,
    /// False while the answering leader has run for less than one agent ttl: agents alive
    /// but not yet heard from by it may be missing.
    pub settled: bool,
}

/// A tracked consumer's committed position: the next record it will read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerPosition {
    pub basin: String,
    pub stream: String,
    pub name: String,
    pub seq_num: u64,
    /// Metadata's clock when it was committed (ms).
    pub updated_ms: u64,
    /// What the committer kept beside the position (a Kafka commit's metadata string);
    /// empty when none.
    pub commit_metadata: String,
}

impl ConsumerPosition {
    /// Longest consumer name, in bytes.
    pub const MAX_NAME_BYTES: usize = 128;
    /// Longest commit metadata, in bytes (Kafka's `offset.metadata.max.bytes` default).
    pub const MAX_COMMIT_METADATA_BYTES: usize = 4096;
}

/// An access token as metadata keeps it: the id, the SHA-256 of the secret (never the
/// secret itself) and what it permits, encoded by the client API (opaque here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessTokenRecord {
    pub id: String,
    pub secret_hash: Vec<u8>,
    pub info: Vec<u8>,
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
            CatalogCall::PlanCompaction { .. } => "plan_compaction",
            CatalogCall::CompactedThrough { .. } => "compacted_through",
            CatalogCall::ListProducers { .. } => "list_producers",
            CatalogCall::CommitCompaction { .. } => "commit_compaction",
            CatalogCall::PlanKeyCompaction { .. } => "plan_key_compaction",
            CatalogCall::PlanDefragment { .. } => "plan_defragment",
            CatalogCall::KeyCompacted { .. } => "key_compacted",
            CatalogCall::IssueAccessToken { .. } => "issue_access_token",
            CatalogCall::AccessTokenBySecret { .. } => "access_token_by_secret",
            CatalogCall::ListAccessTokens { .. } => "list_access_tokens",
            CatalogCall::RevokeAccessToken { .. } => "revoke_access_token",
            CatalogCall::CommitConsumer { .. } => "commit_consumer",
            CatalogCall::GetConsumer { .. } => "get_consumer",
            CatalogCall::ListConsumers { .. } => "list_consumers",
            CatalogCall::DeleteConsumer { .. } => "delete_consumer",
            CatalogCall::AgentHeartbeat { .. } => "agent_heartbeat",
            CatalogCall::Transaction(_) => "transaction",
        }
    }

    /// Creates are idempotent with a request token; reconfigurations set absolute
    /// values; a delete sent twice could answer "not found" for its own success.
    pub fn retry(&self) -> Retry {
        match self {
            CatalogCall::GetBasin { .. }
            | CatalogCall::ListBasins { .. }
            | CatalogCall::GetStream { .. }
            | CatalogCall::ListStreams { .. }
            | CatalogCall::PlanCompaction { .. }
            | CatalogCall::CompactedThrough { .. }
            | CatalogCall::ListProducers { .. }
            | CatalogCall::PlanKeyCompaction { .. }
            | CatalogCall::PlanDefragment { .. }
            | CatalogCall::AccessTokenBySecret { .. }
            | CatalogCall::ListAccessTokens { .. }
            | CatalogCall::GetConsumer { .. }
            | CatalogCall::ListConsumers { .. } => Retry::Read,
            // Sets an absolute position; a conditional one could fail for its own success.
            CatalogCall::CommitConsumer { expected, .. } => {
                if expected.is_some() {
                    Retry::Once
                } else {
                    Retry::Idempotent
                }
            }
            CatalogCall::CreateBasin { request_token, .. } | CatalogCall::CreateStream { request_token, .. } => {
                if request_token.is_some() {
                    Retry::Idempotent
                } else {
                    Retry::Once
                }
            }
            CatalogCall::ReconfigureBasin { .. } | CatalogCall::ReconfigureStream { .. } => Retry::Idempotent,
            // Removing what is gone already is done too.
            CatalogCall::DeleteConsumer { .. } => Retry::Idempotent,
            // A revoke or issue sent twice could answer "not found" or "exists" for its own success.
            CatalogCall::DeleteBasin { .. }
            | CatalogCall::DeleteStream { .. }
            | CatalogCall::IssueAccessToken { .. }
            | CatalogCall::RevokeAccessToken { .. } => Retry::Once,
            // A commit applied twice accepts nothing the second time.
            CatalogCall::CommitCompaction { .. } => Retry::Idempotent,
            // Sets an absolute cursor.
            CatalogCall::KeyCompacted { .. } => Retry::Idempotent,
            // A renewal sent twice renews once more.
            CatalogCall::AgentHeartbeat { .. } => Retry::Idempotent,
            CatalogCall::Transaction(call) => match call.op {
                crate::TransactionOp::Describe | crate::TransactionOp::List => Retry::Read,
                // Adding twice adds once; ending twice the same way answers the first
                // end; an init sent twice bumps the epoch twice, and the caller uses the
                // epoch it is answered.
                _ => Retry::Idempotent,
            },
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
    CompactionPlan(CompactionPlan),
    /// How many replacements a compaction commit applied.
    CompactionAccepted(u32),
    /// A stream's compaction cursor.
    CompactedThrough(u64),
    Producers(Vec<crate::ProducerSummary>),
    KeyCompactionTargets(Vec<KeyCompactionTarget>),
    AccessToken(Option<AccessTokenRecord>),
    AccessTokens(ListPage<AccessTokenRecord>),
    Consumer(Option<ConsumerPosition>),
    Consumers(ListPage<ConsumerPosition>),
    Agents(AgentList),
    /// The transactional ids a transaction call is about, after it.
    Transactions(Vec<crate::TransactionState>),
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

    pub fn into_compaction_plan(self) -> Result<CompactionPlan> {
        match self {
            CatalogReply::CompactionPlan(plan) => Ok(plan),
            other => Err(unexpected("a compaction plan", &other)),
        }
    }

    pub fn into_compaction_accepted(self) -> Result<u32> {
        match self {
            CatalogReply::CompactionAccepted(accepted) => Ok(accepted),
            other => Err(unexpected("a compaction outcome", &other)),
        }
    }

    pub fn into_key_compaction_targets(self) -> Result<Vec<KeyCompactionTarget>> {
        match self {
            CatalogReply::KeyCompactionTargets(targets) => Ok(targets),
            other => Err(unexpected("key compaction targets", &other)),
        }
    }

    pub fn into_access_token(self) -> Result<Option<AccessTokenRecord>> {
        match self {
            CatalogReply::AccessToken(token) => Ok(token),
            other => Err(unexpected("an access token", &other)),
        }
    }

    pub fn into_access_tokens(self) -> Result<ListPage<AccessTokenRecord>> {
        match self {
            CatalogReply::AccessTokens(page) => Ok(page),
            other => Err(unexpected("an access token page", &other)),
        }
    }

    pub fn into_consumer(self) -> Result<Option<ConsumerPosition>> {
        match self {
            CatalogReply::Consumer(position) => Ok(position),
            other => Err(unexpected("a consumer position", &other)),
        }
    }

    pub fn into_compacted_through(self) -> Result<u64> {
        match self {
            CatalogReply::CompactedThrough(seq) => Ok(seq),
            other => Err(unexpected("a compaction cursor", &other)),
        }
    }

    pub fn into_producers(self) -> Result<Vec<crate::ProducerSummary>> {
        match self {
            CatalogReply::Producers(producers) => Ok(producers),
            other => Err(unexpected("a producer list", &other)),
        }
    }

    pub fn into_consumers(self) -> Result<ListPage<ConsumerPosition>> {
        match self {
            CatalogReply::Consumers(page) => Ok(page),
            other => Err(unexpected("a consumer page", &other)),
        }
    }

    pub fn into_agents(self) -> Result<AgentList> {
        match self {
            CatalogReply::Agents(list) => Ok(list),
            other => Err(unexpected("the agent list", &other)),
        }
    }

    pub fn into_transactions(self) -> Result<Vec<crate::TransactionState>> {
        match self {
            CatalogReply::Transactions(states) => Ok(states),
            other => Err(unexpected("transactions", &other)),
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
