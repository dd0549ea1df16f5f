//! The storage-facing core, run on every backend: memory://, file:// and a local S3
//! server (moto). Each `suite_*` function is one conformance test.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shale_gateway::{AppendInput, GatewayConfig, GatewayError};
use shale_metadata::{
    BasinConfig, CommitAppend, CommitRequest, CommitUnit, Metadata, MetadataApi, MetadataConfig, MetadataError,
    StreamConfig, DEFAULT_DB_PATH,
};
use shale_proto::segment::{encode_block, object_path};
use shale_proto::{Header, Record, SegmentBuilder, SequencedRecord};
use shale_reader::{ReadLimits, ReadRequest, ReadStart};
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStoreExt, PutPayload};
use shale_storage::{Clock, ManualClock, SystemClock};
use shale_tests::{Backend, Node};

const BASIN: &str = "test-basin";

fn record(body: impl Into<Bytes>) -> Record {
    Record { body: body.into(), ..Default::default() }
}

fn input(stream: &str, bodies: &[&str]) -> AppendInput {
    AppendInput {
        basin: BASIN.into(),
        stream: stream.into(),
        records: bodies.iter().map(|b| record(Bytes::copy_from_slice(b.as_bytes()))).collect(),
        ..Default::default()
    }
}

async fn setup(node: &Node, streams: &[&str]) {
    node.metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    for stream in streams {
        node.metadata.create_stream(BASIN, stream, StreamConfig::default()).await.unwrap();
    }
}

fn read_from(stream: &str, start: ReadStart) -> ReadRequest {
    shale_tests::read_request(BASIN, stream, start)
}

/// Every record of the stream, paging until the tail.
async fn read_all(node: &Node, stream: &str) -> Vec<SequencedRecord> {
    let mut records = Vec::new();
    loop {
        let output = node.reader.read(&read_from(stream, ReadStart::SeqNum(records.len() as u64))).await.unwrap();
        if output.records.is_empty() {
            assert_eq!(output.tail.seq_num, records.len() as u64, "read stopped before the tail");
            return records;
        }
        records.extend(output.records);
    }
}

fn bodies(records: &[SequencedRecord]) -> Vec<String> {
    records.iter().map(|r| String::from_utf8(r.body.to_vec()).unwrap()).collect()
}

async fn suite_concurrent_appends_share_segments(backend: Backend) {
    let store = backend.store().await;
    let node = Node::start(&store, GatewayConfig::default()).await;
    let streams: Vec<String> = (0..100).map(|i| format!("stream-{i}")).collect();
    let names: Vec<&str> = streams.iter().map(String::as_str).collect();
    setup(&node, &names).await;

    let node = Arc::new(node);
    let mut tasks = Vec::new();
    for n in 0..1000 {
        let node = node.clone();
        let stream = streams[n % 100].clone();
        tasks.push(tokio::spawn(async move {
            let body = format!("{stream}/{n}");
            let ack = node.gateway.append(input(&stream, &[&body])).await.unwrap();
            (stream, ack.start.seq_num, body)
        }));
    }
    let mut expected: HashMap<String, Vec<(u64, String)>> = HashMap::new();
    for task in tasks {
        let (stream, seq, body) = task.await.unwrap();
        expected.entry(stream).or_default().push((seq, body));
    }

    let segments = store.segment_objects().await;
    let sealed = node.gateway.metrics().segments_sealed.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(segments.len() as u64, sealed, "every sealed segment is one object");
    assert!(segments.len() <= 100, "1000 appends took {} segment objects", segments.len());

    for (stream, mut acked) in expected {
        acked.sort();
        let records = read_all(&node, &stream).await;
        let seqs: Vec<u64> = records.iter().map(|r| r.seq_num).collect();
        assert_eq!(seqs, (0..10).collect::<Vec<_>>(), "dense sequence numbers for {stream}");
        let acked_bodies: Vec<String> = acked.into_iter().map(|(_, body)| body).collect();
        assert_eq!(bodies(&records), acked_bodies, "records of {stream} in ack order");
        assert!(records.windows(2).all(|w| w[0].timestamp <= w[1].timestamp), "timestamps never decrease");
    }
    Arc::into_inner(node).unwrap().stop().await;
}

async fn suite_reopen_keeps_acked_and_hides_uncommitted(backend: Backend) {
    let store = backend.store().await;
    let node = Node::start(&store, GatewayConfig::default()).await;
    setup(&node, &["s"]).await;
    for i in 0..5 {
        node.gateway.append(input("s", &[&format!("r{i}a"), &format!("r{i}b")])).await.unwrap();
    }
    let before = read_all(&node, "s").await;
    assert_eq!(before.len(), 10);
    node.stop().await;

    // A segment uploaded by a gateway that died before committing it.
    let mut orphan = SegmentBuilder::new();
    let block = encode_block(1, &[record("orphan")]);
    orphan.push_block(Bytes::from_static(b"test-basin/s"), 1, block.clone());
    let orphan_path = object_path(shale_storage::ids::segment_id(&shale_storage::SystemClock));
    store.raw.put(&Path::from(orphan_path.as_str()), PutPayload::from(orphan.finish())).await.unwrap();

    let node = Node::start(&store, GatewayConfig::default()).await;
    let after = read_all(&node, "s").await;
    assert_eq!(after, before, "acked records survive close and reopen");
    assert_eq!(node.reader.check_tail(BASIN, "s").await.unwrap().seq_num, 10);
    assert!(!bodies(&after).contains(&"orphan".to_string()));
    let ack = node.gateway.append(input("s", &["next"])).await.unwrap();
    assert_eq!(ack.start.seq_num, 10, "the orphan took no sequence numbers");
    node.stop().await;
}

async fn suite_failed_segment_put_fails_exactly_its_appends(backend: Backend) {
    let store = backend.store().await;
    let node = Arc::new(Node::start(&store, GatewayConfig::default()).await);
    let streams: Vec<String> = (0..40).map(|i| format!("s{i}")).collect();
    setup(&node, &streams.iter().map(String::as_str).collect::<Vec<_>>()).await;

    // The next segment PUT fails: usually the first append seals alone and the rest
    // gather behind it; under load they may all gather into that one segment. Either way
    // the failed segment holds at least one append (failing the second PUT, as before,
    // hit nothing when all forty gathered into the first).
    node.faults.fail_nth_put("segments/", 1);
    let mut tasks = Vec::new();
    for stream in &streams {
        let node = node.clone();
        let stream = stream.clone();
        tasks.push(tokio::spawn(async move { (stream.clone(), node.gateway.append(input(&stream, &["x"])).await) }));
    }
    let mut failed_objects = Vec::new();
    let mut failed_streams = Vec::new();
    let mut ok_streams = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            (stream, Ok(ack)) => {
                assert_eq!(ack.start.seq_num, 0);
                ok_streams.push(stream);
            }
            (stream, Err(GatewayError::Upload { object, .. })) => {
                failed_objects.push(object);
                failed_streams.push(stream);
            }
            (stream, Err(other)) => panic!("unexpected error for {stream}: {other}"),
        }
    }
    assert!(!failed_streams.is_empty(), "the injected failure hit no append");
    failed_objects.dedup();
    assert_eq!(failed_objects.len(), 1, "all failed appends were in one segment: {failed_objects:?}");
    for stream in &failed_streams {
        assert!(read_all(&node, stream).await.is_empty(), "{stream}: nothing of a failed segment is visible");
        assert_eq!(node.reader.check_tail(BASIN, stream).await.unwrap().seq_num, 0);
    }
    for stream in &ok_streams {
        assert_eq!(bodies(&read_all(&node, stream).await), vec!["x"]);
    }
    // Later appends to the failed streams succeed.
    for stream in &failed_streams {
        let ack = node.gateway.append(input(stream, &["again"])).await.unwrap();
        assert_eq!(ack.start.seq_num, 0);
    }
    Arc::into_inner(node).unwrap().stop().await;
}

async fn suite_conditions_and_atomic_groups(backend: Backend) {
    let store = backend.store().await;
    let node = Node::start(&store, GatewayConfig::default()).await;
    setup(&node, &["a", "b"]).await;
    node.gateway.append(input("a", &["1", "2"])).await.unwrap();

    let mut wrong_seq = input("a", &["3"]);
    wrong_seq.match_seq_num = Some(5);
    match node.gateway.append(wrong_seq).await {
        Err(GatewayError::Metadata(MetadataError::SeqNumMismatch { expected: 5, actual: 2 })) => {}
        other => panic!("expected seq num mismatch with actual tail 2, got {other:?}"),
    }
    let mut right_seq = input("a", &["3"]);
    right_seq.match_seq_num = Some(2);
    assert_eq!(node.gateway.append(right_seq).await.unwrap().end.seq_num, 3);

    let fence = Record {
        headers: vec![Header { name: Bytes::new(), value: Bytes::from_static(b"fence") }].into(),
        body: Bytes::from_static(b"token-1"),
        timestamp: None,
    };
    node.gateway
        .append(AppendInput { basin: BASIN.into(), stream: "a".into(), records: vec![fence], ..Default::default() })
        .await
        .unwrap();
    let mut wrong_token = input("a", &["4"]);
    wrong_token.fencing_token = Some("other".into());
    match node.gateway.append(wrong_token).await {
        Err(GatewayError::Metadata(MetadataError::FencingTokenMismatch { actual })) => assert_eq!(actual, "token-1"),
        other => panic!("expected fencing token mismatch, got {other:?}"),
    }
    let mut right_token = input("a", &["4"]);
    right_token.fencing_token = Some("token-1".into());
    node.gateway.append(right_token).await.unwrap();

    // Atomic group: b's condition fails, so a must not change either.
    let tail_a = node.reader.check_tail(BASIN, "a").await.unwrap();
    let mut bad_b = input("b", &["b1"]);
    bad_b.match_seq_num = Some(9);
    let result = node.gateway.append_atomic(vec![input("a", &["group"]), bad_b]).await;
    // The refusal names the member that failed.
    match result {
        Err(GatewayError::Metadata(MetadataError::AtomicMember { stream, error })) => {
            assert_eq!(stream, "b");
            assert!(matches!(*error, MetadataError::SeqNumMismatch { actual: 0, .. }), "{error:?}");
        }
        other => panic!("expected b's sequence number mismatch, got {other:?}"),
    }
    assert_eq!(node.reader.check_tail(BASIN, "a").await.unwrap(), tail_a);
    assert_eq!(node.reader.check_tail(BASIN, "b").await.unwrap().seq_num, 0);
    // And a good group commits both.
    let acks = node.gateway.append_atomic(vec![input("a", &["g1"]), input("b", &["g2"])]).await.unwrap();
    assert_eq!(acks[0].start.seq_num, tail_a.seq_num);
    assert_eq!(acks[1].start.seq_num, 0);
    assert_eq!(bodies(&read_all(&node, "b").await), vec!["g2"]);
    node.stop().await;
}

async fn suite_second_metadata_fences_first(backend: Backend) {
    let store = backend.store().await;
    let clock = Arc::new(SystemClock);
    let first = Metadata::open(store.raw.clone(), DEFAULT_DB_PATH, clock.clone()).await.unwrap();
    first.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    let second = Metadata::open(store.raw.clone(), DEFAULT_DB_PATH, clock).await.unwrap();

    let result = first.create_stream(BASIN, "late", StreamConfig::default()).await;
    assert!(matches!(result, Err(MetadataError::Fenced)), "fenced writer must not write: {result:?}");
    assert!(first.is_fenced());
    assert!(matches!(first.basin(BASIN).await, Err(MetadataError::Fenced)), "fenced instance answers nothing");
    // The new writer sees the durable state and carries on; the fenced write never landed.
    assert!(second.basin(BASIN).await.is_ok());
    assert!(matches!(second.stream(BASIN, "late").await, Err(MetadataError::StreamNotFound { .. })));
    second.create_stream(BASIN, "late", StreamConfig::default()).await.unwrap();
    second.close().await.unwrap();
}

async fn suite_reads_by_time_tail_offset_and_limits(backend: Backend) {
    let store = backend.store().await;
    let node = Node::start(&store, GatewayConfig::default()).await;
    setup(&node, &["s"]).await;
    for chunk in 0..4u64 {
        let records = (0..5u64)
            .map(|i| Record { timestamp: Some(1_000 + chunk * 100 + i), ..record(format!("{}", chunk * 5 + i)) })
            .collect();
        node.gateway
            .append(AppendInput { basin: BASIN.into(), stream: "s".into(), records, ..Default::default() })
            .await
            .unwrap();
    }
    let all = read_all(&node, "s").await;
    assert_eq!(all.len(), 20);
    assert_eq!(all[7].timestamp, 1_102);

    let by_time = node.reader.read(&read_from("s", ReadStart::Timestamp(1_203))).await.unwrap();
    assert_eq!(by_time.records.first().map(|r| r.seq_num), Some(13));

    let from_tail = node.reader.read(&read_from("s", ReadStart::TailOffset(3))).await.unwrap();
    assert_eq!(from_tail.records.iter().map(|r| r.seq_num).collect::<Vec<_>>(), vec![17, 18, 19]);

    let mut limited = read_from("s", ReadStart::SeqNum(2));
    limited.limits = ReadLimits { count: Some(4), bytes: None, at_least_one: false };
    limited.until = Some(1_104);
    let out = node.reader.read(&limited).await.unwrap();
    assert_eq!(out.records.iter().map(|r| r.seq_num).collect::<Vec<_>>(), vec![2, 3, 4, 5]);
    limited.start = ReadStart::SeqNum(6);
    let out = node.reader.read(&limited).await.unwrap();
    assert_eq!(out.records.iter().map(|r| r.seq_num).collect::<Vec<_>>(), vec![6, 7, 8]);
    assert!(out.reached_until);

    let mut by_bytes = read_from("s", ReadStart::SeqNum(0));
    by_bytes.limits = ReadLimits { count: None, bytes: Some(9 * 3), at_least_one: false };
    assert_eq!(node.reader.read(&by_bytes).await.unwrap().records.len(), 3);
    // A bound below the first record: S2's read stops before it; a read that asks for
    // at least one (Kafka's fetches) gets that record alone, and no more.
    by_bytes.limits = ReadLimits { count: None, bytes: Some(5), at_least_one: false };
    assert!(node.reader.read(&by_bytes).await.unwrap().records.is_empty());
    by_bytes.limits.at_least_one = true;
    let first = node.reader.read(&by_bytes).await.unwrap().records;
    assert_eq!(first.iter().map(|r| r.seq_num).collect::<Vec<_>>(), vec![0]);

    let past = node.reader.read(&read_from("s", ReadStart::SeqNum(21))).await;
    assert!(matches!(past, Err(shale_reader::ReaderError::PastTail { tail }) if tail.seq_num == 20));
    let mut clamped = read_from("s", ReadStart::SeqNum(21));
    clamped.clamp = true;
    assert!(node.reader.read(&clamped).await.unwrap().records.is_empty());

    // Trim moves reads forward.
    let trim = Record {
        headers: vec![Header { name: Bytes::new(), value: Bytes::from_static(b"trim") }].into(),
        body: Bytes::copy_from_slice(&10u64.to_be_bytes()),
        timestamp: None,
    };
    node.gateway
        .append(AppendInput { basin: BASIN.into(), stream: "s".into(), records: vec![trim], ..Default::default() })
        .await
        .unwrap();
    let trimmed = node.reader.read(&read_from("s", ReadStart::SeqNum(0))).await.unwrap();
    assert_eq!(trimmed.records.first().map(|r| r.seq_num), Some(10));
    node.stop().await;
}

async fn suite_catalog_lists_and_deletes(backend: Backend) {
    let store = backend.store().await;
    let node = Node::start(&store, GatewayConfig::default()).await;
    setup(&node, &["apple", "apricot", "banana", "avocado"]).await;
    let page = node.metadata.list_streams(BASIN, "a", "", 2).await.unwrap();
    assert_eq!(page.items.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), vec!["apple", "apricot"]);
    assert!(page.has_more);
    let page = node.metadata.list_streams(BASIN, "a", "apricot", 2).await.unwrap();
    assert_eq!(page.items.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), vec!["avocado"]);
    assert!(!page.has_more);
    assert!(matches!(
        node.metadata.create_stream(BASIN, "apple", StreamConfig::default()).await,
        Err(MetadataError::StreamExists { .. })
    ));

    node.gateway.append(input("apple", &["old"])).await.unwrap();
    node.metadata.delete_stream(BASIN, "apple").await.unwrap();
    assert!(matches!(
        node.gateway.append(input("apple", &["x"])).await,
        Err(GatewayError::Metadata(MetadataError::StreamNotFound { .. }))
    ));
    node.metadata.create_stream(BASIN, "apple", StreamConfig::default()).await.unwrap();
    assert!(read_all(&node, "apple").await.is_empty(), "a re-created stream starts empty");

    node.metadata.delete_basin(BASIN).await.unwrap();
    assert!(matches!(node.metadata.stream(BASIN, "banana").await, Err(MetadataError::StreamNotFound { .. })));
    assert!(node.metadata.list_basins("", "", 10).await.unwrap().items.is_empty());
    node.stop().await;
}

async fn suite_waiting_read_wakes_on_commit(backend: Backend) {
    let store = backend.store().await;
    let node = Arc::new(Node::start(&store, GatewayConfig::default()).await);
    setup(&node, &["s"]).await;
    let waiting_read = |request: ReadRequest| {
        let node = node.clone();
        tokio::spawn(async move { node.reader.read(&request).await.unwrap() })
    };
    let mut request = read_from("s", ReadStart::SeqNum(0));
    request.wait = Duration::from_secs(30);
    let waiting = waiting_read(request.clone());
    node.gateway.append(input("s", &["hello"])).await.unwrap();
    assert_eq!(bodies(&waiting.await.unwrap().records), vec!["hello"]);
    // A wait for one record of any size (a byte bound below it, at least one: how a
    // Kafka share fetch waits for records) wakes with it too.
    request.start = ReadStart::SeqNum(1);
    request.limits = ReadLimits { count: Some(1), bytes: Some(1), at_least_one: true };
    let waiting = waiting_read(request);
    node.gateway.append(input("s", &["again"])).await.unwrap();
    assert_eq!(bodies(&waiting.await.unwrap().records), vec!["again"]);
    Arc::into_inner(node).unwrap().stop().await;
}

/// A segment uploaded with a commit, one without, one too young to judge, and a late
/// commit: retried commits return the first outcome and apply nothing twice; segments
/// too old are refused; orphan collection deletes exactly the old uncommitted segment.
async fn suite_retried_commits_and_orphan_collection(backend: Backend) {
    let store = backend.store().await;
    let t0 = SystemClock.now_ms();
    let clock = Arc::new(ManualClock::new(t0));
    let config = MetadataConfig {
        max_commit_age: Duration::from_secs(5),
        orphan_grace: Duration::from_secs(10),
        ..MetadataConfig::default()
    };
    let metadata = Metadata::open_with(store.raw.clone(), DEFAULT_DB_PATH, clock.clone(), &config).await.unwrap();
    metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    metadata.create_stream(BASIN, "s", StreamConfig::default()).await.unwrap();

    let upload = |id: u128, body: &'static str| {
        let store = store.raw.clone();
        async move {
            let mut segment = SegmentBuilder::new();
            let block = encode_block(1, &[record(body)]);
            let info = segment.push_block(Bytes::from_static(b"test-basin/s"), 1, block.clone());
            store.put(&Path::from(object_path(id)), PutPayload::from(segment.finish())).await.unwrap();
            CommitRequest {
                segment_id: id,
                units: vec![CommitUnit {
                    appends: vec![CommitAppend {
                        basin: BASIN.into(),
                        stream: "s".into(),
                        offset: info.offset,
                        len: info.len,
                        arrival: t0,
                        client_timestamps: vec![None],
                        commands: vec![],
                        match_seq_num: None,
                        fencing_token: None,
                        metered_bytes: 8,
                        producer: None,
                        transaction: None,
                    }],
                }],
            }
        }
    };
    let ulid_at = |ms: u64| shale_storage::ids::segment_id(&shale_storage::ManualClock::new(ms));
    let committed = upload(ulid_at(t0 - 1_000), "committed").await;
    let orphan = upload(ulid_at(t0 - 1_000), "orphan").await;
    let young = upload(ulid_at(t0 + 15_000), "young").await;

    let first = metadata.commit(committed.clone()).await.unwrap();
    let retried = metadata.commit(committed.clone()).await.unwrap();
    let (first, retried) = (first[0].as_ref().unwrap(), retried[0].as_ref().unwrap());
    assert_eq!(first, retried, "a retried commit returns the original acks");
    assert_eq!(metadata.stream(BASIN, "s").await.unwrap().record.next_seq, 1, "and applies nothing twice");

    clock.advance(Duration::from_secs(20));
    let late = metadata.commit(orphan.clone()).await.unwrap();
    assert!(matches!(late[0], Err(MetadataError::Unavailable(_))), "too old to commit: {:?}", late[0]);
    assert_eq!(metadata.commit(committed.clone()).await.unwrap()[0].as_ref().unwrap(), first);

    let report = metadata.collect_orphans(store.raw.as_ref()).await.unwrap();
    assert_eq!(report.deleted, 1, "{report:?}");
    let left = store.segment_objects().await;
    assert!(left.contains(&Path::from(object_path(committed.segment_id))), "committed segment kept");
    assert!(left.contains(&Path::from(object_path(young.segment_id))), "young segment kept");
    assert!(!left.contains(&Path::from(object_path(orphan.segment_id))), "old orphan deleted");
    let again = metadata.collect_orphans(store.raw.as_ref()).await.unwrap();
    assert_eq!(again.deleted, 0, "{again:?}");
    metadata.close().await.unwrap();
}

/// A read fetches no block past its limit, and a block that cannot be read does not
/// take the readable records before it down with it: they are delivered, and the read
/// that starts at the bad block reports it.
async fn suite_reads_stop_at_their_limit_and_deliver_what_is_readable(backend: Backend) {
    let store = backend.store().await;
    let node = Node::start(&store, GatewayConfig::default()).await;
    setup(&node, &["s"]).await;
    for body in ["a", "b", "c"] {
        node.gateway.append(input("s", &[body])).await.unwrap();
    }
    let misses = || node.reader.cache_stats().block_misses.load(std::sync::atomic::Ordering::Relaxed);
    let mut one = read_from("s", ReadStart::SeqNum(0));
    one.limits.count = Some(1);
    assert_eq!(bodies(&node.reader.read(&one).await.unwrap().records), vec!["a"]);
    assert_eq!(misses(), 1, "count=1 fetched one block");

    let stream_id = node.metadata.stream(BASIN, "s").await.unwrap().record.id;
    let bad = node.metadata.entries_from(stream_id, 2, 1).await.unwrap()[0];
    store.raw.put(&Path::from(object_path(bad.segment_id)), PutPayload::from(vec![0u8; 64])).await.unwrap();
    let output = node.reader.read(&read_from("s", ReadStart::SeqNum(1))).await.unwrap();
    assert_eq!(bodies(&output.records), vec!["b"], "the readable record is delivered");
    let error = node.reader.read(&read_from("s", ReadStart::SeqNum(2))).await.unwrap_err();
    assert!(error.to_string().contains("segment") || error.to_string().contains("block"), "{error}");
    node.stop().await;
}

/// The blocks a read can use are fetched at once, not one store round trip after another:
/// with segment GETs held, all four of a four-block read are waiting together.
async fn suite_a_read_fetches_its_blocks_concurrently(backend: Backend) {
    let store = backend.store().await;
    let node = Node::start(&store, GatewayConfig::default()).await;
    setup(&node, &["s"]).await;
    for body in ["a", "b", "c", "d"] {
        node.gateway.append(input("s", &[body])).await.unwrap();
    }
    node.faults.hold_gets("segments/");
    let request = read_from("s", ReadStart::SeqNum(0));
    let watch = async {
        let all_waiting = tokio::time::timeout(Duration::from_secs(10), node.faults.held_gets_reach(4)).await;
        node.faults.release_gets();
        all_waiting.is_ok()
    };
    let (output, all_waiting) = tokio::join!(node.reader.read(&request), watch);
    assert!(all_waiting, "the four block GETs were not in flight together");
    assert_eq!(bodies(&output.unwrap().records), vec!["a", "b", "c", "d"]);
    node.stop().await;
}

shale_tests::on_every_backend!(
    suite_concurrent_appends_share_segments,
    suite_reopen_keeps_acked_and_hides_uncommitted,
    suite_failed_segment_put_fails_exactly_its_appends,
    suite_conditions_and_atomic_groups,
    suite_second_metadata_fences_first,
    suite_reads_by_time_tail_offset_and_limits,
    suite_catalog_lists_and_deletes,
    suite_waiting_read_wakes_on_commit,
    suite_retried_commits_and_orphan_collection,
    suite_reads_stop_at_their_limit_and_deliver_what_is_readable,
    suite_a_read_fetches_its_blocks_concurrently,
);

/// A lone append seals at once instead of waiting for `linger`; appends that arrive
/// while an upload is in flight share the next segment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batcher_is_adaptive() {
    let store = Backend::Memory.store().await;
    let config = GatewayConfig { linger: Duration::from_secs(600), ..GatewayConfig::default() };
    let node = Arc::new(Node::start(&store, config).await);
    setup(&node, &["lone", "busy"]).await;

    // With a ten-minute linger, only the adaptive path can answer within the timeout.
    let lone = tokio::time::timeout(Duration::from_secs(30), node.gateway.append(input("lone", &["x"]))).await;
    assert!(lone.expect("a lone append must not wait for linger").is_ok());
    assert_eq!(store.segment_objects().await.len(), 1);

    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let node = node.clone();
            tokio::spawn(async move { node.gateway.append(input("busy", &[&i.to_string()])).await.unwrap() })
        })
        .collect();
    let all = tokio::time::timeout(Duration::from_secs(30), futures::future::join_all(tasks)).await;
    assert!(all.expect("queued appends are sealed when a slot frees, not after linger").iter().all(Result::is_ok));
    let segments = store.segment_objects().await.len() - 1;
    assert!(segments < 200, "200 concurrent appends took {segments} segments: no sharing");
    Arc::into_inner(node).unwrap().stop().await;
}

/// `min_seal_interval` caps the seal rate whatever the load: serial appends share
/// segments instead of each sealing its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_seal_interval_caps_segments_per_second() {
    let store = Backend::Memory.store().await;
    let interval = Duration::from_millis(200);
    let config = GatewayConfig { min_seal_interval: interval, ..GatewayConfig::default() };
    let node = Arc::new(Node::start(&store, config).await);
    setup(&node, &["s"]).await;
    let started = tokio::time::Instant::now();
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let node = node.clone();
            tokio::spawn(async move {
                // Spread the appends over about a second.
                tokio::time::sleep(Duration::from_millis(25 * i)).await;
                node.gateway.append(input("s", &[&i.to_string()])).await.unwrap()
            })
        })
        .collect();
    futures::future::join_all(tasks).await;
    let elapsed = started.elapsed();
    let segments = store.segment_objects().await.len() as u128;
    assert!(
        segments <= elapsed.as_millis() / interval.as_millis() + 1,
        "{segments} segments in {elapsed:?} with a {interval:?} minimum interval"
    );
    assert_eq!(read_all(&node, "s").await.len(), 40);
    Arc::into_inner(node).unwrap().stop().await;
}

/// Accepted-but-unacknowledged bytes are bounded: past `max_inflight_bytes` an append is
/// refused with `Overloaded` at once, and nothing of it is written. A current-thread
/// runtime keeps the batcher from acknowledging anything between the three submits.
#[tokio::test(flavor = "current_thread")]
async fn inflight_bytes_are_bounded() {
    let store = Backend::Memory.store().await;
    let config = GatewayConfig { max_inflight_bytes: 2 * 1024 * 1024, ..GatewayConfig::default() };
    let node = Node::start(&store, config).await;
    setup(&node, &["s"]).await;
    let big = "x".repeat(900 * 1024);
    // No await between the submits: none can be acknowledged before the third is tried.
    let first = node.gateway.submit(vec![input("s", &[&big])]).unwrap();
    let second = node.gateway.submit(vec![input("s", &[&big])]).unwrap();
    let third = node.gateway.submit(vec![input("s", &[&big])]);
    assert!(
        matches!(third, Err(GatewayError::Overloaded { limit, .. }) if limit == 2 * 1024 * 1024),
        "{:?}",
        third.err()
    );
    first.await.unwrap();
    second.await.unwrap();
    assert_eq!(node.reader.check_tail(BASIN, "s").await.unwrap().seq_num, 2, "the refused append wrote nothing");
    // Once acknowledged, the bytes are free again.
    node.gateway.append(input("s", &[&big])).await.unwrap();
    node.stop().await;
}

/// A pipelining client never sees record N+1 acknowledged after record N failed: when a
/// segment fails, appends to the same stream that the gateway already holds fail too;
/// appends made after the failure is reported succeed.
#[tokio::test(flavor = "current_thread")]
async fn later_pending_appends_of_a_failed_stream_fail_too() {
    let store = Backend::Memory.store().await;
    let node = Node::start(&store, GatewayConfig::default()).await;
    setup(&node, &["s", "other"]).await;
    // The first segment's upload hangs, then fails; meanwhile the client pipelines N+1.
    node.faults.hold_puts("segments/");
    node.faults.fail_nth_put("segments/", 1);
    let first = node.gateway.submit(vec![input("s", &["n"])]).unwrap();
    tokio::task::yield_now().await;
    let second = node.gateway.submit(vec![input("s", &["n+1"])]).unwrap();
    let unrelated = node.gateway.submit(vec![input("other", &["x"])]).unwrap();
    node.faults.release_puts();
    assert!(matches!(first.await, Err(GatewayError::Upload { .. })));
    let second = second.await;
    assert!(
        matches!(second, Err(GatewayError::EarlierAppendFailed { .. })),
        "record N+1 must not be acknowledged after record N failed: {second:?}"
    );
    unrelated.await.unwrap();
    assert!(read_all(&node, "s").await.is_empty(), "nothing of the failed stream is visible");
    assert_eq!(bodies(&read_all(&node, "other").await), vec!["x"], "other streams are unaffected");
    let after = node.gateway.append(input("s", &["later"])).await.unwrap();
    assert_eq!(after.start.seq_num, 0);
    node.stop().await;
}
