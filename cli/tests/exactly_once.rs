//! Idempotent producers across process failures, on separate processes and the local
//! S3 server: a producer that retries every append (after `kill -9` of its gateway and
//! after a metadata crash and takeover) ends with every record exactly once and in
//! order; a gap is refused. And `shale append` goes on through a metadata failover
//! without duplicating a line.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::cluster::{read_stream, wait_until, Cluster, FAST_LEASE};
use common::{shale, terminate};
use serde_json::{json, Value};

const BASIN: &str = "once-basin";
const RECORDS_PER_APPEND: usize = 3;

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap()
}

fn bodies(seq: u64) -> Vec<String> {
    (0..RECORDS_PER_APPEND).map(|i| format!("append-{seq}-{i}")).collect()
}

/// One append by producer `p1` with sequence `seq`: the status and the JSON body.
async fn append(client: &reqwest::Client, gateway: &str, seq: u64) -> Result<(u16, Value), reqwest::Error> {
    let records: Vec<Value> = bodies(seq).into_iter().map(|body| json!({ "body": body })).collect();
    let body = json!({ "records": records, "producer_id": "p1", "producer_seq": seq });
    let r = client.post(format!("{gateway}/v1/streams/s/records")).header("s2-basin", BASIN).json(&body).send().await?;
    Ok((r.status().as_u16(), r.json().await.unwrap_or(Value::Null)))
}

/// Sends the append until it is acked (connection errors and 5xx are retried, as a
/// producer does); returns the ack's start and end sequence numbers.
async fn append_until_acked(client: &reqwest::Client, gateway: &str, seq: u64) -> (u64, u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match append(client, gateway, seq).await {
            Ok((200, ack)) => {
                return (ack["start"]["seq_num"].as_u64().unwrap(), ack["end"]["seq_num"].as_u64().unwrap())
            }
            Ok((status, body)) => assert!(status >= 500, "append {seq} refused: {status} {body}"),
            Err(_) => {}
        }
        assert!(tokio::time::Instant::now() < deadline, "append {seq} never acked");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A metadata leader, `gateways` gateways and a reader, and the basin (streams created
/// on append); returns the cluster and the leader.
async fn start(gateways: usize) -> (Cluster, std::process::Child) {
    let mut cluster = Cluster::new(FAST_LEASE).await;
    let (leader, leader_addr, _) = cluster.start_metadata();
    cluster.metadata = vec![leader_addr];
    cluster.start_roles(gateways, 1);
    let body = json!({ "basin": BASIN, "config": { "create_stream_on_append": true } });
    let r = client().post(format!("{}/v1/basins", cluster.gateways[0].1)).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 201);
    (cluster, leader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retrying_producer_appends_exactly_once_through_a_gateway_kill_and_a_metadata_failover() {
    let (mut cluster, leader) = start(2).await;
    let client = client();
    let survivor = cluster.gateways[1].1.clone();
    let reader = cluster.readers[0].1.clone();

    let mut acks = Vec::new();
    let (victim, victim_url) = cluster.gateways.remove(0);
    for seq in 0..10 {
        acks.push(append_until_acked(&client, &victim_url, seq).await);
    }
    // A retry of an applied append gets its original ack.
    assert_eq!(append_until_acked(&client, &victim_url, 9).await, acks[9]);

    // kill -9 of the gateway with an append in flight; the producer retries it elsewhere.
    let in_flight = tokio::spawn({
        let (client, url) = (client.clone(), victim_url.clone());
        async move { append(&client, &url, 10).await }
    });
    let mut victim = victim;
    victim.kill().unwrap();
    victim.wait().unwrap();
    let _ = in_flight.await.unwrap();
    acks.push(append_until_acked(&client, &survivor, 10).await);
    assert_eq!(append_until_acked(&client, &survivor, 9).await, acks[9], "the state lives in metadata");
    for seq in 11..20 {
        acks.push(append_until_acked(&client, &survivor, seq).await);
    }

    // kill -9 of the metadata leader with an append in flight; a new one takes over and
    // the producer's state is there: retries of applied appends get their acks.
    let in_flight = tokio::spawn({
        let (client, url) = (client.clone(), survivor.clone());
        async move { append(&client, &url, 20).await }
    });
    let (next_leader, _) = cluster.replace_metadata(&client, leader).await;
    let _ = in_flight.await.unwrap();
    acks.push(append_until_acked(&client, &survivor, 20).await);
    assert_eq!(append_until_acked(&client, &survivor, 19).await, acks[19]);
    assert_eq!(append_until_acked(&client, &survivor, 20).await, acks[20]);
    for seq in 21..25 {
        acks.push(append_until_acked(&client, &survivor, seq).await);
    }

    // A gap is refused with the expected sequence, and applies nothing.
    let (status, body) = append(&client, &survivor, 26).await.unwrap();
    assert_eq!(status, 412, "{body}");
    assert_eq!(body, json!({ "producer_seq_mismatch": 25 }));

    // Every record exactly once, in order, where its ack said.
    let found = read_stream(&client, BASIN, &reader, "s").await;
    let expected: Vec<String> = (0..25).flat_map(bodies).collect();
    assert_eq!(found, expected);
    for (seq, &(start, end)) in acks.iter().enumerate() {
        assert_eq!((start, end), (seq as u64 * 3, seq as u64 * 3 + 3), "ack of append {seq}");
    }
    cluster.stop_all();
    assert!(terminate(next_leader).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shale_append_goes_on_through_a_metadata_failover_without_duplicates() {
    let (cluster, leader) = start(1).await;
    let client = client();
    let reader = cluster.readers[0].1.clone();

    let mut append = shale()
        .args(["append", &format!("{BASIN}/piped"), "--server", &cluster.gateway_grpc[0]])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = append.stdin.take().unwrap();
    // Lines go in, paced, until told to stop: batches in flight while the leader is
    // replaced are resent by the CLI on a new session.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let mut written = 0u64;
            while !stop.load(Ordering::SeqCst) && written < 300_000 {
                for _ in 0..100 {
                    writeln!(stdin, "line-{written}").unwrap();
                    written += 1;
                }
                stdin.flush().unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
            written
        }
    });
    let appended_past = |at_least: u64| {
        let (client, reader) = (client.clone(), reader.clone());
        move || {
            let (client, reader) = (client.clone(), reader.clone());
            async move { tail(&client, &reader).await >= at_least }
        }
    };
    wait_until("records before the crash", Duration::from_secs(60), appended_past(2_000)).await;
    let (next_leader, _) = cluster.replace_metadata(&client, leader).await;
    let at_takeover = tail(&client, &reader).await;
    wait_until("records after the takeover", Duration::from_secs(60), appended_past(at_takeover + 2_000)).await;
    stop.store(true, Ordering::SeqCst);
    let written = writer.join().unwrap();

    let output = tokio::task::spawn_blocking(move || append.wait_with_output().unwrap());
    let output = tokio::time::timeout(Duration::from_secs(120), output).await.unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("appended {written} records, seq 0..{written}")), "{stderr}");
    let found = read_stream(&client, BASIN, &reader, "piped").await;
    assert_eq!(found.len() as u64, written, "every line once");
    assert!(found.iter().enumerate().all(|(i, line)| *line == format!("line-{i}")), "in order");
    cluster.stop_all();
    assert!(terminate(next_leader).success());
}

/// The stream's tail on `reader`; 0 before it exists.
async fn tail(client: &reqwest::Client, reader: &str) -> u64 {
    let r = client.get(format!("{reader}/v1/streams/piped/records/tail")).header("s2-basin", BASIN).send().await;
    match r {
        Ok(r) if r.status() == 200 => r.json::<Value>().await.unwrap()["tail"]["seq_num"].as_u64().unwrap(),
        _ => 0,
    }
}
