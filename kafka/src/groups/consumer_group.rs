//! One consumer group under the consumer protocol (KIP-848): the coordinator assigns.
//! Every change of membership, subscriptions or partition counts bumps the group's
//! epoch; the next heartbeat computes the target assignment for it (`assignors`), and
//! each member is brought to its target one heartbeat at a time, never owning a
//! partition another member still owns:
//!
//! - a member that owns partitions outside its target is first told to give them up (its
//!   assignment shrinks, its epoch stays) and keeps them as "revoking" until a heartbeat
//!   reports them gone; one that does not give them up within its rebalance timeout is
//!   removed;
//! - then its epoch moves to the target's, and it is given each partition of its target
//!   that no other member owns or is giving up; the rest follow on later heartbeats, as
//!   their owners give them up.
//!
//! A member silent for longer than the session timeout is removed. Pure state: time comes
//! in as milliseconds, topics as their partition counts.

use std::collections::{BTreeMap, BTreeSet};

pub use super::assignors::Partitions;
use super::assignors::{self, Assignor, Partition};

#[derive(Clone, Debug, Default)]
pub struct Member {
    pub epoch: i32,
    /// The epoch before the last bump, accepted from a member that missed its answer.
    pub previous_epoch: i32,
    pub client_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: u64,
    pub subscribed: BTreeSet<String>,
    /// Topics matching this are subscribed to as well.
    pub regex: Option<TopicRegex>,
    pub assignor: Option<Assignor>,
    /// What the member is told it owns.
    pub assigned: Partitions,
    /// What it was told to give up and has not yet reported gone.
    pub revoking: Partitions,
    pub revoke_deadline_ms: u64,
    pub last_seen_ms: u64,
    /// Its assignment changed since it was last answered with it.
    pub unsent: bool,
    /// A static member that left with epoch -2: it keeps its partitions until its
    /// session runs out or a member with its instance id takes its place.
    pub away: bool,
}

/// A subscription by regular expression (version 1), matched against whole topic names
/// as Kafka matches it.
#[derive(Clone, Debug)]
pub struct TopicRegex {
    pub source: String,
    pub matcher: regex::Regex,
}

impl TopicRegex {
    /// `source` compiled (within a size bound), or why it cannot be.
    pub fn new(source: &str) -> Result<Self, regex::Error> {
        let matcher = crate::patterns::whole_name(source)?;
        Ok(Self { source: source.to_string(), matcher })
    }
}

impl PartialEq for TopicRegex {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Member {
    /// Whether the member subscribes to `topic`, by name or by its regular expression.
    pub fn subscribes_to(&self, topic: &str) -> bool {
        self.subscribed.contains(topic) || self.regex.as_ref().is_some_and(|r| r.matcher.is_match(topic))
    }
}

#[derive(Debug, Default)]
pub struct ConsumerGroup {
    pub epoch: i32,
    /// The group epoch the target assignment was computed for.
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    pub target: BTreeMap<String, Partitions>,
    /// Partition counts of the subscribed topics, as last looked up.
    pub topics: BTreeMap<String, u32>,
    /// When they were last looked up (0: never).
    pub topics_checked_ms: u64,
    pub assignor: Assignor,
}

/// A heartbeat, as far as the group's state goes.
#[derive(Debug, Default)]
pub struct Beat {
    pub member_id: String,
    pub epoch: i32,
    pub client_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// 0: unchanged.
    pub rebalance_timeout_ms: u64,
    pub subscribed: Option<BTreeSet<String>>,
    /// `Some(None)`: no regular expression any more.
    pub regex: Option<Option<TopicRegex>>,
    pub assignor: Option<Assignor>,
    /// The partitions the member owns, when it says.
    pub owned: Option<Partitions>,
}

/// What a heartbeat is answered.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    pub epoch: i32,
    /// The member's assignment, when it changed or the member's view may differ.
    pub assignment: Option<Partitions>,
}

/// Why a heartbeat is refused, as Kafka's error codes name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    UnknownMember,
    FencedEpoch,
    /// A join without its subscription or rebalance timeout.
    IncompleteJoin,
    /// A join with the instance id of a static member that has not left.
    UnreleasedInstance,
}

/// Epochs with which a member leaves (-2: a static member that will be back).
pub const LEAVE: i32 = -1;
pub const LEAVE_STATIC: i32 = -2;

impl ConsumerGroup {
    /// Kafka's name for the group's state.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.epoch > self.assignment_epoch {
            "Assigning"
        } else if self.members.values().any(|m| m.epoch < self.assignment_epoch || !m.revoking.is_empty()) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Every topic a member subscribes to: by name, or known to the group and matching a
    /// member's regular expression.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        let named = self.members.values().flat_map(|m| m.subscribed.iter().cloned());
        let matched = self.topics.keys().filter(|t| self.members.values().any(|m| m.subscribes_to(t))).cloned();
        named.chain(matched).collect()
    }

    /// Whether a member subscribes by regular expression (so every topic is looked up).
    pub fn has_regex(&self) -> bool {
        self.members.values().any(|m| m.regex.is_some())
    }

    fn bump(&mut self) {
        self.epoch += 1;
    }

    /// Removes members silent past `session_timeout_ms`, or past their deadline to give
    /// partitions up.
    pub fn expire(&mut self, now_ms: u64, session_timeout_ms: u64) {
        let before = self.members.len();
        self.members.retain(|_, m| {
            let alive = now_ms <= m.last_seen_ms.saturating_add(session_timeout_ms);
            alive && (m.revoking.is_empty() || now_ms <= m.revoke_deadline_ms)
        });
        if self.members.len() != before {
            self.bump();
        }
    }

    /// Takes `topics`' current partition counts (those not named are kept, those no
    /// member subscribes to dropped); a change bumps the epoch.
    fn note_topics(&mut self, topics: BTreeMap<String, u32>) {
        let mut changed = false;
        for (topic, count) in topics {
            changed |= self.topics.insert(topic, count).is_none_or(|before| before != count);
        }
        let subscribed = self.subscribed_topics();
        self.topics.retain(|topic, _| subscribed.contains(topic));
        if changed {
            self.bump();
        }
    }

    /// A heartbeat at `now_ms`, with the subscribed `topics`' partition counts as looked
    /// up for it: leaves, joins or keeps the member, then brings it a step toward its
    /// target.
    pub fn heartbeat(&mut self, beat: Beat, topics: BTreeMap<String, u32>, now_ms: u64) -> Result<Answer, Refusal> {
        if matches!(beat.epoch, LEAVE | LEAVE_STATIC) {
            return Ok(self.leave(&beat.member_id, beat.epoch));
        }
        let joining = beat.epoch == 0;
        if joining {
            if (beat.subscribed.is_none() && beat.regex.is_none()) || beat.rebalance_timeout_ms == 0 {
                return Err(Refusal::IncompleteJoin);
            }
            self.join(&beat.member_id, beat.instance_id.as_deref())?;
        }
        let member = self.members.get_mut(&beat.member_id).ok_or(Refusal::UnknownMember)?;
        let missed_answer = beat.epoch == member.previous_epoch
            && beat.owned.as_ref().is_some_and(|owned| owned.is_subset(&member.assigned));
        if !joining && beat.epoch != member.epoch && !missed_answer {
            return Err(Refusal::FencedEpoch);
        }
        let mut changed = false;
        if let Some(subscribed) = beat.subscribed {
            changed |= member.subscribed != subscribed;
            member.subscribed = subscribed;
        }
        if let Some(regex) = beat.regex {
            changed |= member.regex != regex;
            member.regex = regex;
        }
        if beat.assignor.is_some() && beat.assignor != member.assignor {
            member.assignor = beat.assignor;
            changed = true;
        }
        member.client_id = beat.client_id;
        member.instance_id = beat.instance_id.or(member.instance_id.take());
        member.rack_id = beat.rack_id.or(member.rack_id.take());
        if beat.rebalance_timeout_ms > 0 {
            member.rebalance_timeout_ms = beat.rebalance_timeout_ms;
        }
        member.last_seen_ms = now_ms;
        if changed {
            self.bump();
        }
        self.note_topics(topics);
        if self.epoch > self.assignment_epoch {
            self.assignor = assignors::most_asked(self.members.values().filter_map(|m| m.assignor));
            let subscriptions = self
                .members
                .iter()
                .map(|(id, m)| (id.clone(), self.topics.keys().filter(|t| m.subscribes_to(t)).cloned().collect()))
                .collect();
            self.target = assignors::assign(self.assignor, &subscriptions, &self.topics, &self.target);
            self.assignment_epoch = self.epoch;
        }
        let owned_differs = beat.owned.as_ref().is_some_and(|owned| self.note_owned(&beat.member_id, owned));
        self.step_toward_target(&beat.member_id, now_ms);
        let member = self.members.get_mut(&beat.member_id).ok_or(Refusal::UnknownMember)?;
        let send = member.unsent || owned_differs;
        member.unsent = false;
        Ok(Answer { epoch: member.epoch, assignment: send.then(|| member.assigned.clone()) })
    }

    /// A member leaving: a static one with epoch -2 stays, away, holding its partitions
    /// for its instance's return; any other is removed.
    fn leave(&mut self, member_id: &str, epoch: i32) -> Answer {
        match self.members.get_mut(member_id) {
            Some(member) if epoch == LEAVE_STATIC && member.instance_id.is_some() => member.away = true,
            Some(_) => {
                self.members.remove(member_id);
                self.bump();
            }
            None => {}
        }
        Answer { epoch, assignment: None }
    }

    /// A member joining: one with the instance id of a static member that is away takes
    /// its place (its epoch and partitions, no rebalance); one whose instance id a present
    /// member holds is refused; any other (or the same member again, which has given
    /// everything up) starts with nothing.
    fn join(&mut self, member_id: &str, instance_id: Option<&str>) -> Result<(), Refusal> {
        let holder = instance_id.and_then(|instance| {
            self.members
                .iter()
                .find(|(_, m)| m.instance_id.as_deref() == Some(instance))
                .map(|(id, m)| (id.clone(), m.away))
        });
        match holder {
            Some((holder, true)) => {
                let mut member = self.members.remove(&holder).unwrap_or_default();
                member.away = false;
                member.unsent = true;
                if let Some(target) = self.target.remove(&holder) {
                    self.target.insert(member_id.to_string(), target);
                }
                self.members.insert(member_id.to_string(), member);
            }
            Some((holder, false)) if holder != member_id => return Err(Refusal::UnreleasedInstance),
            _ => {
                self.members.insert(member_id.to_string(), Member { unsent: true, ..Member::default() });
                self.bump();
            }
        }
        Ok(())
    }

    /// Takes the member's report of what it owns: partitions it was giving up and no
    /// longer owns are released. Whether its view differs from what it was told.
    fn note_owned(&mut self, member_id: &str, owned: &Partitions) -> bool {
        let Some(member) = self.members.get_mut(member_id) else { return false };
        member.revoking.retain(|p| owned.contains(p));
        owned != &member.assigned
    }

    /// One step toward the member's target: give up what is outside it, else move to the
    /// target's epoch and take what of it is free.
    fn step_toward_target(&mut self, member_id: &str, now_ms: u64) {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let owned_by_others: Partitions = self
            .members
            .iter()
            .filter(|(id, _)| id.as_str() != member_id)
            .flat_map(|(_, m)| m.assigned.iter().chain(&m.revoking).cloned())
            .collect();
        let assignment_epoch = self.assignment_epoch;
        let Some(member) = self.members.get_mut(member_id) else { return };
        if !member.revoking.is_empty() {
            // Waits for a heartbeat that reports them gone.
            return;
        }
        if member.epoch < assignment_epoch {
            let outside: Partitions = member.assigned.difference(&target).cloned().collect();
            if !outside.is_empty() {
                member.assigned.retain(|p| target.contains(p));
                member.revoking = outside;
                member.revoke_deadline_ms = now_ms.saturating_add(member.rebalance_timeout_ms);
                member.unsent = true;
                return;
            }
            member.previous_epoch = member.epoch;
            member.epoch = assignment_epoch;
        }
        let free: Vec<Partition> =
            target.difference(&member.assigned).filter(|p| !owned_by_others.contains(*p)).cloned().collect();
        if !free.is_empty() {
            member.assigned.extend(free);
            member.unsent = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION_MS: u64 = 10_000;

    fn topics(count: u32) -> BTreeMap<String, u32> {
        BTreeMap::from([("t".to_string(), count)])
    }

    fn partitions(ps: &[i32]) -> Partitions {
        ps.iter().map(|&p| ("t".to_string(), p)).collect()
    }

    fn join(id: &str) -> Beat {
        Beat {
            member_id: id.into(),
            epoch: 0,
            rebalance_timeout_ms: 5_000,
            subscribed: Some(BTreeSet::from(["t".to_string()])),
            owned: Some(Partitions::new()),
            ..Beat::default()
        }
    }

    fn beat(id: &str, epoch: i32, owned: &Partitions) -> Beat {
        Beat { member_id: id.into(), epoch, owned: Some(owned.clone()), ..Beat::default() }
    }

    /// No partition is ever held by two members: assigned or still being given up.
    fn no_partition_twice(group: &ConsumerGroup) {
        let held: Vec<&Partition> = group.members.values().flat_map(|m| m.assigned.iter().chain(&m.revoking)).collect();
        let distinct: BTreeSet<&Partition> = held.iter().copied().collect();
        assert_eq!(held.len(), distinct.len(), "{:?}", group.members);
    }

    #[test]
    fn a_second_member_gets_partitions_only_once_the_first_gives_them_up() {
        let mut group = ConsumerGroup::default();
        let a = group.heartbeat(join("a"), topics(4), 0).unwrap();
        assert_eq!(a.assignment, Some(partitions(&[0, 1, 2, 3])));
        let a_epoch = a.epoch;

        let b = group.heartbeat(join("b"), topics(4), 1).unwrap();
        assert_eq!(b.assignment, Some(Partitions::new()), "everything is still a's");
        no_partition_twice(&group);

        // a is told to keep two and give two up; its epoch stays until it has.
        let a = group.heartbeat(beat("a", a_epoch, &partitions(&[0, 1, 2, 3])), topics(4), 2).unwrap();
        let kept = a.assignment.clone().unwrap();
        assert_eq!((a.epoch, kept.len()), (a_epoch, 2));
        let b = group.heartbeat(beat("b", b.epoch, &Partitions::new()), topics(4), 3).unwrap();
        assert_eq!(b.assignment, None, "nothing free for b yet");
        assert_eq!(group.state_name(), "Reconciling");

        // a reports the two gone: it moves to the new epoch, and b gets them.
        let a = group.heartbeat(beat("a", a_epoch, &kept), topics(4), 4).unwrap();
        assert!(a.epoch > a_epoch);
        let b = group.heartbeat(beat("b", b.epoch, &Partitions::new()), topics(4), 5).unwrap();
        let given = b.assignment.unwrap();
        assert_eq!(given.len(), 2);
        assert!(given.is_disjoint(&kept));
        no_partition_twice(&group);
        assert_eq!(group.state_name(), "Stable");
    }

    #[test]
    fn a_member_that_leaves_or_goes_silent_hands_its_partitions_on() {
        let mut group = ConsumerGroup::default();
        let a = group.heartbeat(join("a"), topics(2), 0).unwrap();
        let b = group.heartbeat(join("b"), topics(2), 0).unwrap();
        let a = group.heartbeat(beat("a", a.epoch, &partitions(&[0, 1])), topics(2), 1).unwrap();
        let kept = a.assignment.unwrap();
        group.heartbeat(beat("a", a.epoch, &kept), topics(2), 2).unwrap();
        let b = group.heartbeat(beat("b", b.epoch, &Partitions::new()), topics(2), 3).unwrap();
        assert_eq!(b.assignment.as_ref().map(BTreeSet::len), Some(1));

        // a goes silent: past its session it is removed, and b takes everything.
        let owned = b.assignment.unwrap();
        let b = group.heartbeat(beat("b", b.epoch, &owned), topics(2), SESSION_MS).unwrap();
        group.expire(2 + SESSION_MS + 1, SESSION_MS);
        assert!(!group.members.contains_key("a"));
        let b = group.heartbeat(beat("b", b.epoch, &owned), topics(2), SESSION_MS + 5).unwrap();
        assert_eq!(b.assignment, Some(partitions(&[0, 1])));

        // b leaves: the group is empty.
        let left = group.heartbeat(Beat { member_id: "b".into(), epoch: LEAVE, ..Beat::default() }, topics(2), 0);
        assert_eq!(left.unwrap().epoch, LEAVE);
        assert_eq!(group.state_name(), "Empty");
    }

    #[test]
    fn a_member_that_keeps_partitions_past_its_rebalance_timeout_is_removed() {
        let mut group = ConsumerGroup::default();
        let a = group.heartbeat(join("a"), topics(2), 0).unwrap();
        group.heartbeat(join("b"), topics(2), 0).unwrap();
        group.heartbeat(beat("a", a.epoch, &partitions(&[0, 1])), topics(2), 1).unwrap();
        group.expire(1 + 5_000 + 1, SESSION_MS);
        assert!(!group.members.contains_key("a"), "still giving up after its rebalance timeout");
        assert!(group.members.contains_key("b"));
    }

    #[test]
    fn a_static_member_away_keeps_its_partitions_for_its_instance_to_take_back() {
        let mut group = ConsumerGroup::default();
        let with_instance = |id: &str| Beat { instance_id: Some("host-1".into()), ..join(id) };
        let first = group.heartbeat(with_instance("a"), topics(2), 0).unwrap();
        assert_eq!(group.heartbeat(with_instance("b"), topics(2), 1), Err(Refusal::UnreleasedInstance));

        // Away (epoch -2): still a member holding its partitions, no new epoch.
        let epoch = group.epoch;
        group.heartbeat(Beat { member_id: "a".into(), epoch: LEAVE_STATIC, ..Beat::default() }, topics(2), 2).unwrap();
        assert!(group.members["a"].away && group.epoch == epoch);

        // Its instance back under a new member id: its place, epoch and partitions.
        let back = group.heartbeat(with_instance("b"), topics(2), 3).unwrap();
        assert_eq!((back.epoch, back.assignment), (first.epoch, Some(partitions(&[0, 1]))));
        assert!(!group.members.contains_key("a") && group.epoch == epoch);

        // Away past its session: removed, and the group moves on.
        group.heartbeat(Beat { member_id: "b".into(), epoch: LEAVE_STATIC, ..Beat::default() }, topics(2), 4).unwrap();
        group.expire(4 + SESSION_MS + 1, SESSION_MS);
        assert!(group.members.is_empty());
    }

    /// Random joins, leaves, silences, partition count changes and heartbeats (each
    /// member reporting what it was last told, as a client does once it has given
    /// partitions up), over many seeds: no partition is ever held by two members, and once
    /// the changes stop, a few rounds of heartbeats leave the group stable with every
    /// partition held.
    #[test]
    fn random_changes_never_give_a_partition_twice_and_settle_with_all_held() {
        for seed in 1..=200u64 {
            let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut next = |n: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % n
            };
            let mut group = ConsumerGroup::default();
            // What each live client believes it owns, and its epoch.
            let mut clients: BTreeMap<String, (i32, Partitions)> = BTreeMap::new();
            let mut count = 1 + next(6) as u32;
            let mut now = 0;
            for _ in 0..60 {
                now += 1 + next(500);
                let id = format!("m{}", next(4));
                match next(10) {
                    0 => {
                        clients.remove(&id);
                        let _ = group.heartbeat(
                            Beat { member_id: id, epoch: LEAVE, ..Beat::default() },
                            topics(count),
                            now,
                        );
                    }
                    1 => count = 1 + next(6) as u32,
                    2 => {
                        // Silent past its session: gone (its client no longer heartbeats).
                        if group.members.contains_key(&id) {
                            now = now.max(SESSION_MS + 1);
                            for (other, member) in group.members.iter_mut() {
                                member.last_seen_ms = if *other == id { 0 } else { now };
                            }
                            clients.remove(&id);
                            group.expire(now, SESSION_MS);
                            assert!(!group.members.contains_key(&id));
                        }
                    }
                    _ => {
                        let beat = match clients.get(&id) {
                            Some((epoch, owned)) => beat(&id, *epoch, owned),
                            None => join(&id),
                        };
                        match group.heartbeat(beat, topics(count), now) {
                            Ok(answer) => {
                                let entry = clients.entry(id).or_default();
                                entry.0 = answer.epoch;
                                if let Some(assigned) = answer.assignment {
                                    entry.1 = assigned;
                                }
                            }
                            Err(_) => {
                                clients.remove(&id);
                            }
                        }
                    }
                }
                no_partition_twice(&group);
                // Rebalance deadlines are not part of this test.
                group.members.values_mut().for_each(|m| m.revoke_deadline_ms = u64::MAX);
                group.members.values_mut().for_each(|m| m.last_seen_ms = m.last_seen_ms.max(now));
            }
            for _ in 0..6 {
                let ids: Vec<String> = clients.keys().cloned().collect();
                for id in ids {
                    let (epoch, owned) = clients[&id].clone();
                    let answer = group.heartbeat(beat(&id, epoch, &owned), topics(count), now).unwrap();
                    let entry = clients.get_mut(&id).unwrap();
                    entry.0 = answer.epoch;
                    if let Some(assigned) = answer.assignment {
                        entry.1 = assigned;
                    }
                    no_partition_twice(&group);
                }
            }
            if !clients.is_empty() {
                assert_eq!(group.state_name(), "Stable", "seed {seed}: {:?}", group.members);
                let held: Partitions = group.members.values().flat_map(|m| m.assigned.iter().cloned()).collect();
                assert_eq!(held, (0..count as i32).map(|p| ("t".to_string(), p)).collect(), "seed {seed}");
            }
        }
    }

    #[test]
    fn a_regular_expression_subscribes_to_every_matching_topic_and_only_those() {
        let mut group = ConsumerGroup::default();
        let regex = TopicRegex::new("^orders-.*").unwrap();
        let pattern = Beat { subscribed: Some(BTreeSet::new()), regex: Some(Some(regex)), ..join("p") };
        let known = BTreeMap::from([("orders-eu".to_string(), 1), ("orders-us".to_string(), 2), ("t".to_string(), 1)]);
        let answer = group.heartbeat(pattern, known, 0).unwrap();
        let topics: BTreeSet<String> = answer.assignment.unwrap().into_iter().map(|(t, _)| t).collect();
        assert_eq!(topics, BTreeSet::from(["orders-eu".to_string(), "orders-us".to_string()]));
        assert!(!group.topics.contains_key("t"), "a topic nobody subscribes to is not kept");
        assert!(TopicRegex::new("(unclosed").is_err());
    }

    #[test]
    fn wrong_epochs_and_unknown_members_are_refused_and_a_missed_answer_is_forgiven() {
        let mut group = ConsumerGroup::default();
        let a = group.heartbeat(join("a"), topics(1), 0).unwrap();
        assert_eq!(group.heartbeat(beat("x", 3, &Partitions::new()), topics(1), 1), Err(Refusal::UnknownMember));
        assert_eq!(
            group.heartbeat(beat("a", a.epoch + 7, &Partitions::new()), topics(1), 1),
            Err(Refusal::FencedEpoch)
        );
        let incomplete = Beat { subscribed: None, ..join("c") };
        assert_eq!(group.heartbeat(incomplete, topics(1), 1), Err(Refusal::IncompleteJoin));

        // A partition count change bumps the epoch; a member that missed the answer
        // with it comes back with its previous epoch and what it owned, and is taken.
        let bumped = group.heartbeat(beat("a", a.epoch, &partitions(&[0])), topics(2), 2).unwrap();
        assert!(bumped.epoch > a.epoch);
        let again = group.heartbeat(beat("a", a.epoch, &partitions(&[0])), topics(2), 3).unwrap();
        assert_eq!(again.epoch, bumped.epoch);
        assert_eq!(again.assignment, Some(partitions(&[0, 1])), "its view differs from what it was told");
    }
}
