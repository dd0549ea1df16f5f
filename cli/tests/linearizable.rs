//! Linearizability across failures: clients append (half of them with `match_seq_num`),
//! read and check tails on a few streams through separate gateway and reader processes
//! while the metadata leader is killed (`kill -9`) and a standby takes over, while every
//! role's store fails a fraction of requests and a gateway is killed, or while store
//! requests are slow or hang and a reader is killed; every stream's recorded history
//! must pass the checker in `shale_tests::history`.
//!
//! The operations each client makes come from a seeded generator: the seed is printed,
//! and `SHALE_HISTORY_SEED=N` replays the same choices (timing still varies).

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use common::cluster::{Cluster, FAST_LEASE};
use common::terminate;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use shale_tests::history::{check, AppendOutcome, Clock, Event, Op};

const BASIN: &str = "history-basin";
const STREAMS: usize = 3;
const CLIENTS: usize = 6;
/// Acked appends a run needs before its history is checked.
const MIN_ACKED: u64 = 60;

struct Endpoints {
    gateways: Vec<String>,
    readers: Vec<String>,
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap()
}

/// One operation against the cluster, recorded; `None` for a read that failed (it had
/// no effect, so it is left out of the history).
async fn operate(
    http: &reqwest::Client,
    at: &Endpoints,
    clock: &Clock,
    rng: &mut StdRng,
    client: usize,
    n: usize,
    last_tail: &mut HashMap<usize, u64>,
) -> Option<(usize, Event)> {
    let stream = rng.random_range(0..STREAMS);
    let path = format!("/v1/streams/h{stream}/records");
    let known = last_tail.get(&stream).copied().unwrap_or(0);
    let choice = rng.random_range(0..10);
    let invoked = clock.tick();
    let op = match choice {
        0..=4 => {
            let bodies: Vec<String> = (0..rng.random_range(1..=3)).map(|i| format!("c{client}-{n}-{i}")).collect();
            let match_seq_num = rng.random_bool(0.5).then_some(known);
            let records: Vec<Value> = bodies.iter().map(|b| json!({ "body": b })).collect();
            let mut body = json!({ "records": records });
            if let Some(m) = match_seq_num {
                body["match_seq_num"] = json!(m);
            }
            let gateway = &at.gateways[rng.random_range(0..at.gateways.len())];
            let response = http.post(format!("{gateway}{path}")).header("s2-basin", BASIN).json(&body).send().await;
            let outcome = match response {
                Ok(r) if r.status() == 200 => {
                    let ack: Value = r.json().await.unwrap();
                    let start = ack["start"]["seq_num"].as_u64().unwrap();
                    last_tail.insert(stream, ack["tail"]["seq_num"].as_u64().unwrap());
                    AppendOutcome::Acked { start }
                }
                Ok(r) if r.status() == 412 => {
                    let error: Value = r.json().await.unwrap();
                    if let Some(tail) = error["seq_num_mismatch"].as_u64() {
                        last_tail.insert(stream, tail);
                    }
                    AppendOutcome::Refused
                }
                // 503, 504, timeouts, connections cut by the failover: it may have landed.
                _ => AppendOutcome::Unknown,
            };
            Op::Append { bodies, match_seq_num, outcome }
        }
        5..=7 => {
            let from = rng.random_range(0..=known);
            let reader = &at.readers[rng.random_range(0..at.readers.len())];
            let url = format!("{reader}{path}?seq_num={from}&count=50&clamp=true");
            let response = http.get(url).header("s2-basin", BASIN).send().await.ok()?;
            if response.status() != 200 {
                return None;
            }
            let batch: Value = response.json().await.ok()?;
            let records = batch["records"]
                .as_array()?
                .iter()
                .map(|r| (r["seq_num"].as_u64().unwrap(), r["body"].as_str().unwrap().to_string()))
                .collect();
            let tail = batch["tail"]["seq_num"].as_u64()?;
            last_tail.insert(stream, tail);
            Op::Read { from, records, tail }
        }
        _ => {
            let reader = &at.readers[rng.random_range(0..at.readers.len())];
            let response = http.get(format!("{reader}{path}/tail")).header("s2-basin", BASIN).send().await.ok()?;
            if response.status() != 200 {
                return None;
            }
            let tail = response.json::<Value>().await.ok()?["tail"]["seq_num"].as_u64()?;
            last_tail.insert(stream, tail);
            Op::CheckTail { tail }
        }
    };
    Some((stream, Event { client, invoked, completed: clock.tick(), op }))
}

/// Every record of the stream, read after the run: settles appends whose outcome was
/// unknown (present exactly once, or absent).
async fn final_read(http: &reqwest::Client, reader: &str, stream: usize, clock: &Clock) -> Event {
    let invoked = clock.tick();
    let mut records = Vec::new();
    let tail = loop {
        let url = format!("{reader}/v1/streams/h{stream}/records?seq_num={}&count=1000", records.len());
        let mut batch = None;
        // Store faults may fail a page; a read has no effect, so it is simply repeated.
        for _ in 0..20 {
            if let Ok(response) = http.get(&url).header("s2-basin", BASIN).send().await {
                if response.status() == 200 {
                    batch = Some(response.json::<Value>().await.unwrap());
                    break;
                }
            }
        }
        let batch = batch.expect("the final read kept failing");
        let page = batch["records"].as_array().unwrap();
        let tail = batch["tail"]["seq_num"].as_u64().unwrap();
        records.extend(page.iter().map(|r| (r["seq_num"].as_u64().unwrap(), r["body"].as_str().unwrap().to_string())));
        if page.is_empty() || records.len() as u64 >= tail {
            break tail;
        }
    };
    Event { client: usize::MAX, invoked, completed: clock.tick(), op: Op::Read { from: 0, records, tail } }
}

/// Which process is killed (`kill -9`) halfway through a run.
enum Victim {
    /// `kill -9` of the metadata leader; a standby takes over.
    Metadata,
    /// `kill -9` of one of the two gateways (clients keep using both).
    Gateway,
    /// `kill -9` of one of the two readers (clients keep using both).
    Reader,
}

/// Runs clients against a fresh cluster (config `toml`) for about ten seconds with
/// `victim` killed halfway, then checks every stream's history; returns the store faults the
/// surviving processes injected.
async fn run_and_check(toml: &str, victim: Victim) -> u64 {
    let seed: u64 = std::env::var("SHALE_HISTORY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| shale_storage::ids::random_in(0..u64::MAX));
    println!("history seed {seed} (SHALE_HISTORY_SEED={seed} replays the choices)");
    let toml = toml.replace("SEED", &seed.to_string());
    let mut cluster = Cluster::new(&toml).await;
    let (first, first_addr, first_http) = cluster.start_metadata();
    cluster.metadata = vec![first_addr];
    cluster.start_roles(2, 2);
    let at = Arc::new(Endpoints {
        gateways: cluster.gateways.iter().map(|(_, url)| url.clone()).collect(),
        readers: cluster.readers.iter().map(|(_, url)| url.clone()).collect(),
    });
    let http = client();
    let body = json!({ "basin": BASIN, "config": { "create_stream_on_append": true } });
    let mut created = false;
    for _ in 0..20 {
        // Store faults may fail a try; the create is idempotent with a request token.
        let r = http.post(format!("{}/v1/basins", at.gateways[0])).header("s2-request-token", "create-basin");
        if r.json(&body).send().await.is_ok_and(|r| r.status().is_success()) {
            created = true;
            break;
        }
    }
    assert!(created, "the basin could not be created");

    let clock = Arc::new(Clock::default());
    let stop = Arc::new(AtomicBool::new(false));
    let acked_so_far = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (at, clock, stop, acked_so_far) = (at.clone(), clock.clone(), stop.clone(), acked_so_far.clone());
            tokio::spawn(async move {
                let http = client();
                let mut rng = StdRng::seed_from_u64(seed.wrapping_add(c as u64));
                let (mut events, mut last_tail) = (Vec::new(), HashMap::new());
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    if let Some(event) = operate(&http, &at, &clock, &mut rng, c, n, &mut last_tail).await {
                        if matches!(event.1.op, Op::Append { outcome: AppendOutcome::Acked { .. }, .. }) {
                            acked_so_far.fetch_add(1, Ordering::Relaxed);
                        }
                        events.push(event);
                    }
                }
                events
            })
        })
        .collect();

    tokio::time::sleep(Duration::from_secs(4)).await;
    let (mut leader, mut leader_http) = (first, first_http);
    match victim {
        Victim::Metadata => {
            leader.kill().unwrap();
            leader.wait().unwrap();
            let (standby, _, standby_http) = cluster.start_metadata();
            (leader, leader_http) = (standby, standby_http);
        }
        Victim::Gateway => {
            let (mut victim, _) = cluster.gateways.remove(1);
            victim.kill().unwrap();
            victim.wait().unwrap();
        }
        Victim::Reader => {
            let (mut victim, _) = cluster.readers.remove(1);
            victim.kill().unwrap();
            victim.wait().unwrap();
        }
    }
    // Run on until enough appends were acked after the kill to mean something (a loaded
    // machine takes longer), within a bound.
    let (at_kill, deadline) = (acked_so_far.load(Ordering::Relaxed), Instant::now() + Duration::from_secs(90));
    while acked_so_far.load(Ordering::Relaxed) < (at_kill + 40).max(MIN_ACKED) {
        assert!(Instant::now() < deadline, "too few appends acked within 90 s after the kill");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);

    let mut histories: Vec<Vec<Event>> = (0..STREAMS).map(|_| Vec::new()).collect();
    for client in clients {
        for (stream, event) in client.await.unwrap() {
            histories[stream].push(event);
        }
    }
    let (mut ops, mut acked, mut unknown, mut refused) = (0, 0, 0, 0);
    for (stream, history) in histories.iter_mut().enumerate() {
        let reader = &cluster.readers[stream % cluster.readers.len()].1;
        history.push(final_read(&http, reader, stream, &clock).await);
        for event in history.iter() {
            ops += 1;
            if let Op::Append { outcome, .. } = &event.op {
                match outcome {
                    AppendOutcome::Acked { .. } => acked += 1,
                    AppendOutcome::Unknown => unknown += 1,
                    AppendOutcome::Refused => refused += 1,
                }
            }
        }
        if let Err(violation) = check(history) {
            panic!("stream h{stream} is not linearizable (seed {seed}): {violation}");
        }
    }
    let mut faults = 0;
    for base in cluster.gateways.iter().chain(&cluster.readers).map(|(_, url)| url).chain([&leader_http]) {
        let metrics = http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
        faults += shale_tests::series::<u64>(&metrics, "shale_store_faults_injected_total").unwrap_or(0);
    }
    println!(
        "checked {ops} operations on {STREAMS} streams: {acked} appends acked, {refused} refused, {unknown} unknown; \
         {faults} store faults injected (surviving processes)"
    );
    assert!(acked >= MIN_ACKED, "the run made too few appends to mean anything: {acked}");
    cluster.stop_all();
    assert!(terminate(leader).success());
    faults
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn histories_across_a_metadata_crash_are_linearizable() {
    run_and_check(FAST_LEASE, Victim::Metadata).await;
}

/// Every role's store fails a seeded fraction of requests (segment PUTs, metadata's WAL
/// and SST writes, segment GETs), and a gateway is killed mid-run: acks stay exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn histories_under_store_faults_and_a_gateway_crash_are_linearizable() {
    let faults = "store_faults = \"seed=SEED,put:segments/=0.05,put:metadata/=0.02,get:segments/=0.02\"\n";
    let injected = run_and_check(&format!("{faults}{FAST_LEASE}"), Victim::Gateway).await;
    assert!(injected > 0, "no fault was injected");
}

/// Slow and hung store requests: metadata's writes and segment reads are delayed, some
/// segment uploads and reads hang for seconds and then fail as a timed-out request
/// would; a reader is killed mid-run: acks stay exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn histories_under_slow_and_hung_store_requests_and_a_reader_crash_are_linearizable() {
    let faults = "store_faults = \"seed=SEED,delay:put:metadata/=0.2@150ms,delay:get:segments/=0.1@100ms,\
                  hang:put:segments/=0.02@3s,hang:get:segments/=0.01@2s\"\n";
    let injected = run_and_check(&format!("{faults}{FAST_LEASE}"), Victim::Reader).await;
    assert!(injected > 0, "no fault was injected");
}
