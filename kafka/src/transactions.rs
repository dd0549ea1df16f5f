//! Kafka transactions: InitProducerId with a transactional id, AddPartitionsToTxn,
//! AddOffsetsToTxn, TxnOffsetCommit, EndTxn, DescribeTransactions and ListTransactions,
//! each one call to metadata, which keeps every transactional id's state (any agent can
//! finish a transaction another started). A transactional produce stages its batch
//! (`produce`); EndTxn makes every staged batch and the offsets committed in the
//! transaction visible in one metadata write, or drops them: a consumer never has an
//! aborted record to skip, so read_committed and read_uncommitted read the same.

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_transactions_response::{self, TopicData};
use kafka_protocol::messages::list_transactions_response;
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
    InitProducerIdResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId, TopicName, TransactionalId,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_metadata_contract::{
    GroupOffset, MetadataError, TransactionCall, TransactionOp, TransactionOutcome, TransactionState,
};
use shale_service::auth::{Operation, Target};

use crate::topics::{self, stream_of};
use crate::Kafka;

/// The longest transaction timeout a producer may ask for (Kafka's default
/// `transaction.max.timeout.ms`, 15 minutes).
pub const MAX_TIMEOUT_MS: i32 = 900_000;

/// The version from which each transaction API answers PRODUCER_FENCED; older ones get
/// INVALID_PRODUCER_EPOCH, as Kafka answers them.
fn fenced_code(version: i16, fenced_since: i16) -> ResponseError {
    if version >= fenced_since {
        ResponseError::ProducerFenced
    } else {
        ResponseError::InvalidProducerEpoch
    }
}

/// Kafka's code for a failed metadata transaction call at `version` of its API.
fn code_of(error: MetadataError, version: i16, fenced_since: i16) -> ResponseError {
    match crate::error::code_of(&error.into()) {
        ResponseError::ProducerFenced => fenced_code(version, fenced_since),
        code => code,
    }
}

/// Whether the caller may use transactional ids: its token must permit appending in the
/// basin (transactional ids are not named in token scopes; the topics are, per call).
pub fn may_use_transactions(kafka: &Kafka) -> bool {
    kafka.service.access().check(Operation::Append, Target::Basin(&kafka.config.basin)).is_ok()
}

async fn call(
    kafka: &Kafka,
    id: &TransactionalId,
    producer: (ProducerId, i16),
    op: TransactionOp,
) -> Result<TransactionState, MetadataError> {
    let call =
        TransactionCall { transactional_id: id.0.to_string(), producer_id: producer.0 .0, epoch: producer.1, op };
    let mut states = kafka.service.metadata().transaction(call).await?;
    states.pop().ok_or_else(|| MetadataError::Unavailable("a transaction call answered no state".into()))
}

/// InitProducerId with a transactional id: the id's producer id at its next epoch,
/// which fences every older one and aborts its open transaction.
pub async fn init(kafka: &Kafka, request: InitProducerIdRequest, version: i16) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    let Some(id) = request.transactional_id else { return response };
    if !may_use_transactions(kafka) {
        return response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if !(1..=MAX_TIMEOUT_MS).contains(&request.transaction_timeout_ms) {
        return response.with_error_code(ResponseError::InvalidTransactionTimeout.code());
    }
    let op = TransactionOp::Init {
        timeout_ms: request.transaction_timeout_ms as u64,
        new_producer_id: kafka.producer_ids.next(),
    };
    match call(kafka, &id, (request.producer_id, request.producer_epoch), op).await {
        Ok(state) => response.with_producer_id(ProducerId(state.producer_id)).with_producer_epoch(state.epoch),
        Err(e) => response.with_error_code(code_of(e, version, 4).code()),
    }
}

pub async fn add_partitions(
    kafka: &Kafka,
    request: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let topics = request.v3_and_below_topics;
    let answer = |error: &dyn Fn(&str) -> i16| {
        let results = topics
            .iter()
            .map(|topic| {
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|&p| {
                        AddPartitionsToTxnPartitionResult::default()
                            .with_partition_index(p)
                            .with_partition_error_code(error(&topic.name.0))
                    })
                    .collect();
                AddPartitionsToTxnTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_results_by_partition(partitions)
            })
            .collect();
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
    };
    if !may_use_transactions(kafka) {
        return answer(&|_| ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    // Kafka adds all or none: a topic refused fails the call, the others are not attempted.
    let mut refused = std::collections::HashMap::new();
    for topic in &topics {
        let name = topic.name.0.to_string();
        let error = if !topics::visible(kafka, &name) {
            Some(ResponseError::TopicAuthorizationFailed)
        } else {
            match topics::partition_count(kafka, &name).await {
                Ok(count) if topic.partitions.iter().all(|&p| p >= 0 && (p as u32) < count) => None,
                _ => Some(ResponseError::UnknownTopicOrPartition),
            }
        };
        if let Some(error) = error {
            refused.insert(name, error.code());
        }
    }
    if !refused.is_empty() {
        let not_attempted = ResponseError::OperationNotAttempted.code();
        return answer(&|topic| refused.get(topic).copied().unwrap_or(not_attempted));
    }
    let streams = topics.iter().flat_map(|t| t.partitions.iter().map(|&p| stream_of(&t.name.0, p))).collect();
    let op = TransactionOp::AddStreams { basin: kafka.config.basin.clone(), streams };
    let producer = (request.v3_and_below_producer_id, request.v3_and_below_producer_epoch);
    let code = match call(kafka, &request.v3_and_below_transactional_id, producer, op).await {
        Ok(_) => 0,
        Err(e) => code_of(e, version, 2).code(),
    };
    answer(&|_| code)
}

pub async fn add_offsets(kafka: &Kafka, request: AddOffsetsToTxnRequest, version: i16) -> AddOffsetsToTxnResponse {
    let response = AddOffsetsToTxnResponse::default();
    if !may_use_transactions(kafka) {
        return response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if !crate::groups::may_use_groups(kafka) {
        return response.with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let op = TransactionOp::AddGroup { group: request.group_id.0.to_string() };
    match call(kafka, &request.transactional_id, (request.producer_id, request.producer_epoch), op).await {
        Ok(_) => response,
        Err(e) => response.with_error_code(code_of(e, version, 2).code()),
    }
}

/// Offsets committed inside a transaction, sent to the group's coordinator: applied when
/// the transaction commits, with its records.
pub async fn commit_offsets(kafka: &Kafka, request: TxnOffsetCommitRequest, version: i16) -> TxnOffsetCommitResponse {
    let group = request.group_id.0.to_string();
    // From version 3 the member and generation are checked, as OffsetCommit's are
    // (KIP-447: a zombie consumer's offsets are refused).
    let member = if version >= 3 { request.member_id.to_string() } else { String::new() };
    let generation = if version >= 3 { request.generation_id } else { -1 };
    let instance = request.group_instance_id.as_ref().filter(|_| version >= 3).map(|i| i.to_string());
    let allowed = if !may_use_transactions(kafka) {
        Err(ResponseError::TransactionalIdAuthorizationFailed.code())
    } else {
        crate::groups::may_commit_in_transaction(kafka, &group, &member, instance.as_deref(), generation)
    };
    // Each partition's offset is staged or refused (`refusals`, in the request's order);
    // only the staged ones are committed.
    let mut offsets = Vec::new();
    let mut refusals = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            match staged_offset(&topic.name.0, p) {
                Ok(offset) => {
                    offsets.push(offset);
                    refusals.push(None);
                }
                Err(refused) => refusals.push(Some(refused)),
            }
        }
    }
    let code = match allowed {
        Err(code) => code,
        Ok(()) => {
            let op = TransactionOp::CommitOffsets { basin: kafka.config.basin.clone(), group, offsets };
            match call(kafka, &request.transactional_id, (request.producer_id, request.producer_epoch), op).await {
                Ok(_) => 0,
                Err(e) => code_of(e, version, 3).code(),
            }
        }
    };
    let mut refusals = refusals.into_iter();
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let code = refusals.next().flatten().unwrap_or(code);
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default().with_name(topic.name).with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// A partition's offset of a TxnOffsetCommit as staged, or the code refusing it: a
/// negative offset (INVALID_COMMIT_OFFSET_SIZE, as OffsetCommit answers it) or metadata
/// over 4,096 bytes (OFFSET_METADATA_TOO_LARGE).
fn staged_offset(topic: &str, p: &TxnOffsetCommitRequestPartition) -> Result<GroupOffset, i16> {
    let seq_num = u64::try_from(p.committed_offset).map_err(|_| ResponseError::InvalidCommitOffsetSize.code())?;
    let commit_metadata = crate::groups::commit_metadata(p.committed_metadata.as_ref())?;
    Ok(GroupOffset { stream: stream_of(topic, p.partition_index), seq_num, commit_metadata })
}

pub async fn end(kafka: &Kafka, request: EndTxnRequest, version: i16) -> EndTxnResponse {
    let response = EndTxnResponse::default();
    if !may_use_transactions(kafka) {
        return response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let op = TransactionOp::End { commit: request.committed };
    match call(kafka, &request.transactional_id, (request.producer_id, request.producer_epoch), op).await {
        Ok(_) => response,
        Err(e) => response.with_error_code(code_of(e, version, 2).code()),
    }
}

/// Kafka's name of a transactional id's state.
fn state_name(state: &TransactionState) -> &'static str {
    match (state.is_open(), state.last_outcome) {
        (true, _) => "Ongoing",
        (false, TransactionOutcome::Committed) => "CompleteCommit",
        (false, TransactionOutcome::Aborted) => "CompleteAbort",
        (false, TransactionOutcome::None) => "Empty",
    }
}

pub async fn describe(kafka: &Kafka, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse {
    let mut described = Vec::new();
    for id in request.transactional_ids {
        let answer = describe_transactions_response::TransactionState::default().with_transactional_id(id.clone());
        if !may_use_transactions(kafka) {
            described.push(answer.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code()));
            continue;
        }
        let call = TransactionCall {
            transactional_id: id.0.to_string(),
            producer_id: -1,
            epoch: -1,
            op: TransactionOp::Describe,
        };
        let answer = match kafka.service.metadata().transaction(call).await {
            Ok(states) => match states.first() {
                Some(state) => describe_one(answer, state),
                None => answer.with_error_code(ResponseError::TransactionalIdNotFound.code()),
            },
            Err(e) => answer.with_error_code(code_of(e, 0, 0).code()),
        };
        described.push(answer);
    }
    DescribeTransactionsResponse::default().with_transaction_states(described)
}

fn describe_one(
    answer: describe_transactions_response::TransactionState,
    state: &TransactionState,
) -> describe_transactions_response::TransactionState {
    let mut by_topic: std::collections::BTreeMap<String, Vec<i32>> = std::collections::BTreeMap::new();
    for (_, stream) in &state.streams {
        if let Some((topic, partition)) = topics::topic_partition_of(stream) {
            by_topic.entry(topic.to_string()).or_default().push(partition);
        }
    }
    let topics = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            TopicData::default().with_topic(TopicName(StrBytes::from_string(topic))).with_partitions(partitions)
        })
        .collect();
    answer
        .with_transaction_state(StrBytes::from_static_str(state_name(state)))
        .with_transaction_timeout_ms(i32::try_from(state.timeout_ms).unwrap_or(i32::MAX))
        .with_transaction_start_time_ms(if state.is_open() { state.started_ms as i64 } else { -1 })
        .with_producer_id(ProducerId(state.producer_id))
        .with_producer_epoch(state.epoch)
        .with_topics(topics)
}

/// ListTransactions: the transactional ids this broker coordinates, filtered by state,
/// producer id, duration (version 1: open longer than it; one not open is kept, as Kafka
/// keeps an `Empty` one, whose start is unknown) and a regular expression the whole id
/// matches (version 2; one that does not compile is INVALID_REGULAR_EXPRESSION).
pub async fn list(kafka: &Kafka, request: ListTransactionsRequest) -> ListTransactionsResponse {
    let response = ListTransactionsResponse::default();
    if !may_use_transactions(kafka) {
        return response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let pattern = match request.transactional_id_pattern.as_deref().filter(|p| !p.is_empty()) {
        None => None,
        Some(source) => match crate::patterns::whole_name(source) {
            Ok(pattern) => Some(pattern),
            Err(e) => {
                tracing::debug!(pattern = %source, error = %e, "transactions listed by a pattern that does not compile");
                return response.with_error_code(ResponseError::InvalidRegularExpression.code());
            }
        },
    };
    let now_ms = kafka.service.clock().now_ms();
    let running_long_enough = |state: &TransactionState| {
        let since = now_ms.saturating_sub(state.started_ms);
        request.duration_filter < 0
            || !state.is_open()
            || i64::try_from(since).unwrap_or(i64::MAX) > request.duration_filter
    };
    let call = TransactionCall { transactional_id: String::new(), producer_id: -1, epoch: -1, op: TransactionOp::List };
    let states = match kafka.service.metadata().transaction(call).await {
        Ok(states) => states,
        Err(e) => return response.with_error_code(code_of(e, 0, 0).code()),
    };
    let known = [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ];
    let unknown_filters: Vec<StrBytes> =
        request.state_filters.iter().filter(|f| !known.contains(&f.as_str())).cloned().collect();
    // Each broker lists the transactional ids it coordinates, as Kafka's do: a client
    // asking every broker sees each id once.
    let me = kafka.brokers.me().id;
    let listed = states
        .iter()
        .filter(|s| kafka.brokers.coordinator_of(&s.transactional_id).is_some_and(|b| b.id == me))
        .filter(|s| {
            request.state_filters.is_empty() || request.state_filters.iter().any(|f| f.as_str() == state_name(s))
        })
        .filter(|s| {
            request.producer_id_filters.is_empty() || request.producer_id_filters.contains(&ProducerId(s.producer_id))
        })
        .filter(|s| running_long_enough(s))
        .filter(|s| pattern.as_ref().is_none_or(|p| p.is_match(&s.transactional_id)))
        .map(|s| {
            list_transactions_response::TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(s.transactional_id.clone())))
                .with_producer_id(ProducerId(s.producer_id))
                .with_transaction_state(StrBytes::from_static_str(state_name(s)))
        })
        .collect();
    response.with_unknown_state_filters(unknown_filters).with_transaction_states(listed)
}
