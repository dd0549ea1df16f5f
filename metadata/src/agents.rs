//! The registry of Kafka-serving agents: each renews its entry every heartbeat, and an
//! entry whose ttl passes without a renewal drops out. Kept in the leader's memory, not
//! in the database: agents heartbeat every second or so, and a PUT per heartbeat would
//! cost more than the registry is worth. A new leader starts empty and learns every agent
//! within one heartbeat; until one ttl has passed it says its list is not settled, so
//! agents keep the ones they knew.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::{AgentList, AgentRecord, MAX_AGENT_TTL_MS};

pub(crate) struct AgentRegistry {
    /// When this instance started answering (ms).
    since_ms: u64,
    state: Mutex<Registered>,
}

#[derive(Default)]
struct Registered {
    /// The longest ttl granted so far: the list is settled once that long has passed.
    longest_ttl_ms: u64,
    /// Live agents by id, with when each expires (ms).
    live: BTreeMap<i32, (AgentRecord, u64)>,
}

impl AgentRegistry {
    pub fn new(now_ms: u64) -> Self {
        Self { since_ms: now_ms, state: Mutex::default() }
    }

    /// Renews `agent` for `ttl_ms` (0: removes it) and returns the agents live at `now_ms`.
    pub fn heartbeat(&self, agent: AgentRecord, ttl_ms: u64, now_ms: u64) -> AgentList {
        let ttl_ms = ttl_ms.min(MAX_AGENT_TTL_MS);
        let mut state = self.state.lock().expect("no panic while holding the registry");
        state.longest_ttl_ms = state.longest_ttl_ms.max(ttl_ms);
        state.live.retain(|_, (_, expires)| *expires > now_ms);
        if ttl_ms == 0 {
            state.live.remove(&agent.id);
        } else {
            state.live.insert(agent.id, (agent, now_ms.saturating_add(ttl_ms)));
        }
        AgentList {
            agents: state.live.values().map(|(agent, _)| agent.clone()).collect(),
            settled: now_ms.saturating_sub(self.since_ms) >= state.longest_ttl_ms,
        }
    }

    /// Prometheus text: how many agents are live at `now_ms`, and one series per agent
    /// naming its id, address and zone.
    pub fn render(&self, now_ms: u64, out: &mut String) {
        use std::fmt::Write;
        let state = self.state.lock().expect("no panic while holding the registry");
        let live: Vec<&AgentRecord> =
            state.live.values().filter(|(_, expires)| *expires > now_ms).map(|(agent, _)| agent).collect();
        let _ = writeln!(
            out,
            "# HELP shale_kafka_agents_live Kafka-serving agents registered with this metadata instance\n\
             # TYPE shale_kafka_agents_live gauge\nshale_kafka_agents_live {}\n\
             # HELP shale_kafka_agent One series per live agent: its broker id, address and zone\n\
             # TYPE shale_kafka_agent gauge",
            live.len()
        );
        for agent in live {
            let _ = writeln!(
                out,
                "shale_kafka_agent{{id=\"{}\",address=\"{}:{}\",rack=\"{}\"}} 1",
                agent.id,
                agent.host.escape_default(),
                agent.port,
                agent.rack.escape_default()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(id: i32) -> AgentRecord {
        AgentRecord { id, host: "127.0.0.1".into(), port: 9000 + id as u16, rack: String::new() }
    }

    fn ids(list: &AgentList) -> Vec<i32> {
        list.agents.iter().map(|a| a.id).collect()
    }

    #[test]
    fn rendered_agents_are_the_live_ones() {
        let registry = AgentRegistry::new(0);
        registry.heartbeat(agent(1), 1_000, 0);
        registry.heartbeat(agent(2), 5_000, 0);
        let mut out = String::new();
        registry.render(2_000, &mut out);
        assert!(out.contains("shale_kafka_agents_live 1\n"), "{out}");
        assert!(out.contains("shale_kafka_agent{id=\"2\""), "{out}");
        assert!(!out.contains("shale_kafka_agent{id=\"1\""), "{out}");
    }

    #[test]
    fn agents_drop_out_when_their_ttl_passes_unrenewed() {
        let registry = AgentRegistry::new(1_000);
        registry.heartbeat(agent(2), 3_000, 1_000);
        let list = registry.heartbeat(agent(1), 3_000, 2_000);
        assert_eq!(ids(&list), [1, 2]);
        assert!(!list.settled, "one ttl has not passed since the registry started");
        // Agent 2 last renewed at 1,000: gone at 4,000; agent 1 renewed at 2,000 stays.
        let list = registry.heartbeat(agent(1), 3_000, 4_000);
        assert_eq!(ids(&list), [1]);
        assert!(list.settled);
    }

    #[test]
    fn a_zero_ttl_leaves_and_a_huge_one_is_capped() {
        let registry = AgentRegistry::new(0);
        registry.heartbeat(agent(1), u64::MAX, 0);
        assert_eq!(ids(&registry.heartbeat(agent(2), 1_000, 0)), [1, 2]);
        assert_eq!(ids(&registry.heartbeat(agent(2), 0, 10)), [1]);
        assert_eq!(ids(&registry.heartbeat(agent(3), 1_000, MAX_AGENT_TTL_MS + 1)), [3]);
    }
}
