//! The coordinator's assignors for consumer-protocol groups (KIP-848's server-side
//! assignors): `uniform`, the default, spreads every subscribed partition so members'
//! counts differ by at most one where their subscriptions allow, keeping partitions with
//! their current owners where the balance does not suffer; `range` gives each member of
//! a topic a contiguous run of its partitions, as the classic range assignor does.

use std::collections::{BTreeMap, BTreeSet};

/// A partition of a topic.
pub type Partition = (String, i32);
pub type Partitions = BTreeSet<Partition>;
/// Each member's subscribed topics, by member id.
pub type Subscriptions = BTreeMap<String, BTreeSet<String>>;

/// `partitions` grouped by topic, as the protocol's messages carry them.
pub fn by_topic(partitions: &Partitions) -> BTreeMap<&str, Vec<i32>> {
    let mut grouped: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        grouped.entry(topic).or_default().push(*partition);
    }
    grouped
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Assignor {
    #[default]
    Uniform,
    Range,
}

impl Assignor {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "uniform" => Some(Assignor::Uniform),
            "range" => Some(Assignor::Range),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }
}

/// The assignor most members ask for (the default when none asks; ties to the first).
pub fn most_asked(asked: impl Iterator<Item = Assignor>) -> Assignor {
    let mut counts: BTreeMap<Assignor, usize> = BTreeMap::new();
    for assignor in asked {
        *counts.entry(assignor).or_default() += 1;
    }
    let most = counts.values().copied().max().unwrap_or(0);
    counts.into_iter().find(|&(_, n)| n == most).map_or(Assignor::default(), |(assignor, _)| assignor)
}

/// Each member's partitions of the subscribed `topics`, given the `previous` target.
pub fn assign(
    assignor: Assignor,
    members: &Subscriptions,
    topics: &BTreeMap<String, u32>,
    previous: &BTreeMap<String, Partitions>,
) -> BTreeMap<String, Partitions> {
    let mut target: BTreeMap<String, Partitions> = members.keys().map(|id| (id.clone(), Partitions::new())).collect();
    let subscribers = |topic: &str| -> Vec<&String> {
        members.iter().filter(|(_, subscribed)| subscribed.contains(topic)).map(|(id, _)| id).collect()
    };
    match assignor {
        Assignor::Range => {
            for (topic, &count) in topics {
                let subscribed = subscribers(topic);
                let Ok(m) = u32::try_from(subscribed.len()) else { continue };
                if m == 0 {
                    continue;
                }
                let mut start = 0;
                for (i, id) in subscribed.into_iter().enumerate() {
                    let run = count / m + u32::from((i as u32) < count % m);
                    let partitions = (start..start + run).map(|p| (topic.clone(), p as i32));
                    target.entry(id.clone()).or_default().extend(partitions);
                    start += run;
                }
            }
        }
        Assignor::Uniform => uniform(&mut target, topics, &subscribers, previous),
    }
    target
}

/// Keeps each partition with its previous owner up to an even share (the share plus
/// one for as many members as the remainder allows), then gives the rest, those with
/// the fewest eligible members first, each to its least loaded eligible member.
fn uniform<'a>(
    target: &mut BTreeMap<String, Partitions>,
    topics: &BTreeMap<String, u32>,
    subscribers: &dyn Fn(&str) -> Vec<&'a String>,
    previous: &BTreeMap<String, Partitions>,
) {
    let mut partitions: Vec<(Partition, Vec<&String>)> = Vec::new();
    for (topic, &count) in topics {
        let eligible = subscribers(topic);
        if !eligible.is_empty() {
            partitions.extend((0..count as i32).map(|p| ((topic.clone(), p), eligible.clone())));
        }
    }
    let members = target.len().max(1);
    let (share, mut extra) = (partitions.len() / members, partitions.len() % members);
    let owner_of: BTreeMap<&Partition, &String> =
        previous.iter().flat_map(|(id, owned)| owned.iter().map(move |p| (p, id))).collect();
    let mut placed: BTreeSet<Partition> = BTreeSet::new();
    // Kept up to the share, then one more for `extra` members.
    for bound in [share, share + 1] {
        for (partition, eligible) in &partitions {
            let Some(&owner) = owner_of.get(partition).filter(|o| eligible.contains(o)) else { continue };
            let held = target.get(owner).map_or(0, BTreeSet::len);
            if placed.contains(partition) || held >= bound || (bound > share && extra == 0) {
                continue;
            }
            if bound > share && held == share {
                extra -= 1;
            }
            target.entry(owner.clone()).or_default().insert(partition.clone());
            placed.insert(partition.clone());
        }
    }
    partitions.sort_by_key(|(partition, eligible)| (eligible.len(), partition.clone()));
    for (partition, eligible) in partitions {
        if placed.contains(&partition) {
            continue;
        }
        let least = eligible.into_iter().min_by_key(|id| (target.get(*id).map_or(0, BTreeSet::len), (*id).clone()));
        if let Some(id) = least {
            target.entry(id.clone()).or_default().insert(partition);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(subscriptions: &[(&str, &[&str])]) -> Subscriptions {
        subscriptions
            .iter()
            .map(|(id, topics)| (id.to_string(), topics.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    fn counts(target: &BTreeMap<String, Partitions>) -> Vec<usize> {
        target.values().map(BTreeSet::len).collect()
    }

    fn every_partition_once(target: &BTreeMap<String, Partitions>, topics: &BTreeMap<String, u32>) {
        let all: Vec<&Partition> = target.values().flatten().collect();
        let distinct: BTreeSet<&Partition> = all.iter().copied().collect();
        assert_eq!(all.len(), distinct.len(), "a partition given twice: {target:?}");
        assert_eq!(all.len() as u32, topics.values().sum::<u32>(), "a partition left out: {target:?}");
    }

    #[test]
    fn uniform_spreads_evenly_and_a_new_member_moves_as_little_as_it_can() {
        let topics = BTreeMap::from([("t".to_string(), 4)]);
        let two = members(&[("a", &["t"]), ("b", &["t"])]);
        let first = assign(Assignor::Uniform, &two, &topics, &BTreeMap::new());
        assert_eq!(counts(&first), vec![2, 2]);
        every_partition_once(&first, &topics);

        let three = members(&[("a", &["t"]), ("b", &["t"]), ("c", &["t"])]);
        let second = assign(Assignor::Uniform, &three, &topics, &first);
        every_partition_once(&second, &topics);
        let mut sizes = counts(&second);
        sizes.sort();
        assert_eq!(sizes, vec![1, 1, 2]);
        let kept: usize = ["a", "b"].iter().map(|id| second[*id].intersection(&first[*id]).count()).sum();
        assert_eq!(kept, 3, "one partition moves to the new member: {first:?} -> {second:?}");
    }

    #[test]
    fn uniform_gives_each_topic_only_to_its_subscribers() {
        let topics = BTreeMap::from([("t".to_string(), 3), ("u".to_string(), 3)]);
        let group = members(&[("a", &["t", "u"]), ("b", &["u"])]);
        let target = assign(Assignor::Uniform, &group, &topics, &BTreeMap::new());
        every_partition_once(&target, &topics);
        assert!(target["b"].iter().all(|(topic, _)| topic == "u"), "{target:?}");
        assert_eq!(counts(&target), vec![3, 3]);
    }

    #[test]
    fn range_gives_contiguous_runs_the_first_members_one_more() {
        let topics = BTreeMap::from([("t".to_string(), 5)]);
        let group = members(&[("a", &["t"]), ("b", &["t"])]);
        let target = assign(Assignor::Range, &group, &topics, &BTreeMap::new());
        let runs: Vec<Vec<i32>> = target.values().map(|ps| ps.iter().map(|(_, p)| *p).collect()).collect();
        assert_eq!(runs, vec![vec![0, 1, 2], vec![3, 4]]);
    }

    #[test]
    fn the_most_asked_assignor_wins_and_uniform_by_default() {
        assert_eq!(most_asked([].into_iter()), Assignor::Uniform);
        assert_eq!(most_asked([Assignor::Range, Assignor::Range, Assignor::Uniform].into_iter()), Assignor::Range);
    }
}
