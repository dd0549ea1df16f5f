//! Kafka transactions through a cluster of agents under store faults and an agent
//! crash: transactional clients (one request at a time, `shale_tests::kafka_client`)
//! each write one value to two or three partitions per transaction and commit or abort
//! it, while readers read whole partitions and every role's store fails a seeded
//! fraction of requests, and one agent is killed with -9 midway. The history must pass
//! `shale_tests::transactions::check_transactions`: no lost committed write, no aborted
//! read, no torn transaction, reads that agree with the final log.
//!
//! `SHALE_HISTORY_SEED=N` replays the same choices (timing still varies).

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale_tests::history::Clock;
use shale_tests::kafka_client::{KafkaConn, TxnProducer};
use shale_tests::transactions::{check_transactions, PartitionRead, Txn, TxnOutcome};

use common::cluster::{faulty_agents, history_seed, metric};
use common::terminate;

const TOPIC: &str = "txn-history";
const PARTITIONS: i32 = 3;
const WRITERS: usize = 4;
const READERS: usize = 2;
/// How long clients run; the agent is killed halfway.
const RUN: Duration = Duration::from_secs(16);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(40);
/// Transactions a run needs to commit before its history means anything.
const MIN_COMMITTED: usize = 20;

#[derive(Default)]
struct Histories {
    txns: Vec<Txn>,
    reads: Vec<PartitionRead>,
}

struct Shared {
    agents: Mutex<Vec<String>>,
    clock: Clock,
    histories: Mutex<Histories>,
}

impl Shared {
    async fn connect(&self, rng: &mut StdRng) -> Option<KafkaConn> {
        let agents = self.agents.lock().unwrap().clone();
        if agents.is_empty() {
            return None;
        }
        let agent = &agents[rng.random_range(0..agents.len())];
        KafkaConn::connect(agent, REQUEST_TIMEOUT).await.ok()
    }
}

/// A transactional client: its id, and its producer while it has one.
struct Writer {
    id: usize,
    rng: StdRng,
    shared: Arc<Shared>,
    producer: Option<(TxnProducer, HashMap<i32, i32>)>,
    count: usize,
}

impl Writer {
    fn transactional_id(&self) -> String {
        format!("writer-{}", self.id)
    }

    /// One transaction, start to end, recorded with its outcome. Anything unanswered or
    /// refused leaves the producer to be initialised again (a new epoch aborts whatever
    /// the old one left open).
    async fn step(&mut self) {
        let Some(mut conn) = self.shared.connect(&mut self.rng).await else { return };
        let tid = self.transactional_id();
        if self.producer.is_none() {
            match conn.init_transactional(&tid).await {
                Ok((0, id, epoch)) => self.producer = Some((TxnProducer { id, epoch, sequence: 0 }, HashMap::new())),
                _ => return,
            }
        }
        let (producer, _) = self.producer.clone().unwrap();
        // Two or three partitions, leaving out at most one.
        let left_out = self.rng.random_range(0..=PARTITIONS);
        let partitions: Vec<i32> = (0..PARTITIONS).filter(|&p| p != left_out).collect();
        if !matches!(conn.add_partitions(&tid, producer, TOPIC, &partitions).await, Ok(0)) {
            self.producer = None;
            return;
        }
        self.count += 1;
        let writes: Vec<(i32, String)> =
            partitions.iter().map(|&p| (p, format!("w{}-t{}-p{p}", self.id, self.count))).collect();
        let mut produced = true;
        for (partition, value) in &writes {
            let sequences = &mut self.producer.as_mut().unwrap().1;
            let sequence = *sequences.get(partition).unwrap_or(&0);
            let stamp = TxnProducer { sequence, ..producer };
            match conn.produce_transactional(&tid, stamp, TOPIC, *partition, std::slice::from_ref(value)).await {
                Ok((0, _)) => {
                    sequences.insert(*partition, sequence + 1);
                }
                _ => {
                    produced = false;
                    break;
                }
            }
        }
        let commit = produced && self.rng.random_bool(0.75);
        let outcome = match conn.end_transaction(&tid, producer, commit).await {
            Ok(0) if commit => TxnOutcome::Committed,
            Ok(0) => TxnOutcome::Aborted,
            _ => TxnOutcome::Unknown,
        };
        if outcome == TxnOutcome::Unknown || !produced {
            self.producer = None;
        }
        self.shared.histories.lock().unwrap().txns.push(Txn { writes, outcome });
    }
}

/// One read of a whole partition from offset 0; a failed one had no effect.
async fn read_partition(shared: &Shared, conn: &mut KafkaConn, partition: i32) -> Option<PartitionRead> {
    let invoked = shared.clock.tick();
    let mut records = Vec::new();
    let mut offset = 0;
    let high_watermark = loop {
        let fetched = conn.fetch(TOPIC, partition, offset).await.ok().filter(|f| f.error == 0)?;
        records.extend(fetched.records.iter().cloned());
        offset = records.last().map_or(0, |(o, _)| o + 1);
        if fetched.records.is_empty() || offset >= fetched.high_watermark {
            break fetched.high_watermark;
        }
    };
    Some(PartitionRead { partition, invoked, completed: shared.clock.tick(), high_watermark, records })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_transactions_under_store_faults_and_an_agent_crash_are_atomic() {
    let seed = history_seed();
    let (_cluster, leader, leader_http, mut agents) = faulty_agents(seed, TOPIC, PARTITIONS).await;
    let http = reqwest::Client::new();

    let shared = Arc::new(Shared {
        agents: Mutex::new(agents.iter().map(|a| a.kafka.clone()).collect()),
        clock: Clock::default(),
        histories: Mutex::default(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for id in 0..WRITERS {
        let mut writer = Writer {
            id,
            rng: StdRng::seed_from_u64(seed.wrapping_add(id as u64)),
            shared: shared.clone(),
            producer: None,
            count: 0,
        };
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                writer.step().await;
            }
        }));
    }
    for id in 0..READERS {
        let (shared, stop) = (shared.clone(), stop.clone());
        let mut rng = StdRng::seed_from_u64(seed.wrapping_add(1000 + id as u64));
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let Some(mut conn) = shared.connect(&mut rng).await else { continue };
                let partition = rng.random_range(0..PARTITIONS);
                if let Some(read) = read_partition(&shared, &mut conn, partition).await {
                    shared.histories.lock().unwrap().reads.push(read);
                }
            }
        }));
    }
    tokio::time::sleep(RUN / 2).await;
    let victim = StdRng::seed_from_u64(seed).random_range(0..agents.len());
    let mut killed = agents.remove(victim);
    shared.agents.lock().unwrap().retain(|a| *a != killed.kafka);
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    tokio::time::sleep(RUN / 2).await;
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }

    // Open transactions left by the run end with their timeouts or the next epoch: end
    // them now, as each writer's successor would, so the final log is settled.
    let mut conn = KafkaConn::connect(&agents[0].kafka, REQUEST_TIMEOUT).await.unwrap();
    for id in 0..WRITERS {
        let tid = format!("writer-{id}");
        let mut fenced = false;
        for _ in 0..20 {
            if matches!(conn.init_transactional(&tid).await, Ok((0, _, _))) {
                fenced = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(fenced, "{tid} could not be initialised again after the run");
    }
    let mut last = HashMap::new();
    for partition in 0..PARTITIONS {
        let mut read = None;
        for _ in 0..50 {
            read = read_partition(&shared, &mut conn, partition).await;
            if read.is_some() {
                break;
            }
        }
        last.insert(partition, read.expect("the final read kept failing").records);
    }
    let histories = std::mem::take(&mut *shared.histories.lock().unwrap());
    let summary = match check_transactions(&histories.txns, &histories.reads, &last) {
        Ok(summary) => summary,
        Err(violation) => panic!("transactions violated (seed {seed}): {violation}"),
    };
    let mut faults = 0;
    for base in agents.iter().map(|a| a.http.as_str()).chain([leader_http.as_str()]) {
        faults += metric(&http, base, "shale_store_faults_injected_total").await.unwrap_or(0);
    }
    println!(
        "checked {} transactions and {} reads: {summary:?}; {faults} store faults injected (surviving processes)",
        histories.txns.len(),
        histories.reads.len()
    );
    assert!(summary.committed >= MIN_COMMITTED, "too few transactions committed to mean anything: {summary:?}");
    assert!(summary.aborted > 0, "no transaction was aborted: {summary:?}");
    assert!(faults > 0, "no fault was injected");
    for agent in agents {
        terminate(agent.child);
    }
    assert!(terminate(leader).success());
}
