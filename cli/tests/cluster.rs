//! Shale as separate processes on the local S3 server: one `shale metadata`, three
//! `shale gateway`s and two `shale reader`s, with eight producers over 200 streams.
//! Checks that every acked record appears exactly once, in order, with dense sequence
//! numbers, on both readers; through a metadata takeover and a metadata crash; and after
//! `kill -9` of a gateway, whose orphan segments are then collected.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::cluster::{metric, read_stream, wait_for_lease, wait_until, Cluster, FAST_LEASE};
use common::terminate;
use serde_json::{json, Value};
use shale_storage::object_store::path::Path;

const BASIN: &str = "cluster-basin";
const STREAMS: usize = 200;
const PRODUCERS: usize = 8;

/// A record a producer got an ack for: where it must be found.
#[derive(Clone, Debug)]
struct Acked {
    stream: String,
    body: String,
    seq: u64,
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap()
}

fn stream_name(i: usize) -> String {
    format!("s{i:03}")
}

/// Creates the basin (streams are created on first append) through a gateway.
async fn create_basin(client: &reqwest::Client, gateway: &str) {
    let body = json!({ "basin": BASIN, "config": { "create_stream_on_append": true } });
    let r = client.post(format!("{gateway}/v1/basins")).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

/// Eight producers append one record per request, spreading over the streams and the
/// gateways, until `stop`; each returns what was acked and how many calls failed.
fn start_producers(gateways: Vec<String>, stop: Arc<AtomicBool>) -> Vec<tokio::task::JoinHandle<(Vec<Acked>, u64)>> {
    (0..PRODUCERS)
        .map(|p| {
            let (gateways, stop) = (gateways.clone(), stop.clone());
            tokio::spawn(async move {
                let client = client();
                let (mut acked, mut failed) = (Vec::new(), 0);
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let stream = stream_name((p * 31 + i * 7) % STREAMS);
                    let gateway = &gateways[(p + i) % gateways.len()];
                    let body = format!("p{p}-{i}");
                    i += 1;
                    let response = client
                        .post(format!("{gateway}/v1/streams/{stream}/records"))
                        .header("s2-basin", BASIN)
                        .json(&json!({ "records": [{ "body": body }] }))
                        .send()
                        .await;
                    match response {
                        Ok(r) if r.status() == 200 => {
                            let ack: Value = r.json().await.unwrap();
                            let seq = ack["start"]["seq_num"].as_u64().unwrap();
                            assert_eq!(ack["end"]["seq_num"].as_u64().unwrap(), seq + 1);
                            acked.push(Acked { stream, body, seq });
                        }
                        Ok(r) => {
                            let status = r.status();
                            let text = r.text().await.unwrap_or_default();
                            assert!(status.is_server_error() || status == 429, "unexpected {status}: {text}");
                            failed += 1;
                        }
                        Err(_) => failed += 1,
                    }
                }
                (acked, failed)
            })
        })
        .collect()
}

async fn stop_producers(
    stop: &AtomicBool,
    producers: Vec<tokio::task::JoinHandle<(Vec<Acked>, u64)>>,
) -> (Vec<Acked>, u64) {
    stop.store(true, Ordering::Relaxed);
    let (mut acked, mut failed) = (Vec::new(), 0);
    for producer in producers {
        let (a, f) = producer.await.unwrap();
        acked.extend(a);
        failed += f;
    }
    (acked, failed)
}

/// Acked records exactly once at their acked position, any record at most once.
async fn check_exactly_once(client: &reqwest::Client, readers: &[String], acked: &[Acked]) {
    let mut by_stream: HashMap<&str, Vec<&Acked>> = HashMap::new();
    for a in acked {
        by_stream.entry(&a.stream).or_default().push(a);
    }
    for reader in readers {
        let mut stored = 0;
        for i in 0..STREAMS {
            let stream = stream_name(i);
            let bodies = read_stream(client, BASIN, reader, &stream).await;
            stored += bodies.len();
            let distinct: HashSet<&String> = bodies.iter().collect();
            assert_eq!(distinct.len(), bodies.len(), "{reader} {stream}: a record appears twice");
            for a in by_stream.get(stream.as_str()).into_iter().flatten() {
                assert_eq!(bodies.get(a.seq as usize), Some(&a.body), "{reader} {stream}: acked {a:?}");
            }
        }
        assert!(stored >= acked.len(), "{reader}: {stored} stored < {} acked", acked.len());
    }
}

/// Total appends the gateways acked, from their `/metrics`.
async fn gateway_acks(client: &reqwest::Client, gateways: &[String]) -> u64 {
    let mut total = 0;
    for gateway in gateways {
        total += metric(client, gateway, "shale_appends_acked_total").await.unwrap_or(0);
    }
    total
}

async fn block_cache_hits(client: &reqwest::Client, reader: &str) -> u64 {
    metric(client, reader, "shale_cache_block_hits_total").await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_gateways_and_readers_survive_a_metadata_takeover_and_crash() {
    let mut cluster = Cluster::new(FAST_LEASE).await;
    let (first, first_addr, first_http) = cluster.start_metadata();
    // The second address is dead: the list is tried in turn. The standby started later is
    // on an address nobody configured; gateways and readers find it in the leader record.
    cluster.metadata = vec![first_addr, "127.0.0.1:1".to_string()];
    cluster.start_roles(3, 2);
    let client = client();
    let gateways: Vec<String> = cluster.gateways.iter().map(|(_, url)| url.clone()).collect();
    let readers: Vec<String> = cluster.readers.iter().map(|(_, url)| url.clone()).collect();
    create_basin(&client, &gateways[0]).await;
    assert_eq!(client.get(format!("{first_http}/ready")).send().await.unwrap().status(), 200);
    assert_eq!(metric(&client, &first_http, "shale_metadata_leader").await, Some(1));
    let r = client.get(format!("{first_http}/v1/basins")).send().await.unwrap();
    assert_eq!(r.status(), 421, "the metadata process points clients at the other roles");

    // A call sent to the wrong role says which role to use.
    let r = client
        .post(format!("{}/v1/streams/s000/records", readers[0]))
        .header("s2-basin", BASIN)
        .json(&json!({ "records": [{ "body": "x" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 421);
    let error: Value = r.json().await.unwrap();
    assert_eq!(error["code"], "wrong_role");
    assert!(error["message"].as_str().unwrap().contains("gateway"), "{error}");
    let r = client.get(format!("{}/v1/streams/s000/records?seq_num=0", gateways[0])).header("s2-basin", BASIN);
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), 421);
    assert!(r.json::<Value>().await.unwrap()["message"].as_str().unwrap().contains("reader"));

    let stop = Arc::new(AtomicBool::new(false));
    let producers = start_producers(gateways.clone(), stop.clone());
    wait_until("500 acks before the takeover", Duration::from_secs(60), || async {
        gateway_acks(&client, &gateways).await >= 500
    })
    .await;

    // A second metadata on the same store takes over; the first exits non-zero.
    let (second, _, second_http) = cluster.start_metadata();
    wait_for_lease(&client, &second_http, "the new metadata").await;
    let first_status = tokio::task::spawn_blocking(move || {
        let mut first = first;
        first.wait().unwrap()
    });
    let first_status = tokio::time::timeout(Duration::from_secs(30), first_status).await.unwrap().unwrap();
    assert!(!first_status.success(), "the fenced metadata exits with an error: {first_status}");
    let at_switch = gateway_acks(&client, &gateways).await;
    wait_until("500 acks after the takeover", Duration::from_secs(60), || async {
        gateway_acks(&client, &gateways).await >= at_switch + 500
    })
    .await;

    // Then the new leader crashes (kill -9, mid-commit) and a third one starts: commits
    // that were in flight are retried there, and none is applied twice.
    let (third, _) = cluster.replace_metadata(&client, second).await;
    let at_crash = gateway_acks(&client, &gateways).await;
    wait_until("500 acks after the crash", Duration::from_secs(60), || async {
        gateway_acks(&client, &gateways).await >= at_crash + 500
    })
    .await;
    let (acked, failed) = stop_producers(&stop, producers).await;
    println!("acked {} failed {failed} across a takeover and a crash", acked.len());

    check_exactly_once(&client, &readers, &acked).await;

    // Each reader has its own cache: reading the same range again is served from it.
    let hits_before = block_cache_hits(&client, &readers[1]).await;
    let stream = &acked[0].stream;
    let again = read_stream(&client, BASIN, &readers[1], stream).await;
    assert!(!again.is_empty());
    assert!(block_cache_hits(&client, &readers[1]).await > hits_before, "a repeated read hits the cache");
    cluster.stop_all();
    assert!(terminate(third).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_gateway_loses_no_acked_append_and_its_orphans_are_collected() {
    let config = format!(
        "{FAST_LEASE}[metadata]\nmax_commit_age = \"1s\"\norphan_grace = \"2s\"\ngc_interval = \"200ms\"\n\
         [gateway]\nmax_inflight_segments = 16\n"
    );
    let mut cluster = Cluster::new(&config).await;
    let (metadata, metadata_addr, metadata_http) = cluster.start_metadata();
    cluster.metadata = vec![metadata_addr];
    cluster.start_roles(3, 2);
    let client = client();
    let gateways: Vec<String> = cluster.gateways.iter().map(|(_, url)| url.clone()).collect();
    let readers: Vec<String> = cluster.readers.iter().map(|(_, url)| url.clone()).collect();
    create_basin(&client, &gateways[0]).await;

    let stop = Arc::new(AtomicBool::new(false));
    let producers = start_producers(gateways.clone(), stop.clone());
    wait_until("300 acks", Duration::from_secs(60), || async { gateway_acks(&client, &gateways).await >= 300 }).await;

    // Freeze metadata so uploads pile up uncommitted, then kill a gateway with some in
    // flight: those segments can never be committed.
    let pid = metadata.id() as i32;
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let before = cluster.segment_objects().await;
    // Readiness follows metadata: a gateway whose metadata does not answer is not ready.
    let ready = client.get(format!("{}/ready", gateways[1])).send().await.unwrap();
    assert_eq!(ready.status(), 503, "{}", ready.text().await.unwrap());
    // Appends the victim takes while metadata is frozen: sealed and uploaded, never acked.
    let doomed: Vec<_> = (0..3)
        .map(|k| {
            let (client, victim) = (client.clone(), gateways[0].clone());
            tokio::spawn(async move {
                let body = json!({ "records": [{ "body": format!("doomed-{k}") }] });
                let url = format!("{victim}/v1/streams/s000/records");
                client.post(url).header("s2-basin", BASIN).json(&body).send().await.map(|r| r.status())
            })
        })
        .collect();
    wait_until("the victim uploads a segment while metadata is frozen", Duration::from_secs(30), || async {
        let mut found = false;
        for path in cluster.segment_objects().await.difference(&before) {
            found |= cluster.holds_doomed_records(path).await;
        }
        found
    })
    .await;
    let (mut victim, _) = cluster.gateways.remove(0);
    victim.kill().unwrap();
    victim.wait().unwrap();
    for append in doomed {
        assert!(!append.await.unwrap().is_ok_and(|status| status == 200), "no ack from a frozen metadata");
    }
    let uncommitted: HashSet<Path> = cluster.segment_objects().await.difference(&before).cloned().collect();
    // Past max_commit_age, no commit can make these segments visible any more.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    unsafe { libc::kill(pid, libc::SIGCONT) };

    wait_until("the orphans are deleted", Duration::from_secs(60), || async {
        cluster.segment_objects().await.is_disjoint(&uncommitted)
    })
    .await;
    // A pass counts its deletions when it ends, after it has saved its cursor.
    wait_until("the orphans' deletions are counted", Duration::from_secs(30), || async {
        metric(&client, &metadata_http, "shale_gc_orphans_deleted_total").await.unwrap_or(0) >= uncommitted.len() as u64
    })
    .await;
    let survivors: Vec<String> = gateways[1..].to_vec();
    let at_resume = gateway_acks(&client, &survivors).await;
    wait_until("appends after the kill", Duration::from_secs(60), || async {
        gateway_acks(&client, &survivors).await >= at_resume + 200
    })
    .await;
    let (acked, failed) = stop_producers(&stop, producers).await;
    println!("acked {} failed {failed}; {} orphan segments collected", acked.len(), uncommitted.len());
    check_exactly_once(&client, &readers, &acked).await;
    for reader in &readers {
        let bodies = read_stream(&client, BASIN, reader, "s000").await;
        assert!(!bodies.iter().any(|b| b.starts_with("doomed-")), "an orphaned append became visible");
    }
    cluster.stop_all();
    assert!(terminate(metadata).success());
}

/// Reads `stream` on `reader` until `stop`, checking every pass is dense from 0 and
/// never shorter than the one before: no gap, duplicate or lost record while compaction
/// swaps entries and collection deletes objects.
fn start_checker(reader: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let client = client();
        let (mut passes, mut longest) = (0u64, 0usize);
        while !stop.load(Ordering::Relaxed) {
            for i in (0..STREAMS).step_by(25) {
                let bodies = read_stream(&client, BASIN, &reader, &stream_name(i)).await;
                let distinct: HashSet<&String> = bodies.iter().collect();
                assert_eq!(distinct.len(), bodies.len(), "a record read twice during compaction");
                longest = longest.max(bodies.len());
            }
            passes += 1;
        }
        passes
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_and_collection_lose_nothing_through_kill_9() {
    let config = format!(
        "{FAST_LEASE}[metadata]\nmax_commit_age = \"3s\"\norphan_grace = \"6s\"\ngc_interval = \"200ms\"\n\
         delete_grace = \"500ms\"\n\
         [compactor]\nenabled = false\ninterval = \"200ms\"\nmin_age = \"300ms\"\nmin_object_bytes = 0\n\
         object_bytes = 65536\nblock_bytes = 16384\n"
    );
    let mut cluster = Cluster::new(&config).await;
    let (metadata, metadata_addr, metadata_http) = cluster.start_metadata();
    cluster.metadata = vec![metadata_addr];
    cluster.start_roles(2, 2);
    let client = client();
    let gateways: Vec<String> = cluster.gateways.iter().map(|(_, url)| url.clone()).collect();
    let readers: Vec<String> = cluster.readers.iter().map(|(_, url)| url.clone()).collect();
    create_basin(&client, &gateways[0]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let producers = start_producers(gateways.clone(), stop.clone());
    let checker = start_checker(readers[0].clone(), stop.clone());

    // A compactor killed with -9 mid-run leaves at most an orphan object; its successor
    // goes on from the index as it is.
    let (compactor, compactor_http) = cluster.start_compactor();
    const WRITTEN: &str = "shale_compaction_objects_written_total";
    wait_until("3 compacted objects", Duration::from_secs(60), || async {
        metric(&client, &compactor_http, WRITTEN).await.unwrap_or(0) >= 3
    })
    .await;
    let mut compactor = compactor;
    compactor.kill().unwrap();
    compactor.wait().unwrap();
    let (compactor, compactor_http) = cluster.start_compactor();
    wait_until("3 more compacted objects", Duration::from_secs(60), || async {
        metric(&client, &compactor_http, WRITTEN).await.unwrap_or(0) >= 3
    })
    .await;

    // Metadata killed with -9 while collection runs every 200 ms and commits swap entries;
    // a new one carries on from the durable state.
    let deleted_before = metric(&client, &metadata_http, "shale_reclaim_segments_deleted_total").await.unwrap_or(0);
    let (metadata, metadata_http) = cluster.replace_metadata(&client, metadata).await;
    let at_restart = gateway_acks(&client, &gateways).await;
    wait_until("appends and compaction after the restart", Duration::from_secs(60), || async {
        gateway_acks(&client, &gateways).await >= at_restart + 300
            && metric(&client, &metadata_http, "shale_reclaim_segments_deleted_total").await.unwrap_or(0) > 0
    })
    .await;
    let (acked, failed) = stop_producers(&stop, producers).await;
    let checks = checker.await.unwrap();
    assert!(checks > 0, "reads ran during compaction");

    // Once everything is compacted and collected, the store holds far fewer objects than
    // the gateways wrote, and a fresh reader needs fewer GETs than there were appends.
    wait_until("compaction catches up", Duration::from_secs(60), || async {
        metric(&client, &compactor_http, "shale_compaction_uncompacted_bytes").await == Some(0)
    })
    .await;
    let sealed = {
        let mut total = 0;
        for gateway in &gateways {
            total += metric(&client, gateway, "shale_segments_written_total").await.unwrap_or(0);
        }
        total
    };
    wait_until("released segments are deleted", Duration::from_secs(60), || async {
        metric(&client, &metadata_http, "shale_store_released_segments").await == Some(0)
            && (cluster.segment_objects().await.len() as u64) < sealed / 2
    })
    .await;
    check_exactly_once(&client, &readers, &acked).await;
    cluster.start_roles(0, 1);
    let fresh = cluster.readers.last().map(|(_, url)| url.clone()).unwrap();
    check_exactly_once(&client, std::slice::from_ref(&fresh), &acked).await;
    let gets = metric(&client, &fresh, "shale_object_gets_total").await.unwrap();
    let objects = cluster.segment_objects().await.len();
    println!(
        "acked {} failed {failed}; {sealed} segments written, {objects} objects left; a fresh reader made {gets} GETs \
         for {} appends; {deleted_before} deleted before the metadata kill",
        acked.len(),
        acked.len()
    );
    // A stream's history, a few dozen bytes here, ends up in one merged block: one GET.
    let streams = acked.iter().map(|a| a.stream.as_str()).collect::<HashSet<_>>().len() as u64;
    assert!(gets <= streams + streams / 10, "{gets} GETs to read {streams} streams ({} appends)", acked.len());
    cluster.stop_all();
    assert!(terminate(compactor).success());
    assert!(terminate(metadata).success());
}
