//! Consumer groups under the classic protocol and under the consumer protocol (KIP-848:
//! `consumer_group`, `consumer_heartbeat`, `consumer_describe`, `assignors`; a group is
//! of one or the other while it has members). Membership, generations and assignments
//! live in memory with this process, the group's coordinator (`state`); a coordinator
//! that restarts forgets them and members rejoin, as they do when Kafka moves a group.
//! Committed offsets are tracked consumers in metadata (`offsets`): the group's name is
//! the consumer's on each partition's stream, so they are durable, survive any restart,
//! and show their lag through the consumer API and `/metrics`. DescribeGroups and
//! ListGroups (`listing`) show both.
//!
//! Waiting (a join until its round completes, a sync until the leader assigns) ticks at
//! least once a second, and each tick drops members whose session has run out, so no
//! background task is needed.

mod assignors;
mod consumer_describe;
mod consumer_group;
mod consumer_heartbeat;
mod listing;
mod offset_fetch;
mod offsets;
mod state;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_service::auth::{Operation, Target};
use shale_storage::Clock;
use tokio::sync::watch;

pub use consumer_describe::describe as describe_consumer_groups;
pub use consumer_heartbeat::heartbeat as consumer_heartbeat;
pub use listing::{describe, list};
pub use offset_fetch::fetch_offsets;
pub(crate) use offset_fetch::{stored_offsets, StoredOffset};
pub(crate) use offsets::{commit_metadata, has_offsets, partition_streams, store};
pub use offsets::{commit_offsets, delete, delete_offsets};
use state::{Group, Joined, Member, Phase, Refusal};

use crate::Kafka;

/// The protocol type of consumer groups, given to a group known only by its offsets.
const CONSUMER: &str = "consumer";

/// The longest a waiting join or sync goes without looking at the clock.
const TICK: Duration = Duration::from_secs(1);
/// The shortest session timeout a member may ask for (Kafka's
/// `group.min.session.timeout.ms`, lower than its 6 s so tests can expire members quickly).
pub const MIN_SESSION_TIMEOUT_MS: i32 = 1_000;
/// The longest session timeout a member may ask for (`group.max.session.timeout.ms`).
pub const MAX_SESSION_TIMEOUT_MS: i32 = 1_800_000;

pub struct Coordinator {
    clock: Arc<dyn Clock>,
    groups: Mutex<HashMap<String, Group>>,
    consumer_groups: Mutex<HashMap<String, consumer_group::ConsumerGroup>>,
    /// Bumped on every change, to wake waiting joins and syncs.
    changed: watch::Sender<u64>,
    next_member: std::sync::atomic::AtomicU64,
}

impl Coordinator {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        let start = shale_storage::ids::random_in(0..u64::from(u32::MAX));
        Self {
            clock,
            groups: Mutex::new(HashMap::new()),
            consumer_groups: Mutex::new(HashMap::new()),
            changed: watch::Sender::new(0),
            next_member: std::sync::atomic::AtomicU64::new(start),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Group>> {
        // A panic while holding the lock leaves plain data behind: keep serving.
        self.groups.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The classic groups and the consumer-protocol groups held in memory.
    pub fn sizes(&self) -> (usize, usize) {
        (self.lock().len(), self.consumer_lock().len())
    }

    fn consumer_lock(&self) -> MutexGuard<'_, HashMap<String, consumer_group::ConsumerGroup>> {
        self.consumer_groups.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The consumer-protocol groups, each without the members silent past
    /// `session_ms` (a group left with none is forgotten): what listings, commits and
    /// the other protocol's joins see, so members that all died do not outlive their
    /// sessions for want of a heartbeat.
    fn live_consumer_groups(&self, session_ms: u64) -> MutexGuard<'_, HashMap<String, consumer_group::ConsumerGroup>> {
        let now = self.now();
        let mut groups = self.consumer_lock();
        for group in groups.values_mut() {
            group.expire(now, session_ms);
        }
        groups.retain(|_, group| !group.members.is_empty());
        groups
    }

    /// Whether the classic group `id` has members whose sessions have not run out.
    fn has_classic_members(&self, id: &str) -> bool {
        let now = self.now();
        let mut groups = self.lock();
        let Some(group) = groups.get_mut(id) else { return false };
        if group.expire(now) {
            self.notify();
        }
        !group.members.is_empty()
    }

    /// Whether a classic group `id`, or a consumer-protocol group `id` with members
    /// within `session_ms`, is held here.
    pub(crate) fn holds(&self, id: &str, session_ms: u64) -> bool {
        self.lock().contains_key(id) || self.with_live_consumer_group(id, session_ms, |g| g.is_some())
    }

    /// `f` of the consumer-protocol group `id` as [`Self::live_consumer_groups`] would
    /// show it (only that group's members are checked).
    fn with_live_consumer_group<T>(
        &self,
        id: &str,
        session_ms: u64,
        f: impl FnOnce(Option<&consumer_group::ConsumerGroup>) -> T,
    ) -> T {
        self.with_consumer_group_mut(id, self.now(), session_ms, |group| {
            f(Some(&*group).filter(|g| !g.members.is_empty()))
        })
    }

    /// `f` of the consumer-protocol group `id` (a new one without members if there is
    /// none) once the members whose sessions ran out by `now` are gone; a group left
    /// without members is then forgotten.
    fn with_consumer_group_mut<T>(
        &self,
        id: &str,
        now: u64,
        session_ms: u64,
        f: impl FnOnce(&mut consumer_group::ConsumerGroup) -> T,
    ) -> T {
        let mut groups = self.consumer_lock();
        let group = groups.entry(id.to_string()).or_default();
        group.expire(now, session_ms);
        let out = f(group);
        if group.members.is_empty() {
            groups.remove(id);
        }
        out
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    fn notify(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn member_id(&self, client_id: &str) -> String {
        let n = self.next_member.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{client_id}-{n:016x}")
    }

    /// Waits for a change, at most until `deadline_ms` or one tick.
    async fn wait(&self, receiver: &mut watch::Receiver<u64>, deadline_ms: u64) {
        let left = Duration::from_millis(deadline_ms.saturating_sub(self.now())).min(TICK);
        let _ = tokio::time::timeout(left, receiver.changed()).await;
    }
}

fn code(refusal: Refusal) -> i16 {
    match refusal {
        Refusal::UnknownMember => ResponseError::UnknownMemberId,
        Refusal::IllegalGeneration => ResponseError::IllegalGeneration,
        Refusal::RebalanceInProgress => ResponseError::RebalanceInProgress,
        Refusal::InconsistentProtocol => ResponseError::InconsistentGroupProtocol,
        Refusal::FencedInstance => ResponseError::FencedInstanceId,
    }
    .code()
}

/// Whether the caller may use consumer groups: its token must permit reading in the
/// basin (groups are not named in token scopes; their offsets are, per partition).
pub fn may_use_groups(kafka: &Kafka) -> bool {
    let basin = Target::Basin(&kafka.config.basin);
    kafka.service.access().check(Operation::Read, basin).is_ok()
}

/// `Some(error)` when this broker does not serve `group` for this caller now:
/// GROUP_AUTHORIZATION_FAILED for a caller whose token may not use groups,
/// NOT_COORDINATOR when another broker coordinates it (the client asks FindCoordinator
/// again), COORDINATOR_NOT_AVAILABLE while this broker's list of brokers is not current.
/// Whatever it kept of a group it no longer coordinates is dropped: the group's members
/// rejoin at its coordinator.
pub(crate) fn not_coordinator(kafka: &Kafka, group: &str) -> Option<i16> {
    if !may_use_groups(kafka) {
        return Some(ResponseError::GroupAuthorizationFailed.code());
    }
    let error = match kafka.brokers.coordinator_of(group) {
        Some(broker) if broker.id == kafka.brokers.me().id => return None,
        Some(_) => ResponseError::NotCoordinator,
        None => ResponseError::CoordinatorNotAvailable,
    };
    let classic = kafka.groups.lock().remove(group).is_some();
    let share = kafka.shares.forget_group(group);
    if classic | share | kafka.groups.consumer_lock().remove(group).is_some() {
        tracing::info!(group, "kafka group moved to another coordinator");
        kafka.groups.notify();
    }
    Some(error.code())
}

/// How long a consumer-protocol member may be silent (`[kafka] consumer_session_timeout`).
pub(crate) fn consumer_session_ms(kafka: &Kafka) -> u64 {
    kafka.config.consumer_session_ms()
}

fn text(s: &StrBytes) -> String {
    s.to_string()
}

pub async fn join(kafka: &Kafka, request: JoinGroupRequest, version: i16, client_id: &str) -> JoinGroupResponse {
    let coordinator = &kafka.groups;
    let refuse =
        |error: ResponseError| JoinGroupResponse::default().with_error_code(error.code()).with_generation_id(-1);
    let group_id = request.group_id.0.to_string();
    if group_id.is_empty() {
        return refuse(ResponseError::InvalidGroupId);
    }
    if let Some(error) = not_coordinator(kafka, &group_id) {
        return JoinGroupResponse::default().with_error_code(error).with_generation_id(-1);
    }
    if !(MIN_SESSION_TIMEOUT_MS..=MAX_SESSION_TIMEOUT_MS).contains(&request.session_timeout_ms) {
        return refuse(ResponseError::InvalidSessionTimeout);
    }
    if coordinator.with_live_consumer_group(&group_id, consumer_session_ms(kafka), |g| g.is_some())
        || kafka.shares.holds(&group_id)
    {
        // A group under the consumer protocol with members (an empty one is dropped), or
        // a share group.
        return refuse(ResponseError::GroupIdNotFound);
    }
    let rebalance_timeout = if version >= 1 && request.rebalance_timeout_ms > 0 {
        request.rebalance_timeout_ms
    } else {
        request.session_timeout_ms
    };
    let instance = request.group_instance_id.as_ref().map(text);
    let named_id = !request.member_id.is_empty();
    let member_id = match text(&request.member_id) {
        id if id.is_empty() => coordinator.member_id(client_id),
        id => id,
    };
    let member = Member {
        client_id: client_id.to_string(),
        client_host: String::new(),
        group_instance_id: instance.clone(),
        session_timeout_ms: request.session_timeout_ms as u64,
        rebalance_timeout_ms: rebalance_timeout as u64,
        protocols: request.protocols.iter().map(|p| (text(&p.name), p.metadata.clone())).collect(),
        assignment: Bytes::new(),
        last_seen_ms: coordinator.now(),
        joined: true,
    };
    let protocol_type = text(&request.protocol_type);
    let mut receiver = coordinator.changed.subscribe();
    {
        let now = coordinator.now();
        let mut groups = coordinator.lock();
        let group = groups.entry(group_id.clone()).or_insert_with(|| Group::new(protocol_type.clone()));
        group.expire(now);
        if group.members.is_empty() {
            group.protocol_type = protocol_type.clone();
        } else if group.protocol_type != protocol_type {
            return refuse(ResponseError::InconsistentGroupProtocol);
        }
        // From version 4 a dynamic member that names no id is given one and asked to join
        // again with it (KIP-394), as Kafka does: a join whose answer is lost and resent
        // leaves no member behind to hold partitions until its session runs out.
        if version >= 4 && !named_id && instance.is_none() {
            group.give_id(member_id.clone(), now.saturating_add(request.session_timeout_ms as u64));
            return member_id_required(member_id);
        }
        // A named id must be one the group knows (a static member's, the one holding its
        // instance); without an id a static member is a new incarnation, which takes the
        // old one's place.
        let checked = if named_id { group.check_named_join(&member_id, instance.as_deref()) } else { Ok(()) };
        match checked.and_then(|()| group.join(&member_id, member, now)) {
            Err(refusal) => return JoinGroupResponse::default().with_error_code(code(refusal)).with_generation_id(-1),
            Ok(Joined::Replaced { leader_before }) => {
                coordinator.notify();
                return rejoined(group, &member_id, leader_before);
            }
            Ok(Joined::InRound) => {}
        }
    }
    coordinator.notify();
    loop {
        let deadline = {
            let now = coordinator.now();
            let mut groups = coordinator.lock();
            let Some(group) = groups.get_mut(&group_id) else { return refuse(ResponseError::UnknownMemberId) };
            // A member that died does not hold the round up past its session.
            if group.expire(now) | group.try_complete(now) {
                coordinator.notify();
            }
            if group.phase != Phase::PreparingRebalance {
                return joined(group, &member_id);
            }
            if !group.members.get(&member_id).is_some_and(|m| m.joined) {
                return refuse(ResponseError::UnknownMemberId);
            }
            group.next_deadline_ms()
        };
        coordinator.wait(&mut receiver, deadline).await;
    }
}

/// MEMBER_ID_REQUIRED with the id the member is to join with.
fn member_id_required(member_id: String) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(ResponseError::MemberIdRequired.code())
        .with_generation_id(-1)
        .with_member_id(StrBytes::from_string(member_id))
}

/// The answer to a static member that took its old id's place in a stable group: the
/// current generation, no member list, and the leader as it was (see `Joined::Replaced`).
fn rejoined(group: &Group, member_id: &str, leader_before: Option<String>) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_generation_id(group.generation)
        .with_protocol_type(Some(StrBytes::from_string(group.protocol_type.clone())))
        .with_protocol_name(group.protocol.clone().map(StrBytes::from_string))
        .with_leader(StrBytes::from_string(leader_before.unwrap_or_default()))
        .with_member_id(StrBytes::from_string(member_id.to_string()))
}

/// A completed join's answer: the member list for the leader only.
fn joined(group: &Group, member_id: &str) -> JoinGroupResponse {
    if !group.members.contains_key(member_id) {
        return JoinGroupResponse::default()
            .with_error_code(ResponseError::UnknownMemberId.code())
            .with_generation_id(-1);
    }
    let protocol = group.protocol.clone().unwrap_or_default();
    let leader = group.leader.clone().unwrap_or_default();
    let members = if leader == member_id {
        group
            .members
            .iter()
            .map(|(id, m)| {
                let metadata = m.metadata_for(&protocol);
                JoinGroupResponseMember::default()
                    .with_member_id(StrBytes::from_string(id.clone()))
                    .with_group_instance_id(m.group_instance_id.clone().map(StrBytes::from_string))
                    .with_metadata(metadata)
            })
            .collect()
    } else {
        Vec::new()
    };
    JoinGroupResponse::default()
        .with_generation_id(group.generation)
        .with_protocol_type(Some(StrBytes::from_string(group.protocol_type.clone())))
        .with_protocol_name(Some(StrBytes::from_string(protocol)))
        .with_leader(StrBytes::from_string(leader))
        .with_member_id(StrBytes::from_string(member_id.to_string()))
        .with_members(members)
}

pub async fn sync(kafka: &Kafka, request: SyncGroupRequest) -> SyncGroupResponse {
    let coordinator = &kafka.groups;
    let group_id = request.group_id.0.to_string();
    let member_id = text(&request.member_id);
    let instance = request.group_instance_id.as_ref().map(text);
    let generation = request.generation_id;
    let refuse = |error: i16| SyncGroupResponse::default().with_error_code(error);
    if let Some(error) = not_coordinator(kafka, &group_id) {
        return refuse(error);
    }
    let mut receiver = coordinator.changed.subscribe();
    let deadline = {
        let now = coordinator.now();
        let mut groups = coordinator.lock();
        let Some(group) = groups.get_mut(&group_id) else { return refuse(ResponseError::UnknownMemberId.code()) };
        let assignments = request.assignments.iter().map(|a| (text(&a.member_id), a.assignment.clone())).collect();
        if let Err(refusal) = group.assign(&member_id, instance.as_deref(), generation, assignments) {
            return refuse(code(refusal));
        }
        let timeout = group.members.get(&member_id).map_or(0, |m| m.rebalance_timeout_ms);
        now.saturating_add(timeout)
    };
    coordinator.notify();
    loop {
        {
            let now = coordinator.now();
            let mut groups = coordinator.lock();
            let Some(group) = groups.get_mut(&group_id) else { return refuse(ResponseError::UnknownMemberId.code()) };
            if group.expire(now) {
                coordinator.notify();
            }
            if let Err(refusal) = group.check(&member_id, instance.as_deref(), generation) {
                return refuse(code(refusal));
            }
            match group.phase {
                Phase::Stable => {
                    let assignment = group.members.get(&member_id).map(|m| m.assignment.clone()).unwrap_or_default();
                    return SyncGroupResponse::default()
                        .with_protocol_type(Some(StrBytes::from_string(group.protocol_type.clone())))
                        .with_protocol_name(group.protocol.clone().map(StrBytes::from_string))
                        .with_assignment(assignment);
                }
                Phase::PreparingRebalance | Phase::Empty => return refuse(ResponseError::RebalanceInProgress.code()),
                Phase::CompletingRebalance if now >= deadline => {
                    return refuse(ResponseError::RebalanceInProgress.code());
                }
                Phase::CompletingRebalance => {}
            }
        }
        coordinator.wait(&mut receiver, deadline).await;
    }
}

pub fn heartbeat(kafka: &Kafka, request: HeartbeatRequest) -> HeartbeatResponse {
    if let Some(error) = not_coordinator(kafka, &request.group_id.0) {
        return HeartbeatResponse::default().with_error_code(error);
    }
    let coordinator = &kafka.groups;
    let now = coordinator.now();
    let outcome = {
        let mut groups = coordinator.lock();
        match groups.get_mut(&request.group_id.0.to_string()) {
            None => Err(Refusal::UnknownMember),
            Some(group) => {
                if group.expire(now) {
                    coordinator.notify();
                }
                let (member_id, instance) = (text(&request.member_id), request.group_instance_id.as_ref().map(text));
                group.heartbeat(&member_id, instance.as_deref(), request.generation_id, now)
            }
        }
    };
    HeartbeatResponse::default().with_error_code(outcome.err().map_or(0, code))
}

pub fn leave(kafka: &Kafka, request: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    if let Some(error) = not_coordinator(kafka, &request.group_id.0) {
        return LeaveGroupResponse::default().with_error_code(error);
    }
    let coordinator = &kafka.groups;
    let now = coordinator.now();
    // From version 3 a request names members by id, by static instance, or both.
    let leaving: Vec<(String, Option<String>)> = if version >= 3 {
        request.members.iter().map(|m| (text(&m.member_id), m.group_instance_id.as_ref().map(text))).collect()
    } else {
        vec![(text(&request.member_id), None)]
    };
    let outcomes: Vec<(String, Option<String>, Result<(), Refusal>)> = {
        let mut groups = coordinator.lock();
        let group = groups.get_mut(&request.group_id.0.to_string());
        match group {
            None => leaving.into_iter().map(|(m, i)| (m, i, Err(Refusal::UnknownMember))).collect(),
            Some(group) => leaving
                .into_iter()
                .map(|(m, i)| {
                    let r = group.resolve(&m, i.as_deref()).and_then(|id| group.leave(&id, now));
                    (m, i, r)
                })
                .collect(),
        }
    };
    coordinator.notify();
    if version >= 3 {
        let members = outcomes
            .into_iter()
            .map(|(id, instance, r)| {
                MemberResponse::default()
                    .with_member_id(StrBytes::from_string(id))
                    .with_group_instance_id(instance.map(StrBytes::from_string))
                    .with_error_code(r.err().map_or(0, code))
            })
            .collect();
        return LeaveGroupResponse::default().with_members(members);
    }
    let error = outcomes.into_iter().next().and_then(|(_, _, r)| r.err()).map_or(0, code);
    LeaveGroupResponse::default().with_error_code(error)
}

/// Whether `member_id` at `generation` may commit for `group_id`: members of the
/// current generation may (not a static `instance` another member id now holds); a commit
/// with no member and generation -1 (a consumer that assigns its own partitions) may
/// while the group has no members.
pub fn may_commit(
    kafka: &Kafka,
    group_id: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
) -> Result<(), i16> {
    offsets_changeable(kafka, group_id)?;
    // Under the consumer protocol the generation is the member's epoch; an older one is
    // stale (the member commits again once a heartbeat gives it the new one).
    let consumer_protocol = kafka.groups.with_live_consumer_group(group_id, consumer_session_ms(kafka), |group| {
        group.map(|group| match group.members.get(member_id) {
            Some(member) if member.epoch == generation => Ok(()),
            Some(_) => Err(ResponseError::StaleMemberEpoch.code()),
            None => Err(ResponseError::UnknownMemberId.code()),
        })
    });
    if let Some(allowed) = consumer_protocol {
        return allowed;
    }
    let groups = kafka.groups.lock();
    let Some(group) = groups.get(group_id) else {
        return if generation < 0 { Ok(()) } else { Err(ResponseError::IllegalGeneration.code()) };
    };
    if generation < 0 && member_id.is_empty() {
        return if group.members.is_empty() { Ok(()) } else { Err(ResponseError::UnknownMemberId.code()) };
    }
    group.check(member_id, instance, generation).map_err(code)
}

/// Whether offsets committed in a transaction (TxnOffsetCommit) may be for `group`
/// here: this broker coordinates it and, when the request names a member (version 3
/// on), that member is in the group's current generation.
pub fn may_commit_in_transaction(
    kafka: &Kafka,
    group_id: &str,
    member_id: &str,
    instance: Option<&str>,
    generation: i32,
) -> Result<(), i16> {
    if member_id.is_empty() {
        return offsets_changeable(kafka, group_id);
    }
    may_commit(kafka, group_id, member_id, instance, generation)
}

/// Whether `group`'s stored offsets may be changed here before any member is checked:
/// this broker coordinates the group ([`not_coordinator`]), and the name is not a held
/// share group's, whose stored positions are its start offsets (GROUP_ID_NOT_FOUND).
pub(crate) fn offsets_changeable(kafka: &Kafka, group: &str) -> Result<(), i16> {
    if let Some(error) = not_coordinator(kafka, group) {
        return Err(error);
    }
    if kafka.shares.holds(group) {
        return Err(ResponseError::GroupIdNotFound.code());
    }
    Ok(())
}
