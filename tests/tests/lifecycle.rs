//! The data lifecycle on every backend (memory://, file://, the local S3 server):
//! retention with an injected clock, a trim command, a stream delete and a basin delete,
//! then garbage collection. Afterwards the store holds exactly the segments live records
//! need, and every live record reads back exactly.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shale_gateway::{AppendInput, GatewayConfig};
use shale_metadata::{BasinConfig, MetadataApi, MetadataConfig, MetadataError, RetentionPolicy, StreamConfig};
use shale_proto::segment::object_path;
use shale_proto::{Header, Record};
use shale_reader::ReadStart;
use shale_storage::{Clock, ManualClock, SystemClock};
use shale_tests::{series, Backend, Node};

const BASIN: &str = "life-basin";
const DOOMED_BASIN: &str = "gone-basin";
const RECORD_BYTES: usize = 1024;

fn body(stream: &str, append: u64, i: u64) -> Bytes {
    let mut text = format!("{stream}/{append}/{i}/").into_bytes();
    text.resize(RECORD_BYTES, b'.');
    Bytes::from(text)
}

fn three_records(basin: &str, stream: &str, append: u64) -> AppendInput {
    AppendInput {
        basin: basin.into(),
        stream: stream.into(),
        records: (0..3).map(|i| Record { body: body(stream, append, i), ..Default::default() }).collect(),
        ..Default::default()
    }
}

fn trim_to(stream: &str, seq: u64) -> AppendInput {
    let command = Record {
        headers: vec![Header { name: Bytes::new(), value: Bytes::from_static(b"trim") }].into(),
        body: Bytes::copy_from_slice(&seq.to_be_bytes()),
        ..Default::default()
    };
    AppendInput { basin: BASIN.into(), stream: stream.into(), records: vec![command], ..Default::default() }
}

/// Every readable record of a stream, reading from seq 0 (reads start at the trim
/// point): (seq, body).
async fn read_everything(node: &Node, stream: &str) -> Vec<(u64, Bytes)> {
    let mut records: Vec<(u64, Bytes)> = Vec::new();
    loop {
        let start = records.last().map_or(0, |(seq, _)| seq + 1);
        let request = shale_tests::read_request(BASIN, stream, ReadStart::SeqNum(start));
        let output = node.reader.read(&request).await.unwrap();
        if output.records.is_empty() {
            return records;
        }
        records.extend(output.records.into_iter().map(|r| (r.seq_num, r.body)));
    }
}

async fn suite_gc_leaves_exactly_what_live_records_need(backend: Backend) {
    let store = backend.store().await;
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let config = MetadataConfig { delete_grace: Duration::from_secs(30), ..MetadataConfig::default() };
    let node = Node::start_with(&store, GatewayConfig::default(), clock.clone(), &config).await;
    let metadata = node.metadata.clone();
    metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    metadata.create_basin(DOOMED_BASIN, BasinConfig::default()).await.unwrap();
    let expiring = StreamConfig { retention_policy: Some(RetentionPolicy::Age(600)), ..StreamConfig::default() };
    metadata.create_stream(BASIN, "expiring", expiring).await.unwrap();
    for stream in ["trimmed", "dropped", "kept"] {
        metadata.create_stream(BASIN, stream, StreamConfig::default()).await.unwrap();
    }
    metadata.create_stream(DOOMED_BASIN, "x", StreamConfig::default()).await.unwrap();
    let streams = [(BASIN, "expiring"), (BASIN, "trimmed"), (BASIN, "dropped"), (BASIN, "kept"), (DOOMED_BASIN, "x")];

    // Five appends per stream one at a time (a segment each), then one append per
    // stream at once (sharing segments).
    for n in 0..5 {
        for (basin, stream) in streams {
            node.gateway.append(three_records(basin, stream, n)).await.unwrap();
        }
    }
    let together = streams.map(|(basin, stream)| node.gateway.append(three_records(basin, stream, 5)));
    for ack in futures::future::join_all(together).await {
        ack.unwrap();
    }
    clock.advance(Duration::from_secs(601));
    for n in 6..8 {
        node.gateway.append(three_records(BASIN, "expiring", n)).await.unwrap();
    }
    node.gateway.append(trim_to("trimmed", 9)).await.unwrap();
    metadata.delete_stream(BASIN, "dropped").await.unwrap();
    metadata.delete_basin(DOOMED_BASIN).await.unwrap();
    let before = store.segment_objects().await.len();

    let first = metadata.reclaim(store.raw.as_ref()).await.unwrap();
    assert_eq!(first.segments_deleted, 0, "nothing is deleted before delete_grace");
    clock.advance(Duration::from_secs(31));
    let second = metadata.reclaim(store.raw.as_ref()).await.unwrap();
    assert!(second.segments_deleted > 0, "{first:?} {second:?}");

    // What the live records need: the segments their index entries name.
    let mut needed = BTreeSet::new();
    let mut live_bytes = 0u64;
    for stream in ["expiring", "trimmed", "kept"] {
        let id = metadata.stream(BASIN, stream).await.unwrap().record.id;
        for entry in metadata.entries_from(id, 0, 10_000).await.unwrap() {
            needed.insert(object_path(entry.segment_id));
            live_bytes += u64::from(entry.len);
        }
    }
    let on_store = store.segment_sizes().await;
    let held: BTreeSet<String> = on_store.iter().map(|(path, _)| path.to_string()).collect();
    assert_eq!(held, needed, "the store holds exactly the segments live records name (before: {before})");
    let stored_bytes: u64 = on_store.iter().map(|(_, size)| size).sum();
    let bound = live_bytes * 3 / 2 + 1024 * on_store.len() as u64;
    assert!(stored_bytes <= bound, "stored {stored_bytes} bytes for {live_bytes} live bytes");
    let stats = metadata.gc_stats();
    assert_eq!(stats.live_segments.load(std::sync::atomic::Ordering::Relaxed), on_store.len() as u64);

    // Every live record, exactly; the rest is gone.
    let expect = |stream: &str, appends: std::ops::Range<u64>| -> Vec<(u64, Bytes)> {
        appends.flat_map(|n| (0..3).map(move |i| (n * 3 + i, body(stream, n, i)))).collect()
    };
    let kept = read_everything(&node, "kept").await;
    assert_eq!(kept, expect("kept", 0..6));
    let expiring = read_everything(&node, "expiring").await;
    assert_eq!(expiring, expect("expiring", 6..8), "reads start at the first retained record");
    let trimmed = read_everything(&node, "trimmed").await;
    assert_eq!(trimmed.first().map(|(seq, _)| *seq), Some(9));
    assert_eq!(&trimmed[..9], &expect("trimmed", 3..6)[..]);
    assert_eq!(trimmed.len(), 10, "the nine records from 9 and the trim command record");
    assert!(matches!(metadata.stream(BASIN, "dropped").await, Err(MetadataError::StreamNotFound { .. })));
    assert!(matches!(metadata.basin(DOOMED_BASIN).await, Err(MetadataError::BasinNotFound(_))));

    // A restart finds the same state, and further passes delete nothing live.
    node.stop().await;
    let node = Node::start_with(&store, GatewayConfig::default(), clock.clone(), &config).await;
    clock.advance(Duration::from_secs(31));
    let idle = node.metadata.reclaim(store.raw.as_ref()).await.unwrap();
    assert_eq!((idle.entries_removed, idle.segments_deleted), (0, 0), "{idle:?}");
    assert_eq!(read_everything(&node, "kept").await, kept);
    assert_eq!(store.segment_objects().await.len(), held.len());
    node.stop().await;
}

/// Files under `dir/sub`, recursively.
fn files_under(dir: &std::path::Path, sub: &str) -> usize {
    fn walk(path: &std::path::Path) -> usize {
        match std::fs::read_dir(path) {
            Ok(entries) => entries.flatten().map(|e| if e.path().is_dir() { walk(&e.path()) } else { 1 }).sum(),
            Err(_) => 0,
        }
    }
    walk(&dir.join(sub))
}

/// The highest number among the file names in `dir` (`00000000000000000042.sst` -> 42).
fn highest_number_under(dir: &std::path::Path) -> u64 {
    let names = std::fs::read_dir(dir).into_iter().flatten().flatten();
    names.filter_map(|e| e.file_name().to_str()?.split('.').next()?.parse().ok()).max().unwrap_or(0)
}

/// Waits for a synchronous condition (see [`shale_tests::wait_until`]).
async fn eventually(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    shale_tests::wait_until(what, limit, || std::future::ready(done())).await;
}

/// `shale serve` on a local directory, left alone: a deleted stream's segments and
/// SlateDB's obsolete WAL objects are deleted by its background passes (the file store
/// gives SlateDB's collector the conditional update it needs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_server_on_a_directory_deletes_what_is_garbage() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let server = shale_tests::TestServer::start_with(|config| {
        config.store = Some(format!("file://{}", dir.path().display()));
        config.metadata.gc_interval = Duration::from_millis(200);
        config.metadata.delete_grace = Duration::ZERO;
        config.metadata.db_gc_interval = Duration::from_millis(200);
        config.metadata.db_gc_min_age = Duration::ZERO;
        config.metadata.l0_sst_size_bytes = 4096;
    })
    .await;
    let client = &server.client;
    let created = client.post(server.url("/v1/basins")).json(&json!({ "basin": BASIN })).send().await.unwrap();
    assert_eq!(created.status(), 201);
    for stream in ["doomed", "kept"] {
        let r = client.post(server.url("/v1/streams")).header("s2-basin", BASIN).json(&json!({ "stream": stream }));
        assert_eq!(r.send().await.unwrap().status(), 201);
        let body = json!({ "records": [{ "body": "x".repeat(2000) }] });
        for _ in 0..20 {
            let path = format!("/v1/streams/{stream}/records");
            let r = client.post(server.url(&path)).header("s2-basin", BASIN).json(&body).send().await.unwrap();
            assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        }
    }
    let segments_before = files_under(dir.path(), "segments");
    assert!(segments_before >= 40, "{segments_before}");
    let deleted = client.delete(server.url("/v1/streams/doomed")).header("s2-basin", BASIN).send().await.unwrap();
    assert_eq!(deleted.status(), 202);
    eventually(Duration::from_secs(30), "deleting the stream's segments", || {
        files_under(dir.path(), "segments") <= segments_before - 20
    })
    .await;
    // WAL objects are numbered: over 40 were written (one per append at least), and
    // those behind the last level-0 flush are deleted.
    let wal_written = highest_number_under(&dir.path().join("metadata/wal"));
    assert!(wal_written >= 40, "{wal_written} WAL objects written");
    eventually(Duration::from_secs(30), "collecting SlateDB's WAL", || files_under(dir.path(), "metadata/wal") <= 10)
        .await;
    // Each level-0 flush (4 KiB here) writes a manifest; old ones are deleted only with a
    // conditional update of SlateDB's boundary file (without it, six stay here).
    eventually(Duration::from_secs(30), "collecting SlateDB's manifests", || {
        files_under(dir.path(), "metadata/manifest") <= 2
    })
    .await;
    // The pass that deleted the files counts them when it ends: all twenty of the
    // deleted stream's segments (one per append), none of the other stream's.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = client.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
        match series::<u64>(&metrics, "shale_reclaim_segments_deleted_total") {
            Some(20) => break,
            Some(0) | None => {}
            other => panic!("{other:?} segments deleted, expected 20"),
        }
        assert!(tokio::time::Instant::now() < deadline, "the deletions were never counted: {metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let read = client.get(server.url("/v1/streams/kept/records?seq_num=0")).header("s2-basin", BASIN).send().await;
    let records = read.unwrap().json::<serde_json::Value>().await.unwrap();
    assert_eq!(records["records"].as_array().map(Vec::len), Some(20), "the other stream reads back whole");
    server.stop().await;
}

const COMPACTED_STREAMS: usize = 8;

fn small_records(stream: &str, append: u64) -> AppendInput {
    AppendInput {
        basin: BASIN.into(),
        stream: stream.into(),
        records: (0..4)
            .map(|i| {
                let mut text = format!("{stream}/{append}/{i}/").into_bytes();
                text.resize(200, b'-');
                Record { body: Bytes::from(text), ..Default::default() }
            })
            .collect(),
        ..Default::default()
    }
}

/// One round: an append of four records to every stream at once (one mixed segment).
async fn append_round(node: &Node, round: u64) {
    let appends = (0..COMPACTED_STREAMS).map(|s| node.gateway.append(small_records(&format!("c{s}"), round)));
    for ack in futures::future::join_all(appends).await {
        ack.unwrap();
    }
}

/// Checks a stream from 0 to its tail: dense, in order, each body the one appended.
async fn check_stream(reader: &shale_reader::Reader, stream: &str) -> u64 {
    let mut next = 0u64;
    loop {
        let request = shale_tests::read_request(BASIN, stream, ReadStart::SeqNum(next));
        let output = reader.read(&request).await.unwrap();
        if output.records.is_empty() {
            assert_eq!(output.tail.seq_num, next, "{stream}: a read stopped before the tail");
            return next;
        }
        for record in output.records {
            assert_eq!(record.seq_num, next, "{stream}: a gap or a duplicate");
            let expected = format!("{stream}/{}/{}/", next / 4, next % 4);
            assert!(record.body.starts_with(expected.as_bytes()), "{stream} at {next}");
            next += 1;
        }
    }
}

/// GET requests a cold reader makes to read `stream` from 0 up to `end`.
async fn cold_read_gets(node: &Node, store: &shale_tests::TestStore, stream: &str) -> u64 {
    let instrumented = shale_storage::InstrumentedStore::new(store.raw.clone());
    let counters = instrumented.counters();
    let reader = shale_reader::Reader::new(&Default::default(), Arc::new(instrumented), node.metadata.clone());
    check_stream(&reader, stream).await;
    counters.gets()
}

/// Compaction while appends and reads go on: every record read back exactly once in
/// order before, during and after; a cold read of compacted history costs a few GETs
/// where it cost one per append; the old mixed segments are deleted once released.
async fn suite_compaction_keeps_every_record_once_under_appends_and_reads(backend: Backend) {
    let store = backend.store().await;
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let config = MetadataConfig { delete_grace: Duration::from_secs(30), ..MetadataConfig::default() };
    let node = Arc::new(Node::start_with(&store, GatewayConfig::default(), clock.clone(), &config).await);
    node.metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    for s in 0..COMPACTED_STREAMS {
        node.metadata.create_stream(BASIN, &format!("c{s}"), StreamConfig::default()).await.unwrap();
    }
    for round in 0..25 {
        append_round(&node, round).await;
    }
    let mixed_segments = store.segment_objects().await.len();
    let gets_before = cold_read_gets(&node, &store, "c0").await;
    assert!(gets_before >= 25, "one GET per append before compaction: {gets_before}");
    clock.advance(Duration::from_secs(61));

    let compactor_config = shale_compactor::CompactorConfig {
        object_bytes: 64 * 1024,
        min_object_bytes: 0,
        block_bytes: 16 * 1024,
        ..Default::default()
    };
    let composed: Arc<dyn shale_storage::object_store::ObjectStore> = node.faults.clone();
    let compactor = shale_compactor::Compactor::new(compactor_config, node.metadata.clone(), composed, clock.clone());
    // Appends and reads go on while it runs.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let appender = {
        let (node, stopped) = (node.clone(), stopped.clone());
        tokio::spawn(async move {
            let mut round = 25;
            while !*stopped.borrow() {
                append_round(&node, round).await;
                round += 1;
            }
        })
    };
    let reader = {
        let node = node.clone();
        tokio::spawn(async move {
            let mut checks = 0u64;
            while !*stopped.borrow() {
                for s in 0..COMPACTED_STREAMS {
                    check_stream(&node.reader, &format!("c{s}")).await;
                }
                checks += 1;
            }
            checks
        })
    };
    let mut objects = 0;
    loop {
        let report = compactor.run_once().await.unwrap();
        if report.objects_written == 0 {
            break;
        }
        objects += report.objects_written;
        assert_eq!(report.entries_dropped, 0);
    }
    stop.send(true).unwrap();
    appender.await.unwrap();
    assert!(reader.await.unwrap() > 0, "reads ran during compaction");
    assert!(objects >= 2, "{objects} compacted objects");

    // Compaction released the mixed segments; they go once delete_grace has passed.
    let early = node.metadata.reclaim(store.raw.as_ref()).await.unwrap();
    assert_eq!(early.segments_deleted, 0);
    clock.advance(Duration::from_secs(31));
    let reclaimed = node.metadata.reclaim(store.raw.as_ref()).await.unwrap();
    assert!(reclaimed.segments_deleted as usize >= mixed_segments, "{reclaimed:?}, {mixed_segments} mixed segments");
    for s in 0..COMPACTED_STREAMS {
        check_stream(&node.reader, &format!("c{s}")).await;
    }
    let gets_after = cold_read_gets(&node, &store, "c0").await;
    let young = node.metadata.stream(BASIN, "c0").await.unwrap().record.next_seq / 4 - 25;
    // 25 appends of ~850 bytes in 16 KiB blocks: two blocks, plus one GET per young append.
    assert!(
        gets_after <= 2 + young,
        "{gets_after} GETs after compaction ({young} young appends), {gets_before} before"
    );
    let node = Arc::into_inner(node).expect("tasks ended");
    node.stop().await;
}

shale_tests::on_every_backend!(
    suite_gc_leaves_exactly_what_live_records_need,
    suite_compaction_keeps_every_record_once_under_appends_and_reads,
);

/// Forwards everything to metadata but refuses compaction commits, as if the compactor
/// died between its upload and its commit.
struct CommitsRefused(Arc<shale_metadata::Metadata>);

#[async_trait::async_trait]
impl MetadataApi for CommitsRefused {
    async fn sequence(
        &self,
        requests: Vec<shale_metadata::CommitRequest>,
        position: Option<shale_metadata::PipelinePosition>,
    ) -> shale_metadata::Result<shale_metadata::CommitTicket> {
        self.0.sequence(requests, position).await
    }

    async fn lookup(&self, query: shale_metadata::Lookup) -> shale_metadata::Result<Vec<shale_metadata::IndexEntry>> {
        self.0.lookup(query).await
    }

    fn subscribe_tail(
        &self,
        basin: &str,
        stream: &str,
    ) -> tokio::sync::watch::Receiver<Option<shale_metadata::Position>> {
        self.0.subscribe_tail(basin, stream)
    }

    async fn catalog(&self, call: shale_metadata::CatalogCall) -> shale_metadata::Result<shale_metadata::CatalogReply> {
        match call {
            shale_metadata::CatalogCall::CommitCompaction { .. } => Err(MetadataError::Unavailable("refused".into())),
            call => self.0.catalog(call).await,
        }
    }
}

/// A compacted object whose commit never happened is referenced by nothing: the index
/// still names the old segments, every record reads back, and orphan collection deletes
/// the object once it is past `orphan_grace`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_object_never_committed_is_collected_as_an_orphan() {
    let store = Backend::File.store().await;
    let clock = Arc::new(ManualClock::new(SystemClock.now_ms()));
    let node = Node::start_with(&store, GatewayConfig::default(), clock.clone(), &MetadataConfig::default()).await;
    node.metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    for s in 0..COMPACTED_STREAMS {
        node.metadata.create_stream(BASIN, &format!("c{s}"), StreamConfig::default()).await.unwrap();
    }
    for round in 0..5 {
        append_round(&node, round).await;
    }
    let committed: BTreeSet<String> = store.segment_objects().await.iter().map(|p| p.to_string()).collect();
    clock.advance(Duration::from_secs(61));
    let config = shale_compactor::CompactorConfig { min_object_bytes: 0, ..Default::default() };
    let refusing = Arc::new(CommitsRefused(node.metadata.clone()));
    let compactor = shale_compactor::Compactor::new(config, refusing, store.raw.clone(), clock.clone());
    assert!(compactor.run_once().await.is_err(), "the commit is refused");
    let now: BTreeSet<String> = store.segment_objects().await.iter().map(|p| p.to_string()).collect();
    let orphans: Vec<&String> = now.difference(&committed).collect();
    assert_eq!(orphans.len(), 1, "the compacted object was uploaded");
    for s in 0..COMPACTED_STREAMS {
        check_stream(&node.reader, &format!("c{s}")).await;
    }
    clock.advance(Duration::from_secs(601));
    let report = node.metadata.collect_orphans(store.raw.as_ref()).await.unwrap();
    assert_eq!(report.deleted, 1, "{report:?}");
    let after: BTreeSet<String> = store.segment_objects().await.iter().map(|p| p.to_string()).collect();
    assert_eq!(after, committed, "only the orphan went; every committed segment stays");
    for s in 0..COMPACTED_STREAMS {
        check_stream(&node.reader, &format!("c{s}")).await;
    }
    node.stop().await;
}
