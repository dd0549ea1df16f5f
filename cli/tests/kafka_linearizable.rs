//! Linearizability of Kafka histories through a cluster of agents: clients produce (one
//! batch per request, outcome acked, refused or unknown), fetch, ask for the latest
//! offset, and commit and fetch group offsets (each group one writer, committing through
//! its coordinator) while every role's store fails a seeded fraction of requests and one
//! agent is killed with -9 midway. Each partition's history must pass the log checker
//! (`shale_tests::history`: no acked record lost or duplicated, every record where its
//! ack said, nothing read that was not written, real-time order), each group's the
//! committed-offset checker (`shale_tests::committed`: no spurious offset 0, no commit
//! lost or moved backwards after a coordinator change).
//!
//! The operations come from a seeded generator: the seed is printed, and
//! `SHALE_HISTORY_SEED=N` replays the same choices (timing still varies).

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale_tests::committed::{check_committed, CommitOutcome, OffsetEvent, OffsetOp};
use shale_tests::history::{check, AppendOutcome, Clock, Event, Op};
use shale_tests::kafka_client::KafkaConn;

use common::cluster::{faulty_agents, history_seed, metric};
use common::terminate;

const TOPIC: &str = "history";
const PARTITIONS: i32 = 3;
const CLIENTS: usize = 6;
/// How long clients run; the agent is killed halfway.
const RUN: Duration = Duration::from_secs(16);
/// A request's answer waits at most this long: longer than an agent's metadata calls
/// retry across a failover, so an unanswered one is not still in flight afterwards.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(40);
/// Acked produces a run needs before its history means anything.
const MIN_ACKED: usize = 60;
/// Kafka's codes for a coordinator that is not this broker or not ready: refused before
/// anything was done.
const NOT_COORDINATOR: [i16; 3] = [14, 15, 16];

/// What all clients record.
#[derive(Default)]
struct Histories {
    /// Per partition.
    logs: HashMap<i32, Vec<Event>>,
    /// Per group.
    offsets: HashMap<usize, Vec<OffsetEvent>>,
}

/// One client's connections, by agent address; a failed one is dropped.
#[derive(Default)]
struct Connections(HashMap<String, KafkaConn>);

impl Connections {
    async fn to(&mut self, addr: &str) -> Option<&mut KafkaConn> {
        if !self.0.contains_key(addr) {
            let conn = KafkaConn::connect(addr, REQUEST_TIMEOUT).await.ok()?;
            self.0.insert(addr.to_string(), conn);
        }
        self.0.get_mut(addr)
    }

    fn drop_conn(&mut self, addr: &str) {
        self.0.remove(addr);
    }
}

struct Client {
    id: usize,
    rng: StdRng,
    conns: Connections,
    agents: Arc<Mutex<Vec<String>>>,
    clock: Arc<Clock>,
    histories: Arc<Mutex<Histories>>,
    /// The highest offset this client knows each partition reached.
    known_end: HashMap<i32, i64>,
    /// This client's group's next offset to commit.
    next_commit: u64,
    ops: usize,
}

impl Client {
    fn agent(&mut self) -> String {
        let agents = self.agents.lock().unwrap().clone();
        agents[self.rng.random_range(0..agents.len())].clone()
    }

    fn log(&self, partition: i32, event: Event) {
        self.histories.lock().unwrap().logs.entry(partition).or_default().push(event);
    }

    fn offsets(&self, group: usize, event: OffsetEvent) {
        self.histories.lock().unwrap().offsets.entry(group).or_default().push(event);
    }

    async fn step(&mut self) {
        self.ops += 1;
        let partition = self.rng.random_range(0..PARTITIONS);
        let agent = self.agent();
        match self.rng.random_range(0..10) {
            0..=3 => self.produce(&agent, partition).await,
            4..=5 => self.fetch(&agent, partition).await,
            6 => self.latest(&agent, partition).await,
            7..=8 => self.commit().await,
            _ => self.fetch_committed(&agent).await,
        }
    }

    async fn produce(&mut self, agent: &str, partition: i32) {
        let values: Vec<String> =
            (0..self.rng.random_range(1..=3)).map(|i| format!("c{}-{}-{i}", self.id, self.ops)).collect();
        let invoked = self.clock.tick();
        let answer = match self.conns.to(agent).await {
            Some(conn) => conn.produce(TOPIC, partition, &values).await,
            None => Err("no connection".into()),
        };
        let outcome = match answer {
            Ok((0, base)) => {
                let end = base + values.len() as i64;
                let known = self.known_end.entry(partition).or_default();
                *known = (*known).max(end);
                AppendOutcome::Acked { start: base as u64 }
            }
            // Any error may come after the records were committed (a lost answer from
            // metadata): at most once, anywhere after the produce began.
            Ok(_) => AppendOutcome::Unknown,
            Err(_) => {
                self.conns.drop_conn(agent);
                AppendOutcome::Unknown
            }
        };
        let op = Op::Append { bodies: values, match_seq_num: None, outcome };
        self.log(partition, Event { client: self.id, invoked, completed: self.clock.tick(), op });
    }

    async fn fetch(&mut self, agent: &str, partition: i32) {
        let end = self.known_end.get(&partition).copied().unwrap_or(0);
        let from = self.rng.random_range(0..=end);
        let invoked = self.clock.tick();
        let Some(conn) = self.conns.to(agent).await else { return };
        match conn.fetch(TOPIC, partition, from).await {
            Ok(fetched) if fetched.error == 0 => {
                let records = fetched.records.into_iter().map(|(o, v)| (o as u64, v)).collect();
                let op = Op::Read { from: from as u64, records, tail: fetched.high_watermark as u64 };
                self.log(partition, Event { client: self.id, invoked, completed: self.clock.tick(), op });
            }
            // A failed read had no effect: left out of the history.
            Ok(_) => {}
            Err(_) => self.conns.drop_conn(agent),
        }
    }

    async fn latest(&mut self, agent: &str, partition: i32) {
        let invoked = self.clock.tick();
        let Some(conn) = self.conns.to(agent).await else { return };
        match conn.latest(TOPIC, partition).await {
            Ok((0, tail)) => {
                let op = Op::CheckTail { tail: tail as u64 };
                self.log(partition, Event { client: self.id, invoked, completed: self.clock.tick(), op });
            }
            Ok(_) => {}
            Err(_) => self.conns.drop_conn(agent),
        }
    }

    /// Commits this client's group's next offset on partition 0, through the group's
    /// coordinator.
    async fn commit(&mut self) {
        let group = format!("g{}", self.id);
        let agent = self.agent();
        let Some(conn) = self.conns.to(&agent).await else { return };
        let coordinator = match conn.coordinator(&group).await {
            Ok(Ok(coordinator)) => coordinator,
            Ok(Err(_)) => return,
            Err(_) => return self.conns.drop_conn(&agent),
        };
        self.next_commit += 1;
        let offset = self.next_commit;
        let invoked = self.clock.tick();
        let answer = match self.conns.to(&coordinator).await {
            Some(conn) => conn.commit(&group, TOPIC, 0, offset as i64).await,
            None => Err("no connection".into()),
        };
        let outcome = match answer {
            Ok(0) => CommitOutcome::Acked,
            Ok(code) if NOT_COORDINATOR.contains(&code) => CommitOutcome::Refused,
            Ok(_) => CommitOutcome::Unknown,
            Err(_) => {
                self.conns.drop_conn(&coordinator);
                CommitOutcome::Unknown
            }
        };
        let op = OffsetOp::Commit { offset, outcome };
        self.offsets(self.id, OffsetEvent { invoked, completed: self.clock.tick(), op });
    }

    /// Reads some client's group's committed offset on partition 0, from any agent.
    async fn fetch_committed(&mut self, agent: &str) {
        let owner = self.rng.random_range(0..CLIENTS);
        let invoked = self.clock.tick();
        let Some(conn) = self.conns.to(agent).await else { return };
        match conn.committed(&format!("g{owner}"), TOPIC, 0).await {
            Ok((0, offset)) => {
                let op = OffsetOp::Fetch { offset: u64::try_from(offset).ok() };
                self.offsets(owner, OffsetEvent { invoked, completed: self.clock.tick(), op });
            }
            Ok(_) => {}
            Err(_) => self.conns.drop_conn(agent),
        }
    }
}

/// Every record of `partition`, read through `agent` until the high watermark, as one
/// read event (failed fetches are repeated: a read has no effect).
async fn final_read(agent: &str, partition: i32, clock: &Clock) -> Event {
    let invoked = clock.tick();
    let mut records: Vec<(u64, String)> = Vec::new();
    let mut conn = KafkaConn::connect(agent, REQUEST_TIMEOUT).await.unwrap();
    let tail = loop {
        let mut fetched = None;
        for _ in 0..20 {
            match conn.fetch(TOPIC, partition, records.len() as i64).await {
                Ok(f) if f.error == 0 => {
                    fetched = Some(f);
                    break;
                }
                _ => conn = KafkaConn::connect(agent, REQUEST_TIMEOUT).await.unwrap(),
            }
        }
        let fetched = fetched.expect("the final fetch kept failing");
        let empty = fetched.records.is_empty();
        records.extend(fetched.records.into_iter().map(|(o, v)| (o as u64, v)));
        if empty || records.len() as i64 >= fetched.high_watermark {
            break fetched.high_watermark as u64;
        }
    };
    Event { client: usize::MAX, invoked, completed: clock.tick(), op: Op::Read { from: 0, records, tail } }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_histories_under_store_faults_and_an_agent_crash_are_linearizable() {
    let seed = history_seed();
    let (_cluster, leader, leader_http, mut agents) = faulty_agents(seed, TOPIC, PARTITIONS).await;
    let http = reqwest::Client::new();

    let live = Arc::new(Mutex::new(agents.iter().map(|a| a.kafka.clone()).collect::<Vec<_>>()));
    let clock = Arc::new(Clock::default());
    let histories = Arc::new(Mutex::new(Histories::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let mut client = Client {
                id,
                rng: StdRng::seed_from_u64(seed.wrapping_add(id as u64)),
                conns: Connections::default(),
                agents: live.clone(),
                clock: clock.clone(),
                histories: histories.clone(),
                known_end: HashMap::new(),
                next_commit: 0,
                ops: 0,
            };
            let stop = stop.clone();
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    client.step().await;
                }
            })
        })
        .collect();
    tokio::time::sleep(RUN / 2).await;
    let victim = StdRng::seed_from_u64(seed).random_range(0..agents.len());
    let mut killed = agents.remove(victim);
    live.lock().unwrap().retain(|a| *a != killed.kafka);
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    tokio::time::sleep(RUN / 2).await;
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }

    let survivor = agents[0].kafka.clone();
    let mut histories = std::mem::take(&mut *histories.lock().unwrap());
    let (mut acked, mut unknown, mut ops) = (0, 0, 0);
    for partition in 0..PARTITIONS {
        let mut history = histories.logs.remove(&partition).unwrap_or_default();
        history.push(final_read(&survivor, partition, &clock).await);
        for event in &history {
            ops += 1;
            match event.op {
                Op::Append { outcome: AppendOutcome::Acked { .. }, .. } => acked += 1,
                Op::Append { outcome: AppendOutcome::Unknown, .. } => unknown += 1,
                _ => {}
            }
        }
        if let Err(violation) = check(&history) {
            panic!("partition {partition} is not linearizable (seed {seed}): {violation}");
        }
    }
    let (mut commits, mut commits_acked) = (0, 0);
    for (group, history) in &histories.offsets {
        for event in history {
            if let OffsetOp::Commit { outcome, .. } = event.op {
                commits += 1;
                commits_acked += usize::from(outcome == CommitOutcome::Acked);
            }
        }
        if let Err(violation) = check_committed(history) {
            panic!("group g{group}'s committed offset is not linearizable (seed {seed}): {violation}");
        }
    }
    let mut faults = 0;
    for base in agents.iter().map(|a| a.http.as_str()).chain([leader_http.as_str()]) {
        faults += metric(&http, base, "shale_store_faults_injected_total").await.unwrap_or(0);
    }
    println!(
        "checked {ops} operations on {PARTITIONS} partitions: {acked} produces acked, {unknown} unknown; \
         {commits} commits ({commits_acked} acked) on {} groups; {faults} store faults injected (surviving processes)",
        histories.offsets.len()
    );
    assert!(acked >= MIN_ACKED, "the run made too few produces to mean anything: {acked}");
    assert!(commits_acked > 0, "no commit was acknowledged");
    assert!(faults > 0, "no fault was injected");
    for agent in agents {
        terminate(agent.child);
    }
    assert!(terminate(leader).success());
}
