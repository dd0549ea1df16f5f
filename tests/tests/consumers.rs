//! Tracked consumers: positions committed and read back with their lag in records,
//! metered bytes and seconds, under an injected clock, as appends and commits
//! interleave; and the HTTP and gRPC faces of the same calls.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use shale_api::{AppState, ConsumerView, ListQuery, Role, Service};
use shale_gateway::{AppendInput, Gateway, GatewayConfig};
use shale_metadata::{BasinConfig, Metadata, MetadataApi, MetadataConfig, StreamConfig, DEFAULT_DB_PATH};
use shale_proto::grpc as pb;
use shale_proto::Record;
use shale_reader::{Reader, ReaderConfig};
use shale_storage::{Clock, ManualClock, StoreCounters, SystemClock};
use shale_tests::{series, Backend, TestServer};

const BASIN: &str = "consumer-basin";

/// Every role in process on the local S3 server, all on `clock`.
async fn service(clock: Arc<ManualClock>) -> Service {
    let store = Backend::S3.store().await;
    let config = MetadataConfig::default();
    let metadata = Metadata::open_with(store.raw.clone(), DEFAULT_DB_PATH, clock.clone(), &config).await;
    let metadata: Arc<dyn MetadataApi> = Arc::new(metadata.unwrap());
    let gateway = Gateway::start(GatewayConfig::default(), store.raw.clone(), metadata.clone(), clock.clone());
    let reader = Reader::new(&ReaderConfig::default(), store.raw.clone(), metadata.clone());
    let counters = Arc::new(StoreCounters::default());
    let state = AppState::new(
        Role::AllInOne,
        metadata.clone(),
        Some(Arc::new(gateway.unwrap())),
        Some(Arc::new(reader)),
        counters,
        None,
        clock,
    );
    metadata.create_basin(BASIN, BasinConfig::default()).await.unwrap();
    metadata.create_stream(BASIN, "s", StreamConfig::default()).await.unwrap();
    state.service()
}

async fn append(service: &Service, bodies: &[&str]) {
    let records = bodies.iter().map(|b| Record { body: Bytes::from(b.to_string()), ..Default::default() }).collect();
    let input = AppendInput { basin: BASIN.into(), stream: "s".into(), records, ..Default::default() };
    service.append(input).await.unwrap();
}

fn lag(view: &ConsumerView) -> (u64, Option<u64>, f64) {
    (view.lag.records, view.lag.bytes, view.lag.seconds)
}

/// S2's metered size of a record with no headers: 8 bytes plus the body.
fn metered(body: &str) -> u64 {
    8 + body.len() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_in_records_bytes_and_seconds_follows_appends_and_commits() {
    let t0 = SystemClock.now_ms();
    let clock = Arc::new(ManualClock::new(t0));
    let service = service(clock.clone()).await;
    append(&service, &["aaaa", "bb", "c"]).await;

    let view = service.commit_consumer(BASIN, "s", "c1", 0, None, String::new()).await.unwrap();
    assert_eq!(view.position.seq_num, 0);
    assert_eq!(lag(&view), (3, Some(metered("aaaa") + metered("bb") + metered("c")), 0.0));

    clock.advance(Duration::from_secs(5));
    let view = service.consumer(BASIN, "s", "c1").await.unwrap();
    assert_eq!(view.lag.seconds, 5.0, "the first unread record is 5 s old");

    append(&service, &["dddddd", "e"]).await; // at t0 + 5 s
                                              // Inside the first append's entry: the rest of it plus the second append.
    let view = service.commit_consumer(BASIN, "s", "c1", 2, Some(0), String::new()).await.unwrap();
    assert_eq!(lag(&view), (3, Some(metered("c") + metered("dddddd") + metered("e")), 5.0));

    clock.advance(Duration::from_secs(1));
    let view = service.commit_consumer(BASIN, "s", "c1", 3, Some(2), String::new()).await.unwrap();
    assert_eq!(lag(&view), (2, Some(metered("dddddd") + metered("e")), 1.0));
    assert_eq!(view.position.updated_ms, t0 + 6_000);

    // Another consumer is independent; a caught-up one has no lag.
    let other = service.commit_consumer(BASIN, "s", "c2", 5, None, String::new()).await.unwrap();
    assert_eq!(lag(&other), (0, Some(0), 0.0));
    append(&service, &["ffff"]).await;
    assert_eq!(lag(&service.consumer(BASIN, "s", "c2").await.unwrap()), (1, Some(metered("ffff")), 0.0));

    // Conditions and bounds.
    let stale = service.commit_consumer(BASIN, "s", "c1", 4, Some(2), String::new()).await.unwrap_err();
    assert_eq!(stale.code().http_status(), 412, "{stale}");
    let past = service.commit_consumer(BASIN, "s", "c1", 7, None, String::new()).await.unwrap_err();
    assert_eq!(past.code().http_status(), 400, "{past}");
    // A commit's metadata is kept with the position, up to 4,096 bytes.
    let noted = service.commit_consumer(BASIN, "s", "c2", 5, None, "note".into()).await.unwrap();
    assert_eq!(noted.position.commit_metadata, "note");
    assert_eq!(service.consumer(BASIN, "s", "c2").await.unwrap().position.commit_metadata, "note");
    let long = service.commit_consumer(BASIN, "s", "c2", 6, None, "x".repeat(4097)).await.unwrap_err();
    assert_eq!(long.code().http_status(), 400, "{long}");
    let kept = service.consumer(BASIN, "s", "c2").await.unwrap().position;
    assert_eq!((kept.seq_num, kept.commit_metadata.as_str()), (5, "note"), "nothing of the refused commit");
    assert_eq!(service.consumer(BASIN, "s", "nobody").await.unwrap_err().code().http_status(), 404);

    let query = ListQuery::default();
    let listed = service.list_consumers(BASIN, "s", &query).await.unwrap();
    let names: Vec<(String, u64)> =
        listed.items.iter().map(|v| (v.position.name.clone(), v.position.seq_num)).collect();
    assert_eq!(names, vec![("c1".to_string(), 3), ("c2".to_string(), 5)]);
}

#[tokio::test]
async fn consumers_over_http_and_grpc() {
    let server = TestServer::start_with(|config| config.reader.consumer_lag_top = 1).await;
    let client = &server.client;
    let r = client.post(server.url("/v1/basins")).json(&json!({ "basin": BASIN })).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let records = json!({ "records": [{ "body": "x" }, { "body": "yy" }] });
    let url = server.url("/v1/streams/s/records");
    let r = client.post(&url).header("s2-basin", BASIN).json(&records).send().await;
    assert_eq!(r.unwrap().status(), 404, "the basin does not create streams on append");
    let r = client.post(server.url("/v1/streams")).header("s2-basin", BASIN).json(&json!({ "stream": "s" })).send();
    assert_eq!(r.await.unwrap().status(), 201);
    let r = client.post(&url).header("s2-basin", BASIN).json(&records).send().await.unwrap();
    assert_eq!(r.status(), 200);

    let consumer = server.url("/v1/streams/s/consumers/my%20app");
    let r = client.put(&consumer).header("s2-basin", BASIN).json(&json!({ "seq_num": 1 })).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["name"], "my app");
    assert_eq!(body["seq_num"], 1);
    assert_eq!(body["lag"]["records"], 1);
    assert_eq!(body["lag"]["bytes"], 10);
    let r = client.put(&consumer).header("s2-basin", BASIN).json(&json!({ "seq_num": 2, "match_seq_num": 0 }));
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), 412);
    assert_eq!(r.json::<Value>().await.unwrap(), json!({ "seq_num_mismatch": 1 }));
    let r = client.put(&consumer).header("s2-basin", BASIN).json(&json!({ "seq": 2 })).send().await.unwrap();
    assert_eq!(r.status(), 400, "unknown fields are refused");
    let r = client.get(server.url("/v1/streams/s/consumers/none")).header("s2-basin", BASIN).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "not_found");
    let r = client.get(server.url("/v1/streams/s/consumers")).header("s2-basin", BASIN).send().await.unwrap();
    let page: Value = r.json().await.unwrap();
    assert_eq!(page["consumers"].as_array().unwrap().len(), 1);
    assert_eq!(page["has_more"], false);

    let mut streams = pb::streams_client::StreamsClient::connect(server.grpc.clone()).await.unwrap();
    let commit = pb::CommitConsumerRequest {
        basin: BASIN.into(),
        stream: "s".into(),
        name: "grpc".into(),
        seq_num: 0,
        match_seq_num: None,
    };
    let consumer = streams.commit_consumer(commit).await.unwrap().into_inner();
    assert_eq!(consumer.lag.unwrap().records, 2);
    let get = pb::GetConsumerRequest { basin: BASIN.into(), stream: "s".into(), name: "grpc".into() };
    assert_eq!(streams.get_consumer(get).await.unwrap().into_inner().seq_num, 0);
    let missing = pb::GetConsumerRequest { basin: BASIN.into(), stream: "s".into(), name: "x".into() };
    assert_eq!(streams.get_consumer(missing).await.unwrap_err().code(), tonic::Code::NotFound);
    let list = pb::ListConsumersRequest { basin: BASIN.into(), stream: "s".into(), ..Default::default() };
    assert_eq!(streams.list_consumers(list).await.unwrap().into_inner().consumers.len(), 2);

    // A deleted stream's consumers leave the metrics at once (their keys go with the GC).
    let r = client.post(server.url("/v1/streams")).header("s2-basin", BASIN).json(&json!({ "stream": "gone" })).send();
    assert_eq!(r.await.unwrap().status(), 201);
    let gone = server.url("/v1/streams/gone/consumers/old");
    let r = client.put(&gone).header("s2-basin", BASIN).json(&json!({ "seq_num": 0 })).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = client.delete(server.url("/v1/streams/gone")).header("s2-basin", BASIN).send().await.unwrap();
    assert!(r.status().is_success());

    // /metrics: the count, the summed lag, and per-consumer series for the top one only.
    let metrics = client.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
    let value = |name: &str| -> u64 { series(&metrics, name).unwrap_or_else(|| panic!("{name} in {metrics}")) };
    assert_eq!(value("shale_consumers"), 2);
    assert_eq!(value("shale_consumer_lag_records_sum"), 3);
    assert_eq!(value(r#"shale_consumer_lag_records{basin="consumer-basin",stream="s",consumer="grpc"}"#), 2);
    assert_eq!(value(r#"shale_consumer_lag_bytes{basin="consumer-basin",stream="s",consumer="grpc"}"#), 19);
    assert!(!metrics.contains(r#"consumer="my app""#), "only the top consumer has its own series");
    server.stop().await;
}
