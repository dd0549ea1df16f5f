//! [`CatalogCall`] and [`CatalogReply`] as `shale.metadata.v1` messages.

use shale_proto::metadata_rpc as pb;

use crate::records;
use crate::records::{consumer_from_wire, consumer_to_wire, token_from_wire, token_to_wire};
use crate::transactions;
use crate::wire::id_from_wire;
use crate::wire::malformed;
use crate::{
    AgentList, AgentRecord, CatalogCall, CatalogReply, CompactionPlan, CompactionRun, IndexEntry, KeyCompactionTarget,
    KeyCursor, ListPage, ProducerSummary, Replacement, Result, StreamInfo, StreamSummary,
};

pub fn catalog_call_to_wire(call: &CatalogCall) -> pb::CatalogCall {
    use pb::catalog_call::Call;
    let stream_ref = |basin: &str, stream: &str| pb::StreamRef { basin: basin.into(), stream: stream.into() };
    let list = |basin: &str, prefix: &str, start_after: &str, limit: usize| pb::ListRequest {
        basin: basin.into(),
        prefix: prefix.into(),
        start_after: start_after.into(),
        limit: u32::try_from(limit).unwrap_or(u32::MAX),
    };
    let call = match call {
        CatalogCall::GetBasin { basin } => Call::GetBasin(pb::BasinRef { basin: basin.clone() }),
        CatalogCall::CreateBasin { basin, config, request_token } => Call::CreateBasin(pb::CreateBasin {
            basin: basin.clone(),
            config: Some(records::basin_config_to_wire(config)),
            request_token: request_token.clone(),
        }),
        CatalogCall::ReconfigureBasin { basin, patch } => Call::ReconfigureBasin(pb::ReconfigureBasin {
            basin: basin.clone(),
            patch: Some(records::basin_patch_to_wire(patch)),
        }),
        CatalogCall::ListBasins { prefix, start_after, limit } => {
            Call::ListBasins(list("", prefix, start_after, *limit))
        }
        CatalogCall::DeleteBasin { basin } => Call::DeleteBasin(pb::BasinRef { basin: basin.clone() }),
        CatalogCall::GetStream { basin, stream } => Call::GetStream(stream_ref(basin, stream)),
        CatalogCall::CreateStream { basin, stream, config, request_token } => Call::CreateStream(pb::CreateStream {
            basin: basin.clone(),
            stream: stream.clone(),
            config: Some(records::stream_config_to_wire(config)),
            request_token: request_token.clone(),
        }),
        CatalogCall::ReconfigureStream { basin, stream, patch } => Call::ReconfigureStream(pb::ReconfigureStream {
            basin: basin.clone(),
            stream: stream.clone(),
            patch: Some(records::stream_patch_to_wire(patch)),
        }),
        CatalogCall::ListStreams { basin, prefix, start_after, limit } => {
            Call::ListStreams(list(basin, prefix, start_after, *limit))
        }
        CatalogCall::DeleteStream { basin, stream } => Call::DeleteStream(stream_ref(basin, stream)),
        CatalogCall::PlanCompaction { shard, shards, min_age_ms, max_bytes, remerge_below, min_bytes, max_wait_ms } => {
            Call::PlanCompaction(pb::PlanCompaction {
                shard: *shard,
                shards: *shards,
                min_age_ms: *min_age_ms,
                max_bytes: *max_bytes,
                remerge_below: *remerge_below,
                min_bytes: *min_bytes,
                max_wait_ms: *max_wait_ms,
            })
        }
        CatalogCall::CompactedThrough { basin, stream } => Call::CompactedThrough(stream_ref(basin, stream)),
        CatalogCall::ListProducers { basin, stream } => Call::ListProducers(stream_ref(basin, stream)),
        CatalogCall::CommitCompaction { segment_id, replacements } => Call::CommitCompaction(pb::CommitCompaction {
            segment_id: segment_id.to_be_bytes().to_vec(),
            replacements: replacements
                .iter()
                .map(|r| pb::Replacement {
                    stream_id: r.stream_id,
                    basin: r.basin.clone(),
                    stream: r.stream.clone(),
                    old_entries: r.old.iter().map(IndexEntry::encode).collect(),
                    new_entry: r.new.encode(),
                })
                .collect(),
        }),
        CatalogCall::PlanKeyCompaction { shard, shards } => {
            Call::PlanKeyCompaction(pb::PlanKeyCompaction { shard: *shard, shards: *shards })
        }
        CatalogCall::PlanDefragment { shard, shards, max_bytes } => {
            Call::PlanDefragment(pb::PlanDefragment { shard: *shard, shards: *shards, max_bytes: *max_bytes })
        }
        CatalogCall::KeyCompacted { stream_id, cursor } => {
            Call::KeyCompacted(pb::KeyCompacted { stream_id: *stream_id, cursor: Some(key_cursor_to_wire(cursor)) })
        }
        CatalogCall::IssueAccessToken { record } => Call::IssueAccessToken(token_to_wire(record)),
        CatalogCall::AccessTokenBySecret { secret_hash } => {
            Call::AccessTokenBySecret(pb::AccessTokenSecret { secret_hash: secret_hash.clone() })
        }
        CatalogCall::ListAccessTokens { prefix, start_after, limit } => {
            Call::ListAccessTokens(list("", prefix, start_after, *limit))
        }
        CatalogCall::RevokeAccessToken { id } => Call::RevokeAccessToken(pb::AccessTokenRef { id: id.clone() }),
        CatalogCall::CommitConsumer { basin, stream, name, seq_num, expected, commit_metadata } => {
            Call::CommitConsumer(pb::ConsumerCommit {
                basin: basin.clone(),
                stream: stream.clone(),
                name: name.clone(),
                seq_num: *seq_num,
                expected: *expected,
                commit_metadata: commit_metadata.clone(),
            })
        }
        CatalogCall::DeleteConsumer { basin, stream, name } => {
            Call::DeleteConsumer(pb::ConsumerRef { basin: basin.clone(), stream: stream.clone(), name: name.clone() })
        }
        CatalogCall::GetConsumer { basin, stream, name } => {
            Call::GetConsumer(pb::ConsumerRef { basin: basin.clone(), stream: stream.clone(), name: name.clone() })
        }
        CatalogCall::ListConsumers { basin, stream, start_after, limit } => Call::ListConsumers(pb::ConsumerList {
            basin: basin.clone(),
            stream: stream.clone(),
            start_after: start_after.clone(),
            limit: u32::try_from(*limit).unwrap_or(u32::MAX),
        }),
        CatalogCall::AgentHeartbeat { agent, ttl_ms } => {
            Call::AgentHeartbeat(pb::AgentHeartbeat { agent: Some(agent_to_wire(agent)), ttl_ms: *ttl_ms })
        }
        CatalogCall::Transaction(call) => Call::Transaction(transactions::transaction_call_to_wire(call)),
    };
    pb::CatalogCall { call: Some(call) }
}

pub fn catalog_call_from_wire(call: pb::CatalogCall) -> Result<CatalogCall> {
    use pb::catalog_call::Call;
    Ok(match call.call.ok_or_else(|| malformed("catalog call"))? {
        Call::GetBasin(r) => CatalogCall::GetBasin { basin: r.basin },
        Call::CreateBasin(r) => CatalogCall::CreateBasin {
            basin: r.basin,
            config: records::basin_config_from_wire(r.config.unwrap_or_default())?,
            request_token: r.request_token,
        },
        Call::ReconfigureBasin(r) => CatalogCall::ReconfigureBasin {
            basin: r.basin,
            patch: records::basin_patch_from_wire(r.patch.unwrap_or_default())?,
        },
        Call::ListBasins(r) => {
            CatalogCall::ListBasins { prefix: r.prefix, start_after: r.start_after, limit: r.limit as usize }
        }
        Call::DeleteBasin(r) => CatalogCall::DeleteBasin { basin: r.basin },
        Call::GetStream(r) => CatalogCall::GetStream { basin: r.basin, stream: r.stream },
        Call::CreateStream(r) => CatalogCall::CreateStream {
            basin: r.basin,
            stream: r.stream,
            config: records::stream_config_from_wire(r.config.unwrap_or_default())?,
            request_token: r.request_token,
        },
        Call::ReconfigureStream(r) => CatalogCall::ReconfigureStream {
            basin: r.basin,
            stream: r.stream,
            patch: records::stream_patch_from_wire(r.patch.unwrap_or_default())?,
        },
        Call::ListStreams(r) => CatalogCall::ListStreams {
            basin: r.basin,
            prefix: r.prefix,
            start_after: r.start_after,
            limit: r.limit as usize,
        },
        Call::DeleteStream(r) => CatalogCall::DeleteStream { basin: r.basin, stream: r.stream },
        Call::PlanCompaction(r) => CatalogCall::PlanCompaction {
            shard: r.shard,
            shards: r.shards,
            min_age_ms: r.min_age_ms,
            max_bytes: r.max_bytes,
            remerge_below: r.remerge_below,
            min_bytes: r.min_bytes,
            max_wait_ms: r.max_wait_ms,
        },
        Call::CommitCompaction(r) => CatalogCall::CommitCompaction {
            segment_id: id_from_wire(&r.segment_id, "segment id")?,
            replacements: r
                .replacements
                .into_iter()
                .map(|r| {
                    Ok(Replacement {
                        stream_id: r.stream_id,
                        basin: r.basin,
                        stream: r.stream,
                        old: entries_from_wire(&r.old_entries)?,
                        new: entry(&r.new_entry)?,
                    })
                })
                .collect::<Result<_>>()?,
        },
        Call::PlanKeyCompaction(r) => CatalogCall::PlanKeyCompaction { shard: r.shard, shards: r.shards },
        Call::PlanDefragment(r) => {
            CatalogCall::PlanDefragment { shard: r.shard, shards: r.shards, max_bytes: r.max_bytes }
        }
        Call::KeyCompacted(r) => CatalogCall::KeyCompacted {
            stream_id: r.stream_id,
            cursor: key_cursor_from_wire(r.cursor.unwrap_or_default()),
        },
        Call::IssueAccessToken(r) => CatalogCall::IssueAccessToken { record: token_from_wire(r) },
        Call::AccessTokenBySecret(r) => CatalogCall::AccessTokenBySecret { secret_hash: r.secret_hash },
        Call::ListAccessTokens(r) => {
            CatalogCall::ListAccessTokens { prefix: r.prefix, start_after: r.start_after, limit: r.limit as usize }
        }
        Call::RevokeAccessToken(r) => CatalogCall::RevokeAccessToken { id: r.id },
        Call::CommitConsumer(r) => CatalogCall::CommitConsumer {
            basin: r.basin,
            stream: r.stream,
            name: r.name,
            seq_num: r.seq_num,
            expected: r.expected,
            commit_metadata: r.commit_metadata,
        },
        Call::GetConsumer(r) => CatalogCall::GetConsumer { basin: r.basin, stream: r.stream, name: r.name },
        Call::DeleteConsumer(r) => CatalogCall::DeleteConsumer { basin: r.basin, stream: r.stream, name: r.name },
        Call::CompactedThrough(r) => CatalogCall::CompactedThrough { basin: r.basin, stream: r.stream },
        Call::ListProducers(r) => CatalogCall::ListProducers { basin: r.basin, stream: r.stream },
        Call::ListConsumers(r) => CatalogCall::ListConsumers {
            basin: r.basin,
            stream: r.stream,
            start_after: r.start_after,
            limit: r.limit as usize,
        },
        Call::AgentHeartbeat(r) => CatalogCall::AgentHeartbeat {
            agent: agent_from_wire(r.agent.ok_or_else(|| malformed("agent heartbeat without its agent"))?)?,
            ttl_ms: r.ttl_ms,
        },
        Call::Transaction(r) => CatalogCall::Transaction(transactions::transaction_call_from_wire(r)?),
    })
}

fn producer_to_wire(p: &ProducerSummary) -> pb::ProducerSummary {
    pb::ProducerSummary {
        producer: p.producer.clone(),
        last_seq: p.last_seq,
        last_count: p.last_count,
        last_timestamp: p.last_timestamp,
        last_active_ms: p.last_active_ms,
    }
}

fn producer_from_wire(p: pb::ProducerSummary) -> ProducerSummary {
    ProducerSummary {
        producer: p.producer,
        last_seq: p.last_seq,
        last_count: p.last_count,
        last_timestamp: p.last_timestamp,
        last_active_ms: p.last_active_ms,
    }
}

fn agent_to_wire(agent: &AgentRecord) -> pb::AgentRecord {
    pb::AgentRecord { id: agent.id, host: agent.host.clone(), port: u32::from(agent.port), rack: agent.rack.clone() }
}

fn agent_from_wire(agent: pb::AgentRecord) -> Result<AgentRecord> {
    let port = u16::try_from(agent.port).map_err(|_| malformed("agent port"))?;
    Ok(AgentRecord { id: agent.id, host: agent.host, port, rack: agent.rack })
}

fn entry(bytes: &[u8]) -> Result<IndexEntry> {
    IndexEntry::decode(bytes).ok_or_else(|| malformed("index entry"))
}

fn entries_from_wire(entries: &[Vec<u8>]) -> Result<Vec<IndexEntry>> {
    entries.iter().map(|bytes| entry(bytes)).collect()
}

pub fn catalog_reply_to_wire(reply: &CatalogReply) -> pb::CatalogReply {
    use pb::catalog_reply::Reply;
    let (reply, created) = match reply {
        CatalogReply::Basin { record, created } => (Reply::Basin(records::basin_record_to_wire(record)), *created),
        CatalogReply::Stream { info, created } => {
            (Reply::Stream(records::stream_record_to_wire(&info.record)), *created)
        }
        CatalogReply::Basins(page) => (
            Reply::Basins(pb::BasinPage {
                basins: page.items.iter().map(records::basin_record_to_wire).collect(),
                has_more: page.has_more,
            }),
            false,
        ),
        CatalogReply::Streams(page) => (
            Reply::Streams(pb::StreamPage {
                streams: page
                    .items
                    .iter()
                    .map(|s| pb::StreamSummary { name: s.name.clone(), created_at_ms: s.created_at_ms, tail: s.tail })
                    .collect(),
                has_more: page.has_more,
            }),
            false,
        ),
        CatalogReply::Done => (Reply::Done(pb::Empty {}), false),
        CatalogReply::CompactionPlan(plan) => (
            Reply::CompactionPlan(pb::CompactionPlan {
                runs: plan
                    .runs
                    .iter()
                    .map(|run| pb::CompactionRun {
                        basin: run.basin.clone(),
                        stream: run.stream.clone(),
                        stream_id: run.stream_id,
                        entries: run.entries.iter().map(IndexEntry::encode).collect(),
                    })
                    .collect(),
                pending_bytes: plan.pending_bytes,
                oldest_sealed_ms: plan.oldest_sealed_ms,
                uncompacted_bytes: plan.uncompacted_bytes,
            }),
            false,
        ),
        CatalogReply::CompactionAccepted(accepted) => {
            (Reply::CompactionOutcome(pb::CompactionOutcome { accepted: *accepted }), false)
        }
        CatalogReply::CompactedThrough(seq) => (Reply::CompactedThrough(*seq), false),
        CatalogReply::Producers(producers) => {
            (Reply::Producers(pb::ProducerList { producers: producers.iter().map(producer_to_wire).collect() }), false)
        }
        CatalogReply::KeyCompactionTargets(targets) => (
            Reply::KeyCompactionTargets(pb::KeyCompactionTargets {
                targets: targets
                    .iter()
                    .map(|t| pb::KeyCompactionTarget {
                        basin: t.basin.clone(),
                        stream: t.stream.clone(),
                        record: Some(records::stream_record_to_wire(&t.record)),
                        cursor: Some(key_cursor_to_wire(&t.cursor)),
                    })
                    .collect(),
            }),
            false,
        ),
        CatalogReply::AccessToken(token) => {
            (Reply::AccessToken(pb::AccessTokenFound { token: token.as_ref().map(token_to_wire) }), false)
        }
        CatalogReply::AccessTokens(page) => (
            Reply::AccessTokens(pb::AccessTokenPage {
                tokens: page.items.iter().map(token_to_wire).collect(),
                has_more: page.has_more,
            }),
            false,
        ),
        CatalogReply::Consumer(position) => {
            (Reply::Consumer(pb::ConsumerFound { position: position.as_ref().map(consumer_to_wire) }), false)
        }
        CatalogReply::Consumers(page) => (
            Reply::Consumers(pb::ConsumerPage {
                consumers: page.items.iter().map(consumer_to_wire).collect(),
                has_more: page.has_more,
            }),
            false,
        ),
        CatalogReply::Agents(list) => (
            Reply::Agents(pb::AgentList {
                agents: list.agents.iter().map(agent_to_wire).collect(),
                settled: list.settled,
            }),
            false,
        ),
        CatalogReply::Transactions(states) => (
            Reply::Transactions(pb::TransactionReply {
                transactions: states.iter().map(transactions::transaction_to_wire).collect(),
            }),
            false,
        ),
    };
    pb::CatalogReply { reply: Some(reply), created }
}

/// The reply to `call`: a stream record comes back without its names, which the call has.
pub fn catalog_reply_from_wire(call: &CatalogCall, reply: pb::CatalogReply) -> Result<CatalogReply> {
    use pb::catalog_reply::Reply;
    let created = reply.created;
    Ok(match reply.reply.ok_or_else(|| malformed("catalog reply"))? {
        Reply::Basin(record) => CatalogReply::Basin { record: records::basin_record_from_wire(record)?, created },
        Reply::Stream(record) => {
            let (basin, stream) = match call {
                CatalogCall::GetStream { basin, stream }
                | CatalogCall::CreateStream { basin, stream, .. }
                | CatalogCall::ReconfigureStream { basin, stream, .. } => (basin.clone(), stream.clone()),
                _ => return Err(malformed("stream record for a call about no stream")),
            };
            let record = records::stream_record_from_wire(record)?;
            CatalogReply::Stream { info: StreamInfo { basin, name: stream, record }, created }
        }
        Reply::Basins(page) => CatalogReply::Basins(ListPage {
            items: page.basins.into_iter().map(records::basin_record_from_wire).collect::<Result<_>>()?,
            has_more: page.has_more,
        }),
        Reply::Streams(page) => CatalogReply::Streams(ListPage {
            items: page
                .streams
                .into_iter()
                .map(|s| StreamSummary { name: s.name, created_at_ms: s.created_at_ms, tail: s.tail })
                .collect(),
            has_more: page.has_more,
        }),
        Reply::Done(_) => CatalogReply::Done,
        Reply::CompactionPlan(plan) => CatalogReply::CompactionPlan(CompactionPlan {
            runs: plan
                .runs
                .into_iter()
                .map(|run| {
                    Ok(CompactionRun {
                        basin: run.basin,
                        stream: run.stream,
                        stream_id: run.stream_id,
                        entries: entries_from_wire(&run.entries)?,
                    })
                })
                .collect::<Result<_>>()?,
            pending_bytes: plan.pending_bytes,
            oldest_sealed_ms: plan.oldest_sealed_ms,
            uncompacted_bytes: plan.uncompacted_bytes,
        }),
        Reply::CompactionOutcome(outcome) => CatalogReply::CompactionAccepted(outcome.accepted),
        Reply::CompactedThrough(seq) => CatalogReply::CompactedThrough(seq),
        Reply::Producers(list) => CatalogReply::Producers(list.producers.into_iter().map(producer_from_wire).collect()),
        Reply::KeyCompactionTargets(targets) => CatalogReply::KeyCompactionTargets(
            targets
                .targets
                .into_iter()
                .map(|t| {
                    Ok(KeyCompactionTarget {
                        basin: t.basin,
                        stream: t.stream,
                        record: records::stream_record_from_wire(
                            t.record.ok_or_else(|| malformed("key compaction target without its stream"))?,
                        )?,
                        cursor: key_cursor_from_wire(t.cursor.unwrap_or_default()),
                    })
                })
                .collect::<Result<_>>()?,
        ),
        Reply::AccessToken(found) => CatalogReply::AccessToken(found.token.map(token_from_wire)),
        Reply::AccessTokens(page) => CatalogReply::AccessTokens(ListPage {
            items: page.tokens.into_iter().map(token_from_wire).collect(),
            has_more: page.has_more,
        }),
        Reply::Consumer(found) => CatalogReply::Consumer(found.position.map(consumer_from_wire)),
        Reply::Consumers(page) => CatalogReply::Consumers(ListPage {
            items: page.consumers.into_iter().map(consumer_from_wire).collect(),
            has_more: page.has_more,
        }),
        Reply::Agents(list) => CatalogReply::Agents(AgentList {
            agents: list.agents.into_iter().map(agent_from_wire).collect::<Result<_>>()?,
            settled: list.settled,
        }),
        Reply::Transactions(reply) => CatalogReply::Transactions(
            reply.transactions.into_iter().map(transactions::transaction_from_wire).collect::<Result<_>>()?,
        ),
    })
}

fn key_cursor_to_wire(cursor: &KeyCursor) -> pb::KeyCursor {
    pb::KeyCursor { through: cursor.through, tombstones_due_ms: cursor.tombstones_due_ms }
}

fn key_cursor_from_wire(cursor: pb::KeyCursor) -> KeyCursor {
    KeyCursor { through: cursor.through, tombstones_due_ms: cursor.tombstones_due_ms }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AccessTokenRecord, BasinConfig, ConsumerPosition, StreamConfig};
    use shale_proto::{TimestampPolicy, TimestampingMode};

    fn entry(first_seq: u64) -> IndexEntry {
        IndexEntry {
            segment_id: 7,
            offset: 10,
            len: 20,
            first_seq,
            record_count: 2,
            first_timestamp: 1,
            last_timestamp: 2,
            timestamp_floor: 0,
            timestamp_policy: TimestampPolicy { mode: TimestampingMode::ClientRequire, uncapped: true },
            arrival_cap: None,
            metered_end: None,
        }
    }

    fn agent() -> AgentRecord {
        AgentRecord { id: 7, host: "127.0.0.1".into(), port: 9092, rack: "zone-a".into() }
    }

    fn token() -> AccessTokenRecord {
        AccessTokenRecord { id: "reader".into(), secret_hash: vec![9; 32], info: b"{}".to_vec() }
    }

    #[test]
    fn every_call_and_reply_round_trips() {
        let calls = [
            CatalogCall::CreateBasin {
                basin: "b".into(),
                config: BasinConfig::default(),
                request_token: Some("t".into()),
            },
            CatalogCall::CreateStream {
                basin: "b".into(),
                stream: "s".into(),
                config: StreamConfig::default(),
                request_token: None,
            },
            CatalogCall::PlanCompaction {
                shard: 1,
                shards: 3,
                min_age_ms: 60_000,
                max_bytes: 1 << 26,
                remerge_below: 9,
                min_bytes: 1 << 23,
                max_wait_ms: 600_000,
            },
            CatalogCall::CommitCompaction {
                segment_id: u128::MAX - 1,
                replacements: vec![Replacement {
                    stream_id: 4,
                    basin: "b".into(),
                    stream: "s".into(),
                    old: vec![entry(0), entry(2)],
                    new: entry(0),
                }],
            },
            CatalogCall::IssueAccessToken { record: token() },
            CatalogCall::AccessTokenBySecret { secret_hash: vec![1; 32] },
            CatalogCall::ListAccessTokens { prefix: "p".into(), start_after: "a".into(), limit: 7 },
            CatalogCall::RevokeAccessToken { id: "t".into() },
            CatalogCall::CommitConsumer {
                basin: "b".into(),
                stream: "s".into(),
                name: "c".into(),
                seq_num: 9,
                expected: Some(4),
                commit_metadata: "meta".into(),
            },
            CatalogCall::GetConsumer { basin: "b".into(), stream: "s".into(), name: "c".into() },
            CatalogCall::DeleteConsumer { basin: "b".into(), stream: "s".into(), name: "c".into() },
            CatalogCall::ListConsumers { basin: "b".into(), stream: "s".into(), start_after: "a".into(), limit: 3 },
            CatalogCall::CompactedThrough { basin: "b".into(), stream: "s".into() },
            CatalogCall::ListProducers { basin: "b".into(), stream: "s".into() },
            CatalogCall::AgentHeartbeat { agent: agent(), ttl_ms: 3000 },
            CatalogCall::PlanKeyCompaction { shard: 1, shards: 3 },
            CatalogCall::PlanDefragment { shard: 0, shards: 2, max_bytes: 1 << 20 },
            CatalogCall::KeyCompacted { stream_id: 9, cursor: KeyCursor { through: 40, tombstones_due_ms: 77 } },
        ];
        for call in calls {
            assert_eq!(catalog_call_from_wire(catalog_call_to_wire(&call)).unwrap(), call);
        }
        let plan = CompactionPlan {
            runs: vec![CompactionRun { basin: "b".into(), stream: "s".into(), stream_id: 4, entries: vec![entry(0)] }],
            pending_bytes: 99,
            oldest_sealed_ms: 5,
            uncompacted_bytes: 120,
        };
        let call = CatalogCall::PlanCompaction {
            shard: 0,
            shards: 1,
            min_age_ms: 0,
            max_bytes: 1,
            remerge_below: 0,
            min_bytes: 0,
            max_wait_ms: 0,
        };
        let replies = [
            CatalogReply::CompactionPlan(plan),
            CatalogReply::CompactionAccepted(3),
            CatalogReply::CompactedThrough(12),
            CatalogReply::Producers(vec![ProducerSummary {
                producer: "kafka-7-0".into(),
                last_seq: 41,
                last_count: 3,
                last_timestamp: 1_700,
                last_active_ms: 1_800,
            }]),
            CatalogReply::Done,
            CatalogReply::AccessToken(Some(token())),
            CatalogReply::AccessToken(None),
            CatalogReply::AccessTokens(ListPage { items: vec![token()], has_more: true }),
            CatalogReply::Consumer(None),
            CatalogReply::Consumers(ListPage {
                items: vec![ConsumerPosition {
                    basin: "b".into(),
                    stream: "s".into(),
                    name: "c".into(),
                    seq_num: 3,
                    updated_ms: 8,
                    commit_metadata: "m".into(),
                }],
                has_more: false,
            }),
            CatalogReply::Agents(AgentList { agents: vec![agent()], settled: true }),
            CatalogReply::KeyCompactionTargets(vec![KeyCompactionTarget {
                basin: "b".into(),
                stream: "s".into(),
                record: crate::StreamRecord {
                    id: 9,
                    created_at_ms: 3,
                    next_seq: 50,
                    last_timestamp: 0,
                    trim_point: 2,
                    fencing_token: String::new(),
                    record_count: 48,
                    metered_bytes: 0,
                    request_token: None,
                    config: crate::StreamConfig {
                        key_compaction: Some(crate::KeyCompactionConfig {
                            enabled: Some(true),
                            delete_retention_ms: Some(100),
                            min_lag_ms: None,
                        }),
                        ..crate::StreamConfig::default()
                    },
                },
                cursor: KeyCursor { through: 40, tombstones_due_ms: 77 },
            }]),
        ];
        for reply in replies {
            assert_eq!(catalog_reply_from_wire(&call, catalog_reply_to_wire(&reply)).unwrap(), reply);
        }
    }
}
