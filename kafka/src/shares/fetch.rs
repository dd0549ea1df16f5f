//! ShareFetch and ShareAcknowledge (version 1): a member's acknowledgements applied to
//! the share-partitions this broker leads, then records handed out to it, each locked to
//! it for `[kafka] share_record_lock_duration`.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::BytesMut;
use futures::stream::{FuturesUnordered, StreamExt};
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{share_acknowledge_response as ack_response, ShareAcknowledgeRequest};
use kafka_protocol::messages::{ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_proto::record::SequencedRecord;
use shale_reader::{ReadLimits, ReadRequest, ReadStart};
use shale_service::ServiceError;

use super::partition::{AckRefusal, SharePartition};
use super::sessions::{SessionPartition, FINAL_EPOCH};
use crate::brokers::Brokers;
use crate::config::ShareReset;
use crate::groups::consumer_session_ms;
use crate::offsets::offset;
use crate::records::{encode_batch, is_shown};
use crate::topics::{self, stream_of};
use crate::Kafka;

/// The longest a fetch waits for records.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// A partition's acknowledgement batches: `(first, last, types)`.
type Batches = Vec<(i64, i64, Vec<i8>)>;

/// The partitions a ShareFetch's or ShareAcknowledge's topics name, with their
/// acknowledgement batches: `Vec<(topic id, partition, Batches)>` (the two requests'
/// types differ, their fields do not).
macro_rules! named_partitions {
    ($topics:expr) => {
        $topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    let batches = p.acknowledgement_batches.iter();
                    let batches: Batches =
                        batches.map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone())).collect();
                    (t.topic_id, p.partition_index, batches)
                })
            })
            .collect::<Vec<(uuid::Uuid, i32, Batches)>>()
    };
}

/// An answer for one partition: error, acknowledgement error, records and what of them
/// was handed out.
#[derive(Default)]
struct Answer {
    error: Option<(ResponseError, String)>,
    ack_error: Option<(ResponseError, String)>,
    records: Option<bytes::Bytes>,
    acquired: Vec<AcquiredRecords>,
    /// The partition's leader, when the fetch looked it up.
    leader: Option<i32>,
}

pub async fn fetch(kafka: &Kafka, request: ShareFetchRequest, client_id: &str) -> ShareFetchResponse {
    let lock_ms = i32::try_from(lock_ms(kafka)).unwrap_or(i32::MAX);
    let refuse = |error: ResponseError, why: String| {
        ShareFetchResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(why)))
            .with_acquisition_lock_timeout_ms(lock_ms)
    };
    let (group, member) = match caller(kafka, request.group_id.as_ref().map(|g| &g.0), request.member_id.as_ref()) {
        Ok(ids) => ids,
        Err((error, why)) => return refuse(error, why),
    };
    let epoch = request.share_session_epoch;
    let named = named_partitions!(request.topics);
    if epoch == 0 && named.iter().any(|(_, _, batches)| !batches.is_empty()) {
        return refuse(ResponseError::InvalidRequest, "A share session's first fetch acknowledges nothing.".into());
    }
    let forget: Vec<(uuid::Uuid, i32)> =
        request.forgotten_topics_data.iter().flat_map(|t| t.partitions.iter().map(move |&p| (t.topic_id, p))).collect();
    let (session, mut answers) = match begin(kafka, &group, &member, epoch, &named, &forget).await {
        Ok(begun) => begun,
        Err((error, why)) => return refuse(error, why),
    };
    if epoch == 0 {
        drop_moved_starts(kafka, &group, &session).await;
    }
    let max_records = usize::try_from(request.max_records).unwrap_or(0);
    if epoch != FINAL_EPOCH && max_records > 0 {
        let brokers = kafka.brokers.for_zone(crate::cluster::zone_of(client_id));
        let bytes = u64::try_from(request.max_bytes).unwrap_or(0).max(1);
        let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)).min(MAX_WAIT);
        let mut taken = hand_out(kafka, &group, &member, &session, &brokers, max_records, bytes, &mut answers).await;
        if taken == 0 && !wait.is_zero() {
            wait_for_records(kafka, &group, &session, wait).await;
            taken = hand_out(kafka, &group, &member, &session, &brokers, max_records, bytes, &mut answers).await;
        }
        tracing::debug!(%group, %member, taken, "share fetch");
    }
    let mut by_topic: BTreeMap<uuid::Uuid, Vec<PartitionData>> = BTreeMap::new();
    for ((topic_id, partition), answer) in answers {
        let data = PartitionData::default()
            .with_partition_index(partition)
            .with_error_code(answer.error.as_ref().map_or(0, |(e, _)| e.code()))
            .with_error_message(answer.error.map(|(_, why)| StrBytes::from_string(why)))
            .with_acknowledge_error_code(answer.ack_error.as_ref().map_or(0, |(e, _)| e.code()))
            .with_acknowledge_error_message(answer.ack_error.map(|(_, why)| StrBytes::from_string(why)))
            .with_current_leader(
                LeaderIdAndEpoch::default().with_leader_id(answer.leader.unwrap_or(-1)).with_leader_epoch(0),
            )
            // librdkafka reads a null record set as malformed: an empty one when none.
            .with_records(Some(answer.records.unwrap_or_default()))
            .with_acquired_records(answer.acquired);
        by_topic.entry(topic_id).or_default().push(data);
    }
    let responses = by_topic
        .into_iter()
        .map(|(topic_id, partitions)| {
            ShareFetchableTopicResponse::default().with_topic_id(topic_id).with_partitions(partitions)
        })
        .collect();
    ShareFetchResponse::default().with_acquisition_lock_timeout_ms(lock_ms).with_responses(responses)
}

pub async fn acknowledge(kafka: &Kafka, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse {
    let refuse = |error: ResponseError, why: String| {
        ShareAcknowledgeResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(why)))
    };
    let (group, member) = match caller(kafka, request.group_id.as_ref().map(|g| &g.0), request.member_id.as_ref()) {
        Ok(ids) => ids,
        Err((error, why)) => return refuse(error, why),
    };
    if request.share_session_epoch == 0 {
        return refuse(ResponseError::InvalidShareSessionEpoch, "Acknowledgements need an open share session.".into());
    }
    let named = named_partitions!(request.topics);
    let answers = match begin(kafka, &group, &member, request.share_session_epoch, &named, &[]).await {
        Ok((_, answers)) => answers,
        Err((error, why)) => return refuse(error, why),
    };
    let mut by_topic: BTreeMap<uuid::Uuid, Vec<ack_response::PartitionData>> = BTreeMap::new();
    for ((topic_id, partition), answer) in answers {
        let error = answer.error.or(answer.ack_error);
        let data = ack_response::PartitionData::default()
            .with_partition_index(partition)
            .with_error_code(error.as_ref().map_or(0, |(e, _)| e.code()))
            .with_error_message(error.map(|(_, why)| StrBytes::from_string(why)));
        by_topic.entry(topic_id).or_default().push(data);
    }
    let responses = by_topic
        .into_iter()
        .map(|(topic_id, partitions)| {
            ack_response::ShareAcknowledgeTopicResponse::default().with_topic_id(topic_id).with_partitions(partitions)
        })
        .collect();
    ShareAcknowledgeResponse::default().with_responses(responses)
}

/// The request's group and member, once this caller may use groups.
fn caller(
    kafka: &Kafka,
    group: Option<&StrBytes>,
    member: Option<&StrBytes>,
) -> Result<(String, String), (ResponseError, String)> {
    let (group, member) = (group.map(|g| g.to_string()), member.map(|m| m.to_string()));
    let (Some(group), Some(member)) = (group.filter(|g| !g.is_empty()), member.filter(|m| !m.is_empty())) else {
        return Err((ResponseError::InvalidRequest, "GroupId and MemberId can't be empty.".into()));
    };
    if !crate::groups::may_use_groups(kafka) {
        return Err((ResponseError::GroupAuthorizationFailed, format!("Group {group} is not authorized.")));
    }
    Ok((group, member))
}

/// Moves the member's session on, then applies each named partition's acknowledgements
/// (and, when the session closes, gives back what the member still holds). The
/// session's partitions, and an answer for each partition named.
async fn begin(
    kafka: &Kafka,
    group: &str,
    member: &str,
    epoch: i32,
    named: &[(uuid::Uuid, i32, Batches)],
    forget: &[(uuid::Uuid, i32)],
) -> Result<(Vec<SessionPartition>, BTreeMap<(uuid::Uuid, i32), Answer>), (ResponseError, String)> {
    let mut added = Vec::new();
    let mut answers = BTreeMap::new();
    for (topic_id, partition, _) in named {
        match name_of_id(kafka, *topic_id).await {
            Ok(Some(topic)) => added.push(SessionPartition { topic_id: *topic_id, topic, partition: *partition }),
            Ok(None) => {
                let why = format!("No topic with id {topic_id}.");
                answers.insert(
                    (*topic_id, *partition),
                    Answer { error: Some((ResponseError::UnknownTopicId, why)), ..Answer::default() },
                );
            }
            Err(e) => return Err((crate::error::code_of(&e), e.to_string())),
        }
    }
    let key = (group.to_string(), member.to_string());
    let now = kafka.shares.now();
    let (session, evicted) = {
        let mut sessions = kafka.shares.sessions();
        let evicted = sessions.evict_idle(now, consumer_session_ms(kafka));
        (sessions.advance(key, epoch, added.clone(), forget, now), evicted)
    };
    for ((idle_group, idle_member), partitions) in evicted {
        tracing::info!(group = %idle_group, member = %idle_member, "idle share session evicted");
        give_back(kafka, &idle_group, &idle_member, &partitions).await;
    }
    let session = session.map_err(|error| {
        (error, format!("Share session of member {member} in group {group}: {}", error_name(error)))
    })?;
    for part in &added {
        let batches = named.iter().find(|(id, p, _)| *id == part.topic_id && *p == part.partition).map(|n| &n.2);
        let mut answer = Answer::default();
        if let Some(batches) = batches.filter(|b| !b.is_empty()) {
            answer.ack_error = apply_acks(kafka, group, member, part, batches).await.err();
        }
        answers.insert((part.topic_id, part.partition), answer);
    }
    if epoch == FINAL_EPOCH {
        give_back(kafka, group, member, &session).await;
    }
    Ok((session, answers))
}

/// At a share session's first fetch, each of its share-partitions held here is checked
/// against the start offset stored for it, which AlterShareGroupOffsets and
/// DeleteShareGroupOffsets change while the group has no members, at whichever broker
/// coordinates it. One whose stored start differs (or is gone) is dropped, records in
/// flight and all, and found again from what is stored at its next fetch. Every move of
/// the start made here is stored under the share-partition's lock, so the two differ only
/// after such a change, after a store that failed, or when another broker led the
/// partition meanwhile: handing records out again from what is stored is right in each.
async fn drop_moved_starts(kafka: &Kafka, group: &str, session: &[SessionPartition]) {
    for part in session {
        let stream = stream_of(&part.topic, part.partition);
        let Some(slot) = kafka.shares.held_partition(group, &stream) else { continue };
        let mut state = slot.lock().await;
        let Some(start) = state.as_ref().map(SharePartition::start) else { continue };
        match kafka.service.consumer_position(&kafka.config.basin, &stream, group).await {
            Ok(stored) if stored.as_ref().map(|p| p.seq_num) != Some(start) => {
                let stored = stored.map(|p| p.seq_num);
                tracing::info!(%group, %stream, start, ?stored, "share-partition start moved elsewhere: dropped");
                *state = None;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(%group, %stream, error = %e, "share-partition start not checked"),
        }
    }
}

/// Gives back, uncounted, the records `member` holds on `partitions`: its share session
/// closed or was evicted.
async fn give_back(kafka: &Kafka, group: &str, member: &str, partitions: &[SessionPartition]) {
    for part in partitions {
        let stream = stream_of(&part.topic, part.partition);
        let slot = kafka.shares.partition(group, &stream);
        let mut state = slot.lock().await;
        if let Some(state) = state.as_mut() {
            if state.release_member(member) {
                persist(kafka, group, &stream, state.start()).await;
            }
        }
    }
}

/// The name of the topic with id `id` (ids are derived from names, so a name once found
/// stays right); every topic is listed on a miss.
async fn name_of_id(kafka: &Kafka, id: uuid::Uuid) -> Result<Option<String>, ServiceError> {
    if let Some(name) = kafka.shares.names().get(&id) {
        return Ok(Some(name.clone()));
    }
    let all = topics::all_topics(kafka).await?;
    let mut names = kafka.shares.names();
    for name in all.into_keys() {
        names.insert(topics::topic_id(&name), name);
    }
    Ok(names.get(&id).cloned())
}

fn error_name(error: ResponseError) -> &'static str {
    match error {
        ResponseError::ShareSessionNotFound => "not found",
        _ => "another epoch expected",
    }
}

/// Applies a partition's acknowledgement batches, all or none.
async fn apply_acks(
    kafka: &Kafka,
    group: &str,
    member: &str,
    part: &SessionPartition,
    batches: &Batches,
) -> Result<(), (ResponseError, String)> {
    let stream = stream_of(&part.topic, part.partition);
    let slot = kafka.shares.partition(group, &stream);
    let mut state = slot.lock().await;
    let Some(current) = state.as_mut() else {
        return Err((ResponseError::InvalidRecordState, "Nothing of this partition was handed out here.".into()));
    };
    let mut next: SharePartition = current.clone();
    let before = next.start();
    for (first, last, types) in batches {
        let (Ok(first), Ok(last)) = (u64::try_from(*first), u64::try_from(*last)) else {
            return Err((ResponseError::InvalidRequest, "Negative offsets.".into()));
        };
        next.acknowledge(member, first, last, types).map_err(|refusal| match refusal {
            AckRefusal::NotHeld(offset) => {
                (ResponseError::InvalidRecordState, format!("Offset {offset} is not held by member {member}."))
            }
            AckRefusal::Malformed => (ResponseError::InvalidRequest, "Malformed acknowledgement batch.".into()),
        })?;
    }
    let start = next.start();
    *current = next;
    if start != before {
        persist(kafka, group, &stream, start).await;
    }
    Ok(())
}

/// Hands records of the session's partitions to `member`, at most `max_records` and
/// about `bytes` in all, filling `answers`; how many.
#[allow(clippy::too_many_arguments)]
async fn hand_out(
    kafka: &Kafka,
    group: &str,
    member: &str,
    session: &[SessionPartition],
    brokers: &[crate::brokers::Broker],
    max_records: usize,
    bytes: u64,
    answers: &mut BTreeMap<(uuid::Uuid, i32), Answer>,
) -> usize {
    let me = kafka.brokers.me().id;
    let (mut taken, mut bytes_left) = (0, bytes);
    // Each fetch starts at another partition, so a busy one does not take every fetch's
    // whole bound from the others.
    let first = kafka.shares.next_rotation() % session.len().max(1);
    for part in session[first..].iter().chain(&session[..first]) {
        if taken >= max_records || bytes_left == 0 {
            break;
        }
        let answer = answers.entry((part.topic_id, part.partition)).or_default();
        let leader = Brokers::leader_of(brokers, &part.topic, part.partition);
        answer.leader = Some(leader);
        if !topics::visible(kafka, &part.topic) {
            answer.error =
                Some((ResponseError::TopicAuthorizationFailed, format!("Topic {} is not authorized.", part.topic)));
            continue;
        }
        if leader != me {
            answer.error = Some((ResponseError::NotLeaderOrFollower, "Another broker leads this partition.".into()));
            continue;
        }
        match take(kafka, group, member, part, max_records - taken, bytes_left).await {
            Ok((records, acquired)) if !acquired.is_empty() => {
                let mut out = BytesMut::new();
                encode_batch(&records, &mut out);
                bytes_left = bytes_left.saturating_sub(out.len() as u64);
                taken += acquired.iter().map(|a| (a.last_offset - a.first_offset + 1) as usize).sum::<usize>();
                answer.records = Some(out.freeze());
                answer.acquired = acquired;
            }
            Ok(_) => {}
            Err(e) => answer.error = Some((crate::error::code_of(&e), e.to_string())),
        }
    }
    taken
}

/// Reads the partition from its first record free to hand out and hands `member` what
/// it may take: the records taken and their ranges.
async fn take(
    kafka: &Kafka,
    group: &str,
    member: &str,
    part: &SessionPartition,
    max: usize,
    bytes: u64,
) -> Result<(Vec<SequencedRecord>, Vec<AcquiredRecords>), ServiceError> {
    let stream = stream_of(&part.topic, part.partition);
    let slot = kafka.shares.partition(group, &stream);
    let from = {
        let mut state = slot.lock().await;
        let state = match state.as_mut() {
            Some(state) => state,
            None => state.insert(SharePartition::starting_at(initial_start(kafka, group, &stream).await?)),
        };
        if state.expire(kafka.shares.now()) {
            persist(kafka, group, &stream, state.start()).await;
        }
        state.next_to_read()
    };
    let read = kafka.service.read(&read_from(kafka, &stream, from, Some(max), bytes, Duration::ZERO)).await?;
    let offsets: Vec<u64> = read.records.iter().filter(|r| is_shown(r)).map(|r| r.seq_num).collect();
    // A read that starts past `from` (clamped to the stream's trim point) shows the
    // records before it are gone.
    let readable_from = read.records.first().map_or(read.tail.seq_num, |r| r.seq_num);
    let until = kafka.shares.now().saturating_add(lock_ms(kafka));
    let ranges = match slot.lock().await.as_mut() {
        Some(state) => {
            if readable_from > from && state.skip_to(readable_from) {
                persist(kafka, group, &stream, state.start()).await;
            }
            state.acquire(member, &offsets, max, until)
        }
        None => Vec::new(),
    };
    let held = |seq: u64| ranges.iter().any(|r| (r.first..=r.last).contains(&seq));
    let records = read.records.into_iter().filter(|r| held(r.seq_num)).collect();
    let acquired = ranges
        .iter()
        .map(|r| {
            AcquiredRecords::default()
                .with_first_offset(offset(r.first))
                .with_last_offset(offset(r.last))
                .with_delivery_count(i16::try_from(r.deliveries).unwrap_or(i16::MAX))
        })
        .collect();
    Ok((records, acquired))
}

/// Waits up to `wait` for a record past what any session partition has handed out.
async fn wait_for_records(kafka: &Kafka, group: &str, session: &[SessionPartition], wait: Duration) {
    let mut waits = FuturesUnordered::new();
    for part in session {
        let stream = stream_of(&part.topic, part.partition);
        let Some(end) = kafka.shares.partition(group, &stream).lock().await.as_ref().map(SharePartition::end) else {
            continue;
        };
        let request = read_from(kafka, &stream, end, Some(1), 1, wait);
        waits.push(async move { kafka.service.read(&request).await });
    }
    let _ = tokio::time::timeout(wait, async {
        while let Some(read) = waits.next().await {
            if read.is_ok_and(|r| !r.records.is_empty()) {
                return;
            }
        }
    })
    .await;
}

/// Where the group starts on a partition: its stored start offset, else the reset
/// `[kafka] share_auto_offset_reset` names, stored before anything is handed out (a
/// restart must not move a `latest` start past records handed out and not yet done).
async fn initial_start(kafka: &Kafka, group: &str, stream: &str) -> Result<u64, ServiceError> {
    let basin = &kafka.config.basin;
    if let Some(position) = kafka.service.consumer_position(basin, stream, group).await? {
        return Ok(position.seq_num);
    }
    let start = match kafka.config.share_auto_offset_reset {
        ShareReset::Latest => kafka.service.check_tail(basin, stream).await?.seq_num,
        ShareReset::Earliest => 0,
    };
    kafka.service.commit_consumer(basin, stream, group, start, None, String::new()).await?;
    Ok(start)
}

/// Stores the group's start offset on the stream. A failure is logged: the records
/// before it would be handed out again after a restart, not lost.
async fn persist(kafka: &Kafka, group: &str, stream: &str, start: u64) {
    if let Err(e) = kafka.service.commit_consumer(&kafka.config.basin, stream, group, start, None, String::new()).await
    {
        tracing::warn!(%group, %stream, start, error = %e, "share-partition start offset not stored");
    }
}

/// A read of `stream` from `from`, its first record whole whatever `bytes` (as Kafka
/// answers a share fetch's first batch).
fn read_from(kafka: &Kafka, stream: &str, from: u64, count: Option<usize>, bytes: u64, wait: Duration) -> ReadRequest {
    ReadRequest {
        basin: kafka.config.basin.clone(),
        stream: stream.to_string(),
        start: ReadStart::SeqNum(from),
        limits: ReadLimits { count: count.map(|c| c as u64), bytes: Some(bytes.max(1)), at_least_one: true },
        until: None,
        clamp: true,
        wait,
    }
}

fn lock_ms(kafka: &Kafka) -> u64 {
    u64::try_from(kafka.config.share_record_lock_duration.as_millis()).unwrap_or(u64::MAX)
}
