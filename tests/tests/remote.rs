//! Gateways and readers on a remote metadata service (`shale.metadata.v1` over loopback
//! gRPC), on the local S3 server: the same behaviour as in process, failover between
//! addresses, and the leader lease moving calls to a new metadata instance.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use shale_gateway::{AppendInput, Gateway, GatewayConfig, GatewayError};
use shale_metadata::{
    hold_leadership, BasinConfig, ClusterTiming, Metadata, MetadataApi, MetadataConfig, MetadataError, MetadataService,
    RemoteConfig, RemoteMetadata, StreamConfig, DEFAULT_DB_PATH,
};
use shale_proto::Record;
use shale_reader::{ReadRequest, ReadStart, Reader, ReaderConfig, ReaderError};
use shale_storage::object_store::ObjectStore;
use shale_storage::SystemClock;
use shale_tests::Backend;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const BASIN: &str = "remote-basin";

/// A metadata instance serving `shale.metadata.v1` on a loopback port.
struct Served {
    metadata: Arc<Metadata>,
    server: JoinHandle<()>,
}

impl Served {
    async fn start(store: Arc<dyn ObjectStore>, listener: TcpListener, lease: Option<ClusterTiming>) -> Served {
        let metadata = Arc::new(
            Metadata::open_with(store.clone(), DEFAULT_DB_PATH, Arc::new(SystemClock), &MetadataConfig::default())
                .await
                .unwrap(),
        );
        let address = listener.local_addr().unwrap().to_string();
        let lease = lease.map(|config| hold_leadership(metadata.clone(), store, address, config));
        let service = MetadataService::new(metadata.clone(), lease).into_server(None);
        let server = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
                .unwrap();
        });
        Served { metadata, server }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn loopback() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

/// A loopback address nothing listens on (port 1 is privileged and unused, so no other
/// test can take it).
const DEAD_ADDRESS: &str = "127.0.0.1:1";

fn input(stream: &str, body: &str) -> AppendInput {
    AppendInput {
        basin: BASIN.into(),
        stream: stream.into(),
        records: vec![Record { body: Bytes::copy_from_slice(body.as_bytes()), ..Default::default() }],
        ..Default::default()
    }
}

fn read_from(stream: &str, seq: u64, wait: Duration) -> ReadRequest {
    ReadRequest { wait, ..shale_tests::read_request(BASIN, stream, ReadStart::SeqNum(seq)) }
}

async fn read_bodies(reader: &Reader, stream: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    loop {
        let output = reader.read(&read_from(stream, bodies.len() as u64, Duration::ZERO)).await.unwrap();
        if output.records.is_empty() {
            return bodies;
        }
        for (i, record) in output.records.iter().enumerate() {
            assert_eq!(record.seq_num, (bodies.len() + i) as u64, "dense sequence numbers");
        }
        bodies.extend(output.records.iter().map(|r| String::from_utf8(r.body.to_vec()).unwrap()));
    }
}

/// Waits for a synchronous condition (see [`shale_tests::wait_until`]).
async fn wait_until(what: &str, condition: impl Fn() -> bool) {
    shale_tests::wait_until(what, Duration::from_secs(20), || std::future::ready(condition())).await;
}

fn remote(addresses: &[String], store: Option<Arc<dyn ObjectStore>>, config: RemoteConfig) -> Arc<dyn MetadataApi> {
    Arc::new(RemoteMetadata::new(addresses.to_vec(), store, config).unwrap())
}

/// A read open costs one metadata call; a live read then follows commits with the tails
/// and index entries the watch stream pushes, not a call per commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_open_with_one_metadata_call_and_follow_commits_without_calls() {
    let store = Backend::S3.store().await;
    let listener = loopback().await;
    let address = listener.local_addr().unwrap().to_string();
    let served = Served::start(store.raw.clone(), listener, None).await;
    let remote = Arc::new(RemoteMetadata::new(vec![address], None, RemoteConfig::default()).unwrap());
    let gateway =
        Gateway::start(GatewayConfig::default(), store.raw.clone(), served.metadata.clone(), Arc::new(SystemClock))
            .unwrap();
    let reader = Reader::new(&ReaderConfig::default(), store.raw.clone(), remote.clone());
    served.metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    served.metadata.create_stream(BASIN, "s", StreamConfig::default()).await.unwrap();
    gateway.append(input("s", "0")).await.unwrap();

    let before = remote.calls_made();
    let mut cursor = reader.open(BASIN, "s").await.unwrap();
    assert_eq!(remote.calls_made() - before, 1, "a read open is one metadata call");
    let first = reader.read_with(&read_from("s", 0, Duration::ZERO), &mut cursor).await.unwrap();
    assert_eq!(first.records.len(), 1);
    // No second lookup; at most one index scan (none when the watch already pushed it).
    let calls = remote.calls_made() - before;
    assert!(calls <= 2, "a read open and its first read cost {calls} calls");

    let following = remote.calls_made();
    for n in 1..=10u64 {
        let request = read_from("s", n, Duration::from_secs(20));
        let waiting = reader.read_with(&request, &mut cursor);
        let (output, ack) = tokio::join!(waiting, gateway.append(input("s", &n.to_string())));
        assert_eq!(ack.unwrap().start.seq_num, n);
        let output = output.unwrap();
        assert_eq!(output.records.iter().map(|r| r.seq_num).collect::<Vec<_>>(), vec![n]);
    }
    // The watch may connect after the first commit; a missed notification costs one lookup.
    let calls = remote.calls_made() - following;
    assert!(calls <= 2, "10 live commits cost {calls} metadata calls");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_and_reader_work_through_remote_metadata() {
    let store = Backend::S3.store().await;
    let listener = loopback().await;
    let live = listener.local_addr().unwrap().to_string();
    let _served = Served::start(store.raw.clone(), listener, None).await;
    // The first address is dead: the client must move on to the live one.
    let metadata = remote(&[DEAD_ADDRESS.to_string(), live], None, RemoteConfig::default());
    let gateway =
        Gateway::start(GatewayConfig::default(), store.raw.clone(), metadata.clone(), Arc::new(SystemClock)).unwrap();
    let reader = Arc::new(Reader::new(&ReaderConfig::default(), store.raw.clone(), metadata.clone()));

    metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    metadata.create_stream(BASIN, "s", StreamConfig::default()).await.unwrap();
    assert!(matches!(
        metadata.create_stream(BASIN, "s", StreamConfig::default()).await,
        Err(MetadataError::StreamExists { .. })
    ));
    let listed = metadata.list_streams(BASIN, "", "", 10).await.unwrap();
    assert_eq!(listed.items.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), vec!["s"]);

    // A live read waiting on the remote commit watch.
    let waiting = tokio::spawn({
        let reader = reader.clone();
        async move { reader.read(&read_from("s", 0, Duration::from_secs(20))).await.unwrap() }
    });
    let ack = gateway.append(input("s", "first")).await.unwrap();
    assert_eq!((ack.start.seq_num, ack.end.seq_num), (0, 1));
    let woken = waiting.await.unwrap();
    assert_eq!(woken.records.len(), 1);
    assert_eq!(woken.records[0].body, Bytes::from_static(b"first"));

    gateway.append(input("s", "second")).await.unwrap();
    let mut conditional = input("s", "third");
    conditional.match_seq_num = Some(7);
    match gateway.append(conditional).await {
        Err(GatewayError::Metadata(MetadataError::SeqNumMismatch { expected: 7, actual: 2 })) => {}
        other => panic!("condition failures keep their shape over the wire: {other:?}"),
    }
    match reader.read(&read_from("missing", 0, Duration::ZERO)).await {
        Err(ReaderError::Metadata(MetadataError::StreamNotFound { stream, .. })) => assert_eq!(stream, "missing"),
        other => panic!("expected stream not found, got {other:?}"),
    }
    assert_eq!(read_bodies(&reader, "s").await, vec!["first", "second"]);
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_takes_over_and_acked_appends_stay_exactly_once() {
    let store = Backend::S3.store().await;
    let lease = ClusterTiming {
        lease: Duration::from_millis(600),
        renew_interval: Duration::from_millis(100),
        ..Default::default()
    };
    let first_listener = loopback().await;
    // Only the first instance is configured: the client finds the second through the
    // leader record.
    let addresses = vec![first_listener.local_addr().unwrap().to_string()];
    let first = Served::start(store.raw.clone(), first_listener, Some(lease)).await;
    let timing = ClusterTiming { failover_timeout: Duration::from_secs(20), ..Default::default() };
    let config = RemoteConfig { timing, ..RemoteConfig::default() };
    let metadata = remote(&addresses, Some(store.raw.clone()), config);
    let gateway = Arc::new(
        Gateway::start(GatewayConfig::default(), store.raw.clone(), metadata.clone(), Arc::new(SystemClock)).unwrap(),
    );
    metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    metadata.create_stream(BASIN, "s", StreamConfig::default()).await.unwrap();

    // A producer appends without pause across the takeover.
    let (stop_tx, mut stop) = tokio::sync::watch::channel(false);
    let producer = tokio::spawn({
        let gateway = gateway.clone();
        async move {
            let (mut acked, mut failed) = (Vec::new(), 0);
            for i in 0.. {
                if *stop.borrow_and_update() {
                    break;
                }
                match gateway.append(input("s", &format!("r{i}"))).await {
                    Ok(ack) => acked.push((format!("r{i}"), ack.start.seq_num)),
                    Err(_) => failed += 1,
                }
            }
            (acked, failed)
        }
    });
    let acked_count = || gateway.metrics().appends_acked.load(Ordering::Relaxed);
    wait_until("appends before the takeover", || acked_count() >= 5).await;
    // A live read that starts waiting on the first leader...
    metadata.create_stream(BASIN, "live", StreamConfig::default()).await.unwrap();
    let reader = Arc::new(Reader::new(&ReaderConfig::default(), store.raw.clone(), metadata.clone()));
    // Its wait outlasts every bound below (a loaded machine has taken over a minute to
    // get through them), so an expired wait is not mistaken for a missed wake-up.
    let started = tokio::time::Instant::now();
    let live = tokio::spawn({
        let reader = reader.clone();
        async move { reader.read(&read_from("live", 0, Duration::from_secs(120))).await }
    });
    let mut fenced = first.metadata.watch_halted();
    // The first keeps committing: it must learn of the second's epoch by itself (its
    // manifest reads while it commits), not at SlateDB's manifest poll two minutes on.
    let second =
        tokio::time::timeout(Duration::from_secs(60), Served::start(store.raw.clone(), loopback().await, Some(lease)))
            .await
            .expect("the second instance opens while the first keeps committing");
    println!("second instance open after {:?}", started.elapsed());
    tokio::time::timeout(Duration::from_secs(20), fenced.wait_for(|r| *r == Some(shale_metadata::HaltReason::Fenced)))
        .await
        .unwrap()
        .unwrap();
    println!("first instance fenced after {:?}", started.elapsed());
    // Appends keep succeeding after the switch.
    let acked_at_switch = acked_count();
    wait_until("appends after the takeover", || acked_count() >= acked_at_switch + 5).await;
    println!("appends going on after {:?}", started.elapsed());
    // ...is woken by an append committed by the second.
    gateway.append(input("live", "after the switch")).await.unwrap();
    let woken = live.await.unwrap().unwrap();
    let waited = started.elapsed();
    assert_eq!(woken.records.len(), 1, "the live read returned after {waited:?} without the record");
    assert_eq!(woken.records[0].body, Bytes::from_static(b"after the switch"));
    stop_tx.send(true).unwrap();
    let (acked, failed) = producer.await.unwrap();
    assert!(first.metadata.is_fenced());

    let bodies = read_bodies(&reader, "s").await;
    for (body, seq) in &acked {
        assert_eq!(bodies.get(*seq as usize), Some(body), "acked {body} at {seq}");
        assert_eq!(bodies.iter().filter(|b| *b == body).count(), 1, "{body} appears once");
    }
    let distinct: std::collections::HashSet<_> = bodies.iter().collect();
    assert_eq!(distinct.len(), bodies.len(), "no record appears twice");
    println!("acked {} failed {failed} stored {}", acked.len(), bodies.len());
    gateway.shutdown().await;
    drop(second);
}

/// Serves `shale.v1` for one role on a loopback port; returns its URL.
async fn serve_role(state: shale_api::AppState) -> String {
    let listener = loopback().await;
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let limits = shale_api::ConnectionLimits::default();
        shale_api::serve_grpc(listener, state, limits, None, std::future::pending()).await.unwrap();
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_refuses_the_other_roles_calls_before_looking_anything_up() {
    use shale_proto::grpc as pb;
    use shale_proto::grpc::basins_client::BasinsClient;
    use shale_proto::grpc::records_client::RecordsClient;

    let store = Backend::S3.store().await;
    let listener = loopback().await;
    let address = listener.local_addr().unwrap().to_string();
    let _served = Served::start(store.raw.clone(), listener, None).await;
    let metadata = remote(&[address], None, RemoteConfig::default());
    let counters = Arc::new(shale_storage::StoreCounters::default());
    let gateway =
        Gateway::start(GatewayConfig::default(), store.raw.clone(), metadata.clone(), Arc::new(SystemClock)).unwrap();
    let gateway_url = serve_role(shale_api::AppState::new(
        shale_api::Role::Gateway,
        metadata.clone(),
        Some(Arc::new(gateway)),
        None,
        counters.clone(),
        None,
        Arc::new(SystemClock),
    ))
    .await;
    let reader_url = serve_role(shale_api::AppState::new(
        shale_api::Role::Reader,
        metadata.clone(),
        None,
        Some(Arc::new(Reader::new(&ReaderConfig::default(), store.raw.clone(), metadata))),
        counters,
        None,
        Arc::new(SystemClock),
    ))
    .await;

    let read = pb::ReadRequest {
        basin: BASIN.into(),
        stream: "missing".into(),
        start: Some(pb::read_request::Start::SeqNum(0)),
        ..Default::default()
    };
    let mut on_gateway = RecordsClient::connect(gateway_url.clone()).await.unwrap();
    let status = on_gateway.read(read.clone()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented);
    assert!(status.message().contains("send it to a reader"), "{}", status.message());

    let mut on_reader = RecordsClient::connect(reader_url.clone()).await.unwrap();
    let append = pb::AppendRequest {
        basin: BASIN.into(),
        stream: "s".into(),
        records: vec![pb::AppendRecord { body: b"x".to_vec().into(), ..Default::default() }],
        ..Default::default()
    };
    let status = on_reader.append(append).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented);
    assert!(status.message().contains("send it to a gateway"), "{}", status.message());
    let mut basins_on_reader = BasinsClient::connect(reader_url).await.unwrap();
    let status =
        basins_on_reader.create_basin(pb::CreateBasinRequest { basin: BASIN.into(), config: None }).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented);

    // The right role answers normally: the basin does not exist yet.
    assert_eq!(on_reader.read(read).await.unwrap_err().code(), tonic::Code::NotFound);
}
