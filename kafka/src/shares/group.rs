//! A share group's members (KIP-932): who is in it, what each subscribes to and the
//! epoch of what it was last given. Every member is given every partition of the topics
//! it subscribes to: the records of a partition are shared out by the share-partition's
//! locks ([`super::partition`]), not by the assignment. The group outlives its members
//! (`Empty`, as Kafka keeps it) until it is deleted or moves to another coordinator.

use std::collections::{BTreeMap, BTreeSet};

/// Partitions by topic name.
pub type Assignment = BTreeMap<String, Vec<i32>>;

/// A member as ShareGroupDescribe shows it.
#[derive(Debug)]
pub struct Member {
    pub epoch: i32,
    pub topics: BTreeSet<String>,
    pub assigned: Assignment,
    pub client_id: String,
    pub rack_id: Option<String>,
    seen_ms: u64,
}

/// One heartbeat of a member, as the group sees it.
pub struct Beat<'a> {
    pub member_id: &'a str,
    pub epoch: i32,
    /// `None`: unchanged since the member's last heartbeat.
    pub topics: Option<BTreeSet<String>>,
    pub client_id: &'a str,
    pub rack_id: Option<&'a str>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    UnknownMember,
    FencedEpoch,
    /// A join without its subscription.
    NoSubscription,
}

#[derive(Default, Debug)]
pub struct ShareGroup {
    members: BTreeMap<String, Member>,
    /// Moves on whenever a member joins or leaves or an assignment changes (Kafka's
    /// group epoch; assignments follow at once, so it is the assignment epoch too).
    epoch: i32,
}

impl ShareGroup {
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// The members by id.
    pub fn members(&self) -> &BTreeMap<String, Member> {
        &self.members
    }

    /// The topics `beat`'s member subscribes to after it: those it names, else those
    /// it subscribed to before (none for a member not in the group).
    pub fn topics_after(&self, beat: &Beat<'_>) -> BTreeSet<String> {
        match &beat.topics {
            Some(topics) => topics.clone(),
            None => self.members.get(beat.member_id).map(|m| m.topics.clone()).unwrap_or_default(),
        }
    }

    /// Removes the members not heard from within `session_ms` of `now_ms`.
    pub fn expire(&mut self, now_ms: u64, session_ms: u64) {
        let before = self.members.len();
        self.members.retain(|_, m| m.seen_ms.saturating_add(session_ms) > now_ms);
        if self.members.len() != before {
            self.epoch += 1;
        }
    }

    /// Applies a heartbeat: a join (epoch 0), a leave (-1) or a member's beat, whose
    /// assignment becomes every partition of its topics (`counts` by topic). The epoch
    /// moves on each time the assignment changes. Returns the member's epoch and
    /// assignment (a leaving member's epoch is -1, its assignment empty).
    pub fn heartbeat(
        &mut self,
        beat: Beat<'_>,
        counts: &BTreeMap<String, u32>,
        now_ms: u64,
    ) -> Result<(i32, Assignment), Refusal> {
        let member = match beat.epoch {
            -1 => {
                if self.members.remove(beat.member_id).is_some() {
                    self.epoch += 1;
                }
                return Ok((-1, Assignment::new()));
            }
            0 => {
                let topics = beat.topics.ok_or(Refusal::NoSubscription)?;
                let joined = Member {
                    epoch: 0,
                    topics,
                    assigned: Assignment::new(),
                    client_id: beat.client_id.to_string(),
                    rack_id: beat.rack_id.map(str::to_string),
                    seen_ms: now_ms,
                };
                self.members.entry(beat.member_id.to_string()).insert_entry(joined).into_mut()
            }
            epoch => {
                let member = self.members.get_mut(beat.member_id).ok_or(Refusal::UnknownMember)?;
                // The answer that moved the epoch on may have been lost: the one before
                // is still this member's.
                if epoch != member.epoch && epoch != member.epoch - 1 {
                    return Err(Refusal::FencedEpoch);
                }
                if let Some(topics) = beat.topics {
                    member.topics = topics;
                }
                member
            }
        };
        member.seen_ms = now_ms;
        let assignment: Assignment = member
            .topics
            .iter()
            .filter_map(|topic| {
                counts.get(topic).filter(|&&n| n > 0).map(|&n| (topic.clone(), (0..n as i32).collect()))
            })
            .collect();
        if assignment != member.assigned || member.epoch == 0 {
            member.assigned = assignment;
            member.epoch += 1;
            self.epoch += 1;
        }
        Ok((member.epoch, member.assigned.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(id: &str, epoch: i32, topics: Option<&[&str]>) -> Beat<'static> {
        Beat {
            member_id: Box::leak(id.to_string().into_boxed_str()),
            epoch,
            topics: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
            client_id: "client",
            rack_id: None,
        }
    }

    #[test]
    fn every_member_is_given_every_partition_of_its_topics() {
        let counts = BTreeMap::from([("orders".to_string(), 2), ("audit".to_string(), 1)]);
        let mut group = ShareGroup::default();
        let (epoch, assigned) = group.heartbeat(beat("a", 0, Some(&["orders"])), &counts, 0).unwrap();
        assert_eq!((epoch, assigned), (1, Assignment::from([("orders".to_string(), vec![0, 1])])));
        let (epoch, assigned) = group.heartbeat(beat("b", 0, Some(&["orders", "audit"])), &counts, 0).unwrap();
        assert_eq!(epoch, 1);
        assert_eq!(assigned.len(), 2);
        // Unchanged: the same epoch; a partition added: the next.
        assert_eq!(group.heartbeat(beat("a", 1, None), &counts, 1).unwrap().0, 1);
        let more = BTreeMap::from([("orders".to_string(), 3)]);
        assert_eq!(
            group.heartbeat(beat("a", 1, None), &more, 2).unwrap(),
            (2, Assignment::from([("orders".to_string(), vec![0, 1, 2])]))
        );
        // The answer at 2 lost: 1 is still accepted; anything else is fenced.
        assert_eq!(group.heartbeat(beat("a", 1, None), &more, 3).unwrap().0, 2);
        assert_eq!(group.heartbeat(beat("a", 5, None), &more, 3), Err(Refusal::FencedEpoch));
        assert_eq!(group.heartbeat(beat("c", 1, None), &more, 3), Err(Refusal::UnknownMember));
        assert_eq!(group.heartbeat(beat("c", 0, None), &more, 3), Err(Refusal::NoSubscription));
        // Two joins and one assignment changed; refusals and unchanged beats move nothing.
        assert_eq!(group.epoch(), 3);
    }

    #[test]
    fn members_leave_or_expire() {
        let counts = BTreeMap::from([("t".to_string(), 1)]);
        let mut group = ShareGroup::default();
        group.heartbeat(beat("a", 0, Some(&["t"])), &counts, 0).unwrap();
        group.heartbeat(beat("b", 0, Some(&["t"])), &counts, 100).unwrap();
        assert_eq!(group.epoch(), 2);
        assert_eq!(group.heartbeat(beat("a", -1, None), &counts, 200).unwrap().0, -1);
        assert_eq!(group.members().len(), 1);
        assert_eq!(group.epoch(), 3, "a leave moves the group on");
        assert_eq!(group.heartbeat(beat("a", -1, None), &counts, 201).unwrap().0, -1);
        assert_eq!(group.epoch(), 3, "leaving again changes nothing");
        group.expire(45_099, 45_000);
        assert_eq!((group.members().len(), group.epoch()), (1, 3));
        group.expire(45_100, 45_000);
        assert!(group.is_empty());
        assert_eq!(group.epoch(), 4, "an expiry moves the group on");
    }
}
