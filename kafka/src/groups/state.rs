//! One consumer group's membership under the classic protocol: members join, the round
//! completes when every known member has rejoined (or the rebalance timeout drops the
//! rest), the leader's SyncGroup hands out assignments, heartbeats keep members alive
//! and tell them when to rejoin. A static member (one with a `group.instance.id`) that
//! rejoins under a new member id takes its old id's place and assignment, without a
//! round while the group is stable, and the old id is fenced; one that has not rejoined
//! when a round ends stays a member until its session runs out. A join names only ids the
//! group knows: its members' and those it gave out for a second join (KIP-394). Pure
//! state: time comes in as milliseconds, and the waiting lives in `mod.rs`.

use std::collections::BTreeMap;

use bytes::Bytes;

/// Where a group is in its cycle (Kafka's names, as DescribeGroups shows them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Empty => "Empty",
            Phase::PreparingRebalance => "PreparingRebalance",
            Phase::CompletingRebalance => "CompletingRebalance",
            Phase::Stable => "Stable",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Member {
    pub client_id: String,
    pub client_host: String,
    pub group_instance_id: Option<String>,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    /// The protocols (assignors) it supports, in its order of preference, with their
    /// metadata.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub last_seen_ms: u64,
    /// Joined in the current round.
    pub joined: bool,
}

impl Member {
    /// What the member sent for `protocol` (its subscription, for the leader to assign).
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols.iter().find(|(name, _)| name == protocol).map(|(_, m)| m.clone()).unwrap_or_default()
    }
}

#[derive(Debug)]
pub struct Group {
    pub phase: Phase,
    pub generation: i32,
    pub protocol_type: String,
    /// The protocol chosen for the current generation.
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Ids given to new members that are yet to join with them (KIP-394's pending
    /// members), each until its session timeout runs out.
    pending: BTreeMap<String, u64>,
    /// When the current round gives up on members that have not rejoined.
    pub round_deadline_ms: u64,
}

/// Why a call is refused, as Kafka's error codes name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    UnknownMember,
    IllegalGeneration,
    RebalanceInProgress,
    InconsistentProtocol,
    /// The request names a `group.instance.id` another member id now holds.
    FencedInstance,
}

/// What a join did.
#[derive(Debug, PartialEq, Eq)]
pub enum Joined {
    /// The member is in the current round; its answer comes when the round completes.
    InRound,
    /// A static member took its old id's place in a stable group: it is answered at once
    /// with the current generation and, as Kafka answers JoinGroup before version 9, the
    /// leader as it was before the join (so a member that was the leader does not assign
    /// again: a stable group would not hand the new assignments out).
    Replaced { leader_before: Option<String> },
}

impl Group {
    pub fn new(protocol_type: String) -> Self {
        Self {
            phase: Phase::Empty,
            generation: 0,
            protocol_type,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            round_deadline_ms: 0,
        }
    }

    /// Starts a round: every member must rejoin.
    fn start_round(&mut self, now_ms: u64) {
        let timeout = self.members.values().map(|m| m.rebalance_timeout_ms).max().unwrap_or(0);
        self.phase = Phase::PreparingRebalance;
        self.round_deadline_ms = now_ms.saturating_add(timeout);
        for member in self.members.values_mut() {
            member.joined = false;
        }
    }

    /// The member id holding static instance `instance`.
    fn instance_holder(&self, instance: &str) -> Option<&str> {
        self.members.iter().find(|(_, m)| m.group_instance_id.as_deref() == Some(instance)).map(|(id, _)| id.as_str())
    }

    /// Refuses a request from `member_id` naming static instance `instance` when another
    /// member id now holds that instance (a zombie the instance's new incarnation replaced).
    pub fn check_instance(&self, member_id: &str, instance: Option<&str>) -> Result<(), Refusal> {
        match instance.and_then(|instance| self.instance_holder(instance)) {
            Some(holder) if holder != member_id => Err(Refusal::FencedInstance),
            _ => Ok(()),
        }
    }

    /// Holds `member_id`, given to a new member that is to join with it, until
    /// `expires_ms` (KIP-394's pending member).
    pub fn give_id(&mut self, member_id: String, expires_ms: u64) {
        self.pending.insert(member_id, expires_ms);
    }

    /// Refuses a join that names `member_id` (and static `instance`, if any) unless the
    /// group knows the id, as Kafka does: a dynamic member's id is one of its members' or
    /// one it gave out and is still waiting for; a static member's is its instance's
    /// holder (another holder fences it).
    pub fn check_named_join(&self, member_id: &str, instance: Option<&str>) -> Result<(), Refusal> {
        self.check_instance(member_id, instance)?;
        let known = match instance {
            Some(instance) => self.instance_holder(instance).is_some(),
            None => self.members.contains_key(member_id) || self.pending.contains_key(member_id),
        };
        if known {
            Ok(())
        } else {
            Err(Refusal::UnknownMember)
        }
    }

    /// The member id `member_id` names, or for an empty one the holder of `instance`
    /// (LeaveGroup may name members by instance alone).
    pub fn resolve(&self, member_id: &str, instance: Option<&str>) -> Result<String, Refusal> {
        if !member_id.is_empty() {
            self.check_instance(member_id, instance)?;
            return Ok(member_id.to_string());
        }
        instance.and_then(|instance| self.instance_holder(instance)).map(str::to_string).ok_or(Refusal::UnknownMember)
    }

    /// A member joins (or rejoins) with its protocols. Outside a round, any join starts
    /// one: a new member, or a known one asking for a fresh assignment. A static member
    /// under a new id first takes its old id's place (see [`Joined::Replaced`]).
    pub fn join(&mut self, member_id: &str, member: Member, now_ms: u64) -> Result<Joined, Refusal> {
        let others = self.members.keys().any(|id| id != member_id);
        if others && !member.protocols.iter().any(|(name, _)| self.others_support(member_id, name)) {
            return Err(Refusal::InconsistentProtocol);
        }
        let replaced = member.group_instance_id.as_deref().and_then(|instance| self.instance_holder(instance));
        if let Some(old_id) = replaced.filter(|old_id| *old_id != member_id).map(str::to_string) {
            let leader_before = self.leader.clone();
            if let Some(old) = self.members.remove(&old_id) {
                if leader_before.as_deref() == Some(old_id.as_str()) {
                    self.leader = Some(member_id.to_string());
                }
                let keeps_protocol =
                    self.protocol.as_ref().is_some_and(|p| member.protocols.iter().any(|(n, _)| n == p));
                let taking_over =
                    Member { last_seen_ms: now_ms, assignment: old.assignment, joined: old.joined, ..member.clone() };
                self.members.insert(member_id.to_string(), taking_over);
                if self.phase == Phase::Stable && keeps_protocol {
                    return Ok(Joined::Replaced { leader_before });
                }
            }
        }
        if self.phase != Phase::PreparingRebalance {
            self.members.insert(member_id.to_string(), member.clone());
            self.start_round(now_ms);
        }
        let entry = self.members.entry(member_id.to_string()).or_insert_with(|| member.clone());
        *entry = Member { joined: true, last_seen_ms: now_ms, assignment: Bytes::new(), ..member };
        self.pending.remove(member_id);
        self.try_complete(now_ms);
        Ok(Joined::InRound)
    }

    /// Whether every member but `member_id` supports `protocol`.
    fn others_support(&self, member_id: &str, protocol: &str) -> bool {
        self.members
            .iter()
            .filter(|(id, _)| id.as_str() != member_id)
            .all(|(_, m)| m.protocols.iter().any(|(name, _)| name == protocol))
    }

    fn all_support(&self, protocol: &str) -> bool {
        self.members.values().all(|m| m.protocols.iter().any(|(name, _)| name == protocol))
    }

    /// Completes the round once every member has rejoined, or, past its deadline, with
    /// those that have. A static member that has not rejoined stays a member, as Kafka
    /// keeps one (KIP-345): the leader assigns it partitions, which wait for it until it
    /// comes back under its instance id or its session runs out. (With no member rejoined
    /// at all, none stays.)
    pub fn try_complete(&mut self, now_ms: u64) -> bool {
        if self.phase != Phase::PreparingRebalance {
            return false;
        }
        let all_joined = self.members.values().all(|m| m.joined);
        if !all_joined && now_ms < self.round_deadline_ms {
            return false;
        }
        let any_joined = self.members.values().any(|m| m.joined);
        self.members.retain(|_, m| m.joined || (any_joined && m.group_instance_id.is_some()));
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.leader = None;
            self.protocol = None;
            self.generation += 1;
            return true;
        }
        self.generation += 1;
        self.protocol = self.choose_protocol();
        // The leader is a member that rejoined: only those are answered this round.
        if !self.leader.as_ref().is_some_and(|l| self.members.get(l).is_some_and(|m| m.joined)) {
            self.leader = self.members.iter().find(|(_, m)| m.joined).map(|(id, _)| id.clone());
        }
        for member in self.members.values_mut() {
            member.assignment = Bytes::new();
        }
        self.phase = Phase::CompletingRebalance;
        true
    }

    /// The topics the members subscribe to, read from their subscriptions (Kafka's
    /// consumer protocol) for the group's protocol; none for other protocol types.
    pub fn subscribed_topics(&self) -> std::collections::BTreeSet<String> {
        let (Some(protocol), "consumer") = (self.protocol.as_deref(), self.protocol_type.as_str()) else {
            return Default::default();
        };
        self.members.values().flat_map(|m| subscription_topics(m.metadata_for(protocol))).collect()
    }

    /// The protocol every member supports that the members prefer most (by summed rank).
    fn choose_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        first
            .protocols
            .iter()
            .map(|(name, _)| name)
            .filter(|name| self.all_support(name))
            .min_by_key(|name| {
                self.members
                    .values()
                    .map(|m| m.protocols.iter().position(|(n, _)| n == *name).unwrap_or(usize::MAX))
                    .sum::<usize>()
            })
            .cloned()
    }

    /// Refuses a request from `member_id` (naming static `instance`, if any) at
    /// `generation` unless it is a member of the current generation holding that instance.
    pub fn check(&self, member_id: &str, instance: Option<&str>, generation: i32) -> Result<(), Refusal> {
        self.check_instance(member_id, instance)?;
        if !self.members.contains_key(member_id) {
            return Err(Refusal::UnknownMember);
        }
        if generation != self.generation {
            return Err(Refusal::IllegalGeneration);
        }
        Ok(())
    }

    /// The leader's assignments: the group becomes stable.
    pub fn assign(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
    ) -> Result<(), Refusal> {
        self.check(member_id, instance, generation)?;
        if self.phase == Phase::PreparingRebalance {
            return Err(Refusal::RebalanceInProgress);
        }
        if self.leader.as_deref() == Some(member_id) && self.phase == Phase::CompletingRebalance {
            for (member, assignment) in assignments {
                if let Some(m) = self.members.get_mut(&member) {
                    m.assignment = assignment;
                }
            }
            self.phase = Phase::Stable;
        }
        Ok(())
    }

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        self.check(member_id, instance, generation)?;
        if let Some(m) = self.members.get_mut(member_id) {
            m.last_seen_ms = now_ms;
        }
        match self.phase {
            Phase::PreparingRebalance => Err(Refusal::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    pub fn leave(&mut self, member_id: &str, now_ms: u64) -> Result<(), Refusal> {
        if self.members.remove(member_id).is_none() {
            return Err(Refusal::UnknownMember);
        }
        self.rebalance_after_loss(now_ms);
        Ok(())
    }

    /// When a waiting join must look again: the round's deadline, or sooner the session
    /// expiry of a member that has not rejoined.
    pub fn next_deadline_ms(&self) -> u64 {
        self.members
            .values()
            .filter(|m| !m.joined)
            .map(|m| m.last_seen_ms.saturating_add(m.session_timeout_ms) + 1)
            .fold(self.round_deadline_ms, u64::min)
    }

    /// Drops members whose session expired, and ids given out that were not joined
    /// with in time; `true` if a member was dropped.
    pub fn expire(&mut self, now_ms: u64) -> bool {
        self.pending.retain(|_, expires_ms| now_ms < *expires_ms);
        let before = self.members.len();
        // Members waiting in a join of the current round do not heartbeat.
        let preparing = self.phase == Phase::PreparingRebalance;
        self.members
            .retain(|_, m| now_ms.saturating_sub(m.last_seen_ms) <= m.session_timeout_ms || (m.joined && preparing));
        let dropped = self.members.len() != before;
        if dropped {
            self.rebalance_after_loss(now_ms);
        }
        dropped
    }

    fn rebalance_after_loss(&mut self, now_ms: u64) {
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.leader = None;
            self.protocol = None;
            self.generation += 1;
        } else if self.phase == Phase::PreparingRebalance {
            self.try_complete(now_ms);
        } else {
            self.start_round(now_ms);
        }
    }
}

/// The topics of a consumer protocol subscription: a version, then the subscription at
/// that version (a later one is read as the latest known, as Kafka's clients read it);
/// none when it does not decode.
fn subscription_topics(mut metadata: Bytes) -> Vec<String> {
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::{Decodable, Message};
    if metadata.len() < 2 {
        return Vec::new();
    }
    let version = i16::from_be_bytes([metadata[0], metadata[1]]).min(ConsumerProtocolSubscription::VERSIONS.max);
    let mut body = metadata.split_off(2);
    match ConsumerProtocolSubscription::decode(&mut body, version) {
        Ok(subscription) => subscription.topics.iter().map(|t| t.to_string()).collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn member(protocols: &[&str]) -> Member {
        Member {
            client_id: "c".into(),
            client_host: "h".into(),
            group_instance_id: None,
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocols: protocols.iter().map(|p| (p.to_string(), Bytes::new())).collect(),
            assignment: Bytes::new(),
            last_seen_ms: 0,
            joined: false,
        }
    }

    #[test]
    fn a_second_member_makes_the_first_rejoin_and_leaving_rebalances() {
        let mut group = Group::new("consumer".into());
        group.join("a", member(&["range"]), 0).unwrap();
        assert_eq!(
            (group.phase, group.generation, group.leader.as_deref()),
            (Phase::CompletingRebalance, 1, Some("a"))
        );
        group.assign("a", None, 1, vec![("a".into(), Bytes::from_static(b"all"))]).unwrap();
        assert_eq!(group.phase, Phase::Stable);
        group.join("b", member(&["range", "roundrobin"]), 10).unwrap();
        assert_eq!(group.phase, Phase::PreparingRebalance, "b waits for a to rejoin");
        assert_eq!(group.heartbeat("a", None, 1, 20), Err(Refusal::RebalanceInProgress));
        group.join("a", member(&["range"]), 30).unwrap();
        assert_eq!((group.phase, group.generation), (Phase::CompletingRebalance, 2));
        assert_eq!(group.protocol.as_deref(), Some("range"));
        assert_eq!(group.check("b", None, 1), Err(Refusal::IllegalGeneration));
        group.assign("a", None, 2, vec![]).unwrap();
        group.leave("a", 40).unwrap();
        assert_eq!(group.phase, Phase::PreparingRebalance);
        group.join("b", member(&["range"]), 50).unwrap();
        assert_eq!(
            (group.phase, group.generation, group.leader.as_deref()),
            (Phase::CompletingRebalance, 3, Some("b"))
        );
    }

    #[test]
    fn a_member_that_stops_heartbeating_is_dropped_and_one_that_never_rejoins_times_out() {
        let mut group = Group::new("consumer".into());
        group.join("a", member(&["range"]), 0).unwrap();
        group.join("b", member(&["range"]), 0).unwrap();
        group.join("a", member(&["range"]), 0).unwrap();
        group.assign("a", None, 2, vec![]).unwrap();
        assert!(!group.expire(5_000));
        group.heartbeat("a", None, 2, 9_000).unwrap();
        assert!(group.expire(12_000), "b's session ran out");
        assert_eq!(group.phase, Phase::PreparingRebalance);
        assert!(!group.try_complete(12_001), "a must rejoin first");
        assert!(group.try_complete(12_000 + 30_000), "past the deadline the round completes without it");
        assert_eq!(group.phase, Phase::Empty);
        assert_eq!(
            group.join("c", member(&["sticky"]), 50_000),
            Ok(Joined::InRound),
            "an empty group takes any protocol"
        );
    }

    fn static_member(protocols: &[&str], instance: &str) -> Member {
        Member { group_instance_id: Some(instance.into()), ..member(protocols) }
    }

    /// A stable group of "a" (the leader, instance "ia") and "b" (instance "ib"), each
    /// assigned its name.
    fn stable_static_pair() -> Group {
        let mut group = Group::new("consumer".into());
        group.join("a", static_member(&["range"], "ia"), 0).unwrap();
        group.join("b", static_member(&["range"], "ib"), 0).unwrap();
        group.join("a", static_member(&["range"], "ia"), 0).unwrap();
        let assignments = vec![("a".into(), Bytes::from_static(b"A")), ("b".into(), Bytes::from_static(b"B"))];
        group.assign("a", None, 2, assignments).unwrap();
        assert_eq!((group.phase, group.generation, group.leader.as_deref()), (Phase::Stable, 2, Some("a")));
        group
    }

    #[test]
    fn a_static_member_back_under_a_new_id_takes_its_place_without_a_round() {
        let mut group = stable_static_pair();
        let joined = group.join("b2", static_member(&["range"], "ib"), 100).unwrap();
        assert_eq!(joined, Joined::Replaced { leader_before: Some("a".into()) });
        assert_eq!((group.phase, group.generation), (Phase::Stable, 2), "no round, the same generation");
        assert!(!group.members.contains_key("b"));
        assert_eq!(group.members["b2"].assignment, Bytes::from_static(b"B"), "the old id's assignment");
        assert_eq!(group.heartbeat("a", None, 2, 110), Ok(()), "the other member goes on undisturbed");
        // The old incarnation is fenced wherever it names its instance.
        assert_eq!(group.check_instance("b", Some("ib")), Err(Refusal::FencedInstance));
        assert_eq!(group.check_instance("b2", Some("ib")), Ok(()));
        assert_eq!(group.check_instance("b", None), Ok(()), "without an instance the plain checks apply");
        assert_eq!(group.heartbeat("b", Some("ib"), 2, 120), Err(Refusal::FencedInstance));
        assert_eq!(group.heartbeat("b2", Some("ib"), 2, 120), Ok(()));
        assert_eq!(group.check("b", None, 2), Err(Refusal::UnknownMember));
        assert_eq!(group.resolve("", Some("ib")), Ok("b2".to_string()));
        assert_eq!(group.resolve("", Some("nobody")), Err(Refusal::UnknownMember));
    }

    /// [`stable_static_pair`] with sessions of 60 s, longer than a round's 30 s deadline.
    fn stable_static_pair_with_long_sessions() -> Group {
        let mut group = stable_static_pair();
        for member in group.members.values_mut() {
            member.session_timeout_ms = 60_000;
        }
        group
    }

    #[test]
    fn a_static_member_away_through_a_round_stays_and_comes_back_to_what_it_was_given() {
        let mut group = stable_static_pair_with_long_sessions();
        // A dynamic member joins while "b" (instance "ib") is down: a round b misses.
        group.join("c", member(&["range"]), 100).unwrap();
        group.join("a", static_member(&["range"], "ia"), 100).unwrap();
        assert!(!group.try_complete(100), "the round waits for b until its deadline");
        assert!(!group.expire(30_100), "b's session has not run out");
        assert!(group.try_complete(30_100), "then completes without it");
        assert_eq!(group.members.keys().collect::<Vec<_>>(), ["a", "b", "c"], "b stays: static");
        assert_eq!(group.leader.as_deref(), Some("a"));
        let assignments = ["a", "b", "c"].map(|m| (m.to_string(), Bytes::from(m.to_uppercase())));
        group.assign("a", None, group.generation, assignments.to_vec()).unwrap();
        assert_eq!(group.phase, Phase::Stable);

        // b back under a new id: its place and what the leader gave it, without a round.
        let joined = group.join("b2", static_member(&["range"], "ib"), 30_200).unwrap();
        assert!(matches!(joined, Joined::Replaced { .. }));
        assert_eq!(group.members["b2"].assignment, Bytes::from_static(b"B"));
        assert_eq!(group.phase, Phase::Stable);
    }

    #[test]
    fn a_static_member_kept_through_a_round_leaves_when_its_session_runs_out() {
        let mut group = stable_static_pair_with_long_sessions();
        group.join("c", member(&["range"]), 100).unwrap();
        group.join("a", static_member(&["range"], "ia"), 100).unwrap();
        assert!(group.try_complete(30_100));
        group.assign("a", None, group.generation, vec![]).unwrap();
        group.heartbeat("a", None, group.generation, 55_000).unwrap();
        group.heartbeat("c", None, group.generation, 55_000).unwrap();
        assert!(group.expire(60_001), "b's session, 60 s from its last sign of life at 0, ran out");
        assert!(!group.members.contains_key("b"));
        assert_eq!(group.phase, Phase::PreparingRebalance, "a round gives its partitions to the others");

        // A round no member rejoins keeps no static member either.
        let mut group = stable_static_pair_with_long_sessions();
        group.join("c", member(&["range"]), 100).unwrap();
        group.leave("c", 200).unwrap();
        assert!(group.try_complete(30_200));
        assert_eq!(group.phase, Phase::Empty);
        assert!(group.members.is_empty());
    }

    #[test]
    fn a_join_names_only_ids_the_group_knows() {
        let mut group = stable_static_pair();
        // Dynamic: an id the group never gave is refused; one it gave is taken until the
        // session timeout it was given for runs out, and once joined it is a member's.
        assert_eq!(group.check_named_join("made-up", None), Err(Refusal::UnknownMember));
        group.give_id("given".into(), 1_000);
        group.give_id("late".into(), 1_000);
        assert_eq!(group.check_named_join("given", None), Ok(()));
        group.join("given", member(&["range"]), 500).unwrap();
        assert!(!group.pending.contains_key("given"), "joined, it is no longer waited for");
        assert_eq!(group.check_named_join("given", None), Ok(()), "a member's own id");
        assert!(!group.expire(999));
        assert_eq!(group.check_named_join("late", None), Ok(()));
        group.expire(1_000);
        assert_eq!(group.check_named_join("late", None), Err(Refusal::UnknownMember), "not joined with in time");
        // Static: the id must hold the instance; an instance no one holds is unknown.
        assert_eq!(group.check_named_join("b", Some("ib")), Ok(()));
        assert_eq!(group.check_named_join("a", Some("ib")), Err(Refusal::FencedInstance));
        assert_eq!(group.check_named_join("b", Some("nobody")), Err(Refusal::UnknownMember));
    }

    #[test]
    fn a_static_leader_back_under_a_new_id_leads_without_assigning_again() {
        let mut group = stable_static_pair();
        let joined = group.join("a2", static_member(&["range"], "ia"), 100).unwrap();
        assert_eq!(joined, Joined::Replaced { leader_before: Some("a".into()) }, "answered with the old leader id");
        assert_eq!(group.leader.as_deref(), Some("a2"));
        // Its sync in the stable group changes nothing and answers its old assignment.
        group.assign("a2", None, 2, vec![("b".into(), Bytes::from_static(b"changed"))]).unwrap();
        assert_eq!(group.members["a2"].assignment, Bytes::from_static(b"A"));
        assert_eq!(group.members["b"].assignment, Bytes::from_static(b"B"));
    }

    #[test]
    fn a_static_member_back_with_another_protocol_or_mid_round_goes_through_a_round() {
        let mut group = stable_static_pair();
        // Back with a protocol the other member lacks: refused, as any member's would be.
        let back = static_member(&["roundrobin"], "ib");
        assert_eq!(group.join("b2", back, 100), Err(Refusal::InconsistentProtocol));
        assert!(group.members.contains_key("b"), "the refused join replaced nothing");
        let mut group = stable_static_pair();
        group.join("c", member(&["range"]), 100).unwrap();
        assert_eq!(group.phase, Phase::PreparingRebalance);
        assert_eq!(group.join("b2", static_member(&["range"], "ib"), 110), Ok(Joined::InRound));
        assert!(!group.members.contains_key("b") && group.members["b2"].joined);
        group.join("a", static_member(&["range"], "ia"), 120).unwrap();
        assert_eq!((group.phase, group.generation), (Phase::CompletingRebalance, 3));
        assert_eq!(group.members.keys().collect::<Vec<_>>(), ["a", "b2", "c"]);
    }

    #[test]
    fn a_dead_member_holds_a_join_up_only_until_its_session_ends() {
        let mut group = Group::new("consumer".into());
        group.join("dead", member(&["range"]), 0).unwrap();
        group.assign("dead", None, 1, vec![]).unwrap();
        // A new member joins 1 s later: the round waits for "dead" to rejoin...
        group.join("new", member(&["range"]), 1_000).unwrap();
        assert_eq!(group.phase, Phase::PreparingRebalance);
        // ... but only until its session (10 s from its last sign of life), not for the
        // round's 30 s.
        assert_eq!(group.next_deadline_ms(), 10_001);
        assert!(group.expire(10_001));
        assert_eq!((group.phase, group.leader.as_deref()), (Phase::CompletingRebalance, Some("new")));
    }
}
