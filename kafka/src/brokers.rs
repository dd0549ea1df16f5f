//! The brokers clients are told about, and who leads what among them. `shale serve` is
//! one broker alone. A cluster of agents (`shale agent`) is every agent registered with
//! metadata ([`run_membership`] renews this one's entry and refreshes the list).
//!
//! Any broker serves any partition (metadata orders every commit), so a partition's
//! leader is only where its requests are sent: spread over the live brokers by
//! rendezvous hashing, which moves only the partitions of a broker that joins or leaves.
//! A group's coordinator is chosen the same way from the group id, so every broker with
//! the same list agrees on it; the lists agree within one heartbeat of a change.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use shale_metadata_contract::{AgentList, AgentRecord, MetadataApi};
use shale_storage::Clock;

/// A broker as Metadata answers name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broker {
    pub id: i32,
    pub host: String,
    pub port: i32,
    /// Its zone (`broker.rack`); empty when not set.
    pub rack: String,
}

impl Broker {
    fn of(agent: &AgentRecord) -> Self {
        Self { id: agent.id, host: agent.host.clone(), port: i32::from(agent.port), rack: agent.rack.clone() }
    }

    fn record(&self) -> AgentRecord {
        AgentRecord {
            id: self.id,
            host: self.host.clone(),
            port: u16::try_from(self.port).unwrap_or_default(),
            rack: self.rack.clone(),
        }
    }
}

/// What this broker knows of the cluster.
pub struct Brokers {
    me: Broker,
    clock: Arc<dyn Clock>,
    view: RwLock<View>,
}

struct View {
    /// Live brokers by id, this one among them while it is registered.
    live: Arc<Vec<Broker>>,
    /// Past this (ms) without a heartbeat answered, metadata has dropped this broker:
    /// it coordinates nothing. `None` for a broker alone, which never expires.
    valid_until_ms: Option<u64>,
}

impl Brokers {
    /// One broker alone: it leads every partition and coordinates every group.
    pub fn alone(me: Broker, clock: Arc<dyn Clock>) -> Self {
        let live = Arc::new(vec![me.clone()]);
        Self { me, clock, view: RwLock::new(View { live, valid_until_ms: None }) }
    }

    /// A cluster member not yet registered: it knows only itself and coordinates
    /// nothing until [`Self::update`] gives it the list.
    pub fn member(me: Broker, clock: Arc<dyn Clock>) -> Self {
        let live = Arc::new(vec![me.clone()]);
        Self { me, clock, view: RwLock::new(View { live, valid_until_ms: Some(0) }) }
    }

    pub fn me(&self) -> &Broker {
        &self.me
    }

    /// The live brokers, by id.
    pub fn live(&self) -> Arc<Vec<Broker>> {
        self.view.read().expect("no panic while holding the view").live.clone()
    }

    /// The brokers a client in `zone` is told about: those of its zone when any is live,
    /// else all.
    pub fn for_zone(&self, zone: Option<&str>) -> Arc<Vec<Broker>> {
        let live = self.live();
        let Some(zone) = zone else { return live };
        let local: Vec<Broker> = live.iter().filter(|b| b.rack == zone).cloned().collect();
        if local.is_empty() {
            live
        } else {
            Arc::new(local)
        }
    }

    /// Whether this broker's list is current: a member whose heartbeats have gone
    /// unanswered past its ttl may be dropped by metadata already.
    fn current(&self, view: &View) -> bool {
        view.valid_until_ms.is_none_or(|until| self.clock.now_ms() < until)
    }

    /// The broker coordinating `group` (Kafka's group coordinator, or a transactional
    /// id's); `None` while this broker's own list is not current.
    pub fn coordinator_of(&self, group: &str) -> Option<Broker> {
        let view = self.view.read().expect("no panic while holding the view");
        if !self.current(&view) {
            return None;
        }
        pick(&view.live, hash(group.as_bytes())).cloned()
    }

    /// Whether this broker coordinates `group` now.
    pub fn coordinates(&self, group: &str) -> bool {
        self.coordinator_of(group).is_some_and(|b| b.id == self.me.id)
    }

    /// The broker that leads `partition` of `topic` among `brokers`.
    pub fn leader_of(brokers: &[Broker], topic: &str, partition: i32) -> i32 {
        let key = hash(topic.as_bytes()) ^ mix(partition as u64);
        pick(brokers, key).map_or(-1, |b| b.id)
    }

    /// Takes metadata's answer to a heartbeat sent at `sent_ms` with `ttl_ms`. A list
    /// that is not settled (a new metadata leader still hearing from agents) keeps the
    /// brokers known before.
    pub fn update(&self, answer: AgentList, sent_ms: u64, ttl_ms: u64) {
        let mut fresh: Vec<Broker> = answer.agents.iter().map(Broker::of).collect();
        if let Some(other) =
            fresh.iter().find(|b| b.id == self.me.id && (b.host != self.me.host || b.port != self.me.port))
        {
            // Two agents with one id overwrite each other's registration: say so loudly.
            tracing::warn!(id = self.me.id, other = %format!("{}:{}", other.host, other.port),
                "another kafka agent registered with this broker id: set [kafka] node_id apart");
        }
        let mut view = self.view.write().expect("no panic while holding the view");
        if !answer.settled {
            for known in view.live.iter() {
                if !fresh.iter().any(|b| b.id == known.id) {
                    fresh.push(known.clone());
                }
            }
        }
        if !fresh.iter().any(|b| b.id == self.me.id) {
            fresh.push(self.me.clone());
        }
        fresh.sort_by_key(|b| b.id);
        if fresh.iter().map(|b| b.id).ne(view.live.iter().map(|b| b.id)) {
            let ids: Vec<i32> = fresh.iter().map(|b| b.id).collect();
            tracing::info!(brokers = ?ids, settled = answer.settled, "kafka brokers changed");
        }
        view.live = Arc::new(fresh);
        // Metadata counts the ttl from when it applied the heartbeat, after it was sent.
        view.valid_until_ms = Some(sent_ms.saturating_add(ttl_ms));
    }

    /// Registers or renews this broker with metadata for `ttl_ms` and takes the live list
    /// it answers.
    async fn renew(
        &self,
        metadata: &dyn MetadataApi,
        ttl_ms: u64,
    ) -> Result<(), shale_metadata_contract::MetadataError> {
        let sent_ms = self.clock.now_ms();
        let answer = metadata.agent_heartbeat(self.me.record(), ttl_ms).await?;
        self.update(answer, sent_ms, ttl_ms);
        Ok(())
    }
}

/// How a member keeps its registration: renewed every `interval`, dropped by metadata
/// `ttl` after the last renewal.
#[derive(Clone, Copy, Debug)]
pub struct Membership {
    pub interval: Duration,
    pub ttl: Duration,
}

impl Membership {
    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }
}

/// This process's place in `cluster`, as `host:port`: alone, or an agent registered with
/// metadata (and the task that keeps it registered until `stop` resolves).
pub async fn join(
    cluster: crate::Cluster,
    config: &crate::KafkaConfig,
    (host, port): (String, i32),
    service: &shale_service::Service,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> (Arc<Brokers>, Option<tokio::task::JoinHandle<()>>) {
    let clock = service.clock().clone();
    if cluster == crate::Cluster::Alone {
        let me = Broker { id: config.node_id.unwrap_or(0), host, port, rack: config.rack.clone() };
        return (Arc::new(Brokers::alone(me, clock)), None);
    }
    let id = config.node_id.unwrap_or_else(|| id_of_address(&host, port));
    let me = Broker { id, host, port, rack: config.rack.clone() };
    let brokers = Arc::new(Brokers::member(me, clock));
    let membership = config.membership();
    match brokers.renew(service.metadata().as_ref(), membership.ttl_ms()).await {
        // The others add this agent at their next heartbeat: wait that long before
        // answering, so no client is told of a coordinator the others do not know.
        Ok(()) => tokio::time::sleep(membership.interval).await,
        Err(e) => {
            tracing::warn!(error = %e, "kafka agent could not register yet: it coordinates no group until it does")
        }
    }
    let task = run_membership(brokers.clone(), service.metadata().clone(), membership, stop);
    (brokers, Some(tokio::spawn(task)))
}

/// Registers this broker with metadata and renews it every interval until `stop`
/// resolves, then leaves (a ttl of 0), so the others stop naming it at once.
async fn run_membership(
    brokers: Arc<Brokers>,
    metadata: Arc<dyn MetadataApi>,
    membership: Membership,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut stop = std::pin::pin!(stop);
    let mut ticks = tokio::time::interval(membership.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = &mut stop => break,
            _ = ticks.tick() => {}
        }
        if let Err(e) = brokers.renew(metadata.as_ref(), membership.ttl_ms()).await {
            tracing::warn!(error = %e, "kafka agent heartbeat failed");
        }
    }
    if let Err(e) = metadata.agent_heartbeat(brokers.me.record(), 0).await {
        tracing::warn!(error = %e, "kafka agent could not leave the cluster");
    }
}

/// The broker id an agent takes from its advertised address when none is configured:
/// stable across restarts at the same address, positive, and not 0 (`shale serve`'s).
pub fn id_of_address(host: &str, port: i32) -> i32 {
    let h = hash(format!("{host}:{port}").as_bytes());
    ((h % (i32::MAX as u64 - 1)) + 1) as i32
}

/// Rendezvous hashing: the broker scoring highest for `key`.
fn pick(brokers: &[Broker], key: u64) -> Option<&Broker> {
    brokers.iter().max_by_key(|b| (mix(key ^ mix(b.id as u64)), b.id))
}

/// FNV-1a: stable across builds and processes, unlike the standard library's hasher.
fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// SplitMix64's finaliser: spreads close inputs apart.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Debug, Default)]
    struct Manual(AtomicU64);
    impl Clock for Manual {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    fn broker(id: i32) -> Broker {
        Broker { id, host: "127.0.0.1".into(), port: 9000 + id, rack: if id % 2 == 0 { "a" } else { "b" }.into() }
    }

    fn list(ids: &[i32], settled: bool) -> AgentList {
        AgentList { agents: ids.iter().map(|&id| broker(id).record()).collect(), settled }
    }

    #[test]
    fn every_broker_with_the_same_list_agrees_on_coordinators_and_leaders() {
        let clock = Arc::new(Manual::default());
        let members: Vec<Brokers> = (1..=3).map(|id| Brokers::member(broker(id), clock.clone())).collect();
        for m in &members {
            m.update(list(&[1, 2, 3], true), 0, 5_000);
        }
        let mut coordinated = [0; 3];
        for g in 0..300 {
            let group = format!("group-{g}");
            let chosen: Vec<i32> = members.iter().map(|m| m.coordinator_of(&group).unwrap().id).collect();
            assert!(chosen.windows(2).all(|w| w[0] == w[1]), "{group}: {chosen:?}");
            assert_eq!(members.iter().filter(|m| m.coordinates(&group)).count(), 1);
            coordinated[(chosen[0] - 1) as usize] += 1;
        }
        assert!(coordinated.iter().all(|&n| n > 60), "groups spread over the brokers: {coordinated:?}");
        let live = members[0].live();
        let leaders: std::collections::HashSet<i32> = (0..32).map(|p| Brokers::leader_of(&live, "t", p)).collect();
        assert_eq!(leaders.len(), 3, "32 partitions land on every broker");
    }

    #[test]
    fn a_broker_leaving_moves_only_its_own_groups() {
        let clock = Arc::new(Manual::default());
        let me = Brokers::member(broker(1), clock.clone());
        me.update(list(&[1, 2, 3], true), 0, 5_000);
        let before: Vec<i32> = (0..200).map(|g| me.coordinator_of(&format!("g{g}")).unwrap().id).collect();
        me.update(list(&[1, 2], true), 0, 5_000);
        for (g, was) in before.iter().enumerate() {
            let now = me.coordinator_of(&format!("g{g}")).unwrap().id;
            if *was != 3 {
                assert_eq!(now, *was, "g{g} moved though its coordinator stayed");
            }
        }
    }

    #[test]
    fn an_unsettled_list_keeps_the_known_brokers_and_a_stale_one_coordinates_nothing() {
        let clock = Arc::new(Manual::default());
        let me = Brokers::member(broker(1), clock.clone());
        assert!(me.coordinator_of("g").is_none(), "not registered yet");
        me.update(list(&[1, 2, 3], true), 0, 5_000);
        me.update(list(&[1], false), 1_000, 5_000);
        assert_eq!(me.live().iter().map(|b| b.id).collect::<Vec<_>>(), [1, 2, 3]);
        me.update(list(&[1], true), 2_000, 5_000);
        assert_eq!(me.live().iter().map(|b| b.id).collect::<Vec<_>>(), [1]);
        clock.0.store(7_000, Ordering::SeqCst);
        assert!(me.coordinator_of("g").is_none(), "no heartbeat answered for a ttl");
    }

    #[test]
    fn a_zone_sees_its_own_brokers_when_it_has_any() {
        let me = Brokers::member(broker(1), Arc::new(Manual::default()));
        me.update(list(&[1, 2, 3, 4], true), 0, 5_000);
        let ids = |zone| me.for_zone(zone).iter().map(|b| b.id).collect::<Vec<_>>();
        assert_eq!(ids(Some("a")), [2, 4]);
        assert_eq!(ids(Some("b")), [1, 3]);
        assert_eq!(ids(Some("c")), [1, 2, 3, 4]);
        assert_eq!(ids(None), [1, 2, 3, 4]);
    }

    #[test]
    fn derived_ids_are_positive_and_stable() {
        let id = id_of_address("127.0.0.1", 9092);
        assert!(id > 0);
        assert_eq!(id, id_of_address("127.0.0.1", 9092));
        assert_ne!(id, id_of_address("127.0.0.1", 9093));
    }
}
