//! The `shale.v1` gRPC API against `shale serve` on loopback, with tonic clients.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use shale_proto::grpc as pb;
use shale_proto::grpc::basins_client::BasinsClient;
use shale_proto::grpc::records_client::RecordsClient;
use shale_proto::grpc::streams_client::StreamsClient;
use shale_tests::{series, TestServer};
use tokio_stream::StreamExt;
use tonic::Code;

const BASIN: &str = "grpc-basin";

async fn setup(server: &TestServer, streams: &[&str]) -> RecordsClient<tonic::transport::Channel> {
    let mut basins = BasinsClient::connect(server.grpc.clone()).await.unwrap();
    basins.create_basin(pb::CreateBasinRequest { basin: BASIN.into(), config: None }).await.unwrap();
    let mut client = StreamsClient::connect(server.grpc.clone()).await.unwrap();
    for stream in streams {
        client
            .create_stream(pb::CreateStreamRequest { basin: BASIN.into(), stream: stream.to_string(), config: None })
            .await
            .unwrap();
    }
    RecordsClient::connect(server.grpc.clone()).await.unwrap()
}

fn request(stream: &str, bodies: &[&str]) -> pb::AppendRequest {
    pb::AppendRequest {
        basin: BASIN.into(),
        stream: stream.into(),
        records: bodies
            .iter()
            .map(|b| pb::AppendRecord { body: b.as_bytes().to_vec().into(), ..Default::default() })
            .collect(),
        ..Default::default()
    }
}

fn read_from(stream: &str, seq: u64) -> pb::ReadRequest {
    pb::ReadRequest {
        basin: BASIN.into(),
        stream: stream.into(),
        start: Some(pb::read_request::Start::SeqNum(seq)),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_append_session_keeps_order_and_acks_each_batch_once() {
    let server = TestServer::start().await;
    let mut client = setup(&server, &["s"]).await;
    const BATCHES: u64 = 10_000;
    let outbound = tokio_stream::iter((0..BATCHES).map(|i| request("s", &[&i.to_string()])));
    let mut acks = client.append_session(outbound).await.unwrap().into_inner();
    let mut expected = 0;
    while let Some(ack) = acks.next().await {
        let ack = ack.unwrap();
        assert_eq!(ack.start.unwrap().seq_num, expected, "acks arrive in order, each once");
        assert_eq!(ack.end.unwrap().seq_num, expected + 1);
        expected += 1;
    }
    assert_eq!(expected, BATCHES);

    let mut seq = 0;
    while seq < BATCHES {
        let batch = client.read(read_from("s", seq)).await.unwrap().into_inner();
        assert!(!batch.records.is_empty());
        for record in batch.records {
            assert_eq!(record.seq_num, seq);
            assert_eq!(record.body, seq.to_string().into_bytes(), "batch {seq} holds its own record");
            seq += 1;
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_session_follows_live_and_resumes_without_gaps() {
    let server = TestServer::start().await;
    let mut client = setup(&server, &["live"]).await;
    client.append(request("live", &["a", "b"])).await.unwrap();

    let mut session = client.read_session(read_from("live", 0)).await.unwrap().into_inner();
    let mut writer = RecordsClient::connect(server.grpc.clone()).await.unwrap();
    let mut seen = Vec::new();
    let mut appended_live = false;
    while seen.len() < 4 {
        let event = tokio::time::timeout(Duration::from_secs(30), session.next()).await.unwrap().unwrap().unwrap();
        if let Some(pb::read_session_response::Event::Batch(batch)) = event.event {
            seen.extend(batch.records.into_iter().map(|r| (r.seq_num, String::from_utf8(r.body.to_vec()).unwrap())));
            if !appended_live {
                // Another client appends while this session is open.
                writer.append(request("live", &["c", "d"])).await.unwrap();
                appended_live = true;
            }
        }
    }
    assert_eq!(seen, vec![(0, "a".into()), (1, "b".into()), (2, "c".into()), (3, "d".into())]);
    drop(session);

    writer.append(request("live", &["e"])).await.unwrap();
    let next = seen.last().unwrap().0 + 1;
    let mut resumed = client.read_session(read_from("live", next)).await.unwrap().into_inner();
    let first = loop {
        let event = tokio::time::timeout(Duration::from_secs(30), resumed.next()).await.unwrap().unwrap().unwrap();
        if let Some(pb::read_session_response::Event::Batch(batch)) = event.event {
            break batch;
        }
    };
    let records: Vec<(u64, Vec<u8>)> = first.records.into_iter().map(|r| (r.seq_num, r.body.to_vec())).collect();
    assert_eq!(records, vec![(4, b"e".to_vec())], "resume gives the next record: no gap, no repeat");

    // A bounded session ends by itself.
    let mut bounded = read_from("live", 0);
    bounded.count = Some(2);
    let mut session = client.read_session(bounded).await.unwrap().into_inner();
    let mut total = 0;
    while let Some(event) = tokio::time::timeout(Duration::from_secs(30), session.next()).await.unwrap() {
        if let Some(pb::read_session_response::Event::Batch(batch)) = event.unwrap().event {
            total += batch.records.len();
        }
    }
    assert_eq!(total, 2);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_matching_code_never_internal() {
    let server = TestServer::start().await;
    let mut client = setup(&server, &["s"]).await;
    client.append(request("s", &["x"])).await.unwrap();

    let big = "x".repeat(1024 * 1024);
    let mut wrong_seq = request("s", &["y"]);
    wrong_seq.match_seq_num = Some(7);
    let mut long_token = request("s", &["y"]);
    long_token.fencing_token = Some("t".repeat(37));
    let appends = vec![
        ("empty batch", request("s", &[]), Code::InvalidArgument),
        ("oversize batch", request("s", &[&big]), Code::InvalidArgument),
        ("1001 records", request("s", &vec!["r"; 1001]), Code::InvalidArgument),
        ("bad basin name", pb::AppendRequest { basin: "Bad".into(), ..request("s", &["y"]) }, Code::InvalidArgument),
        ("empty stream name", request("", &["y"]), Code::InvalidArgument),
        ("long fencing token", long_token, Code::InvalidArgument),
        ("unknown stream", request("missing", &["y"]), Code::NotFound),
        ("seq num mismatch", wrong_seq, Code::FailedPrecondition),
    ];
    for (name, req, code) in appends {
        let status = client.append(req).await.unwrap_err();
        assert_eq!(status.code(), code, "{name}: {status:?}");
        if code == Code::FailedPrecondition {
            // A real google.rpc.Status in the details, its ErrorInfo carrying S2's body.
            let details = tonic_types::StatusExt::get_error_details(&status);
            let info = details.error_info().expect("an ErrorInfo detail");
            assert_eq!((info.reason.as_str(), info.domain.as_str()), ("SEQ_NUM_MISMATCH", "shale"));
            let body: serde_json::Value = serde_json::from_str(&info.metadata["json"]).unwrap();
            assert_eq!(body, serde_json::json!({ "seq_num_mismatch": 1 }), "{name}: details carry the tail");
        }
    }

    // A count over S2's per-call maximum is clamped, not refused (as S2 does).
    let mut over_count = read_from("s", 0);
    over_count.count = Some(1001);
    assert_eq!(client.read(over_count).await.unwrap().into_inner().records.len(), 1);
    let mut over_wait = read_from("s", 0);
    over_wait.wait_secs = 61;
    let reads = vec![
        ("wait over 60", over_wait, Code::InvalidArgument),
        ("past the tail", read_from("s", 5), Code::OutOfRange),
        ("unknown stream", read_from("missing", 0), Code::NotFound),
        ("bad basin", pb::ReadRequest { basin: "x".into(), ..read_from("s", 0) }, Code::InvalidArgument),
    ];
    for (name, req, code) in reads {
        let status = client.read(req.clone()).await.unwrap_err();
        assert_eq!(status.code(), code, "read {name}: {status:?}");
        let status = client.read_session(req).await.unwrap_err();
        assert_eq!(status.code(), code, "read session {name}: {status:?}");
    }

    // A session that switches streams mid-way is refused.
    let outbound = tokio_stream::iter(vec![request("s", &["1"]), request("other", &["2"])]);
    let mut acks = client.append_session(outbound).await.unwrap().into_inner();
    let mut codes = Vec::new();
    while let Some(item) = acks.next().await {
        if let Err(status) = item {
            codes.push(status.code());
        }
    }
    assert_eq!(codes, vec![Code::InvalidArgument]);

    let mut streams = StreamsClient::connect(server.grpc.clone()).await.unwrap();
    let status = streams
        .create_stream(pb::CreateStreamRequest { basin: BASIN.into(), stream: "s".into(), config: None })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::AlreadyExists);
    // A limit over 1,000 is 1,000, as over HTTP (and in s2-lite), not an error.
    let page = streams
        .list_streams(pb::ListStreamsRequest { basin: BASIN.into(), limit: 5000, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((page.streams.len(), page.has_more), (1, false));
    let mut basins = BasinsClient::connect(server.grpc.clone()).await.unwrap();
    let status = basins.create_basin(pb::CreateBasinRequest { basin: "NO".into(), config: None }).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_lists_the_services() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;

    let server = TestServer::start().await;
    let channel = tonic::transport::Channel::from_shared(server.grpc.clone()).unwrap().connect().await.unwrap();
    let mut client = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = client.server_reflection_info(tokio_stream::iter(vec![request])).await.unwrap().into_inner();
    let response = responses.next().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else { panic!("{response:?}") };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for service in ["shale.v1.Basins", "shale.v1.Streams", "shale.v1.Records", "shale.v1.AccessTokens"] {
        assert!(names.contains(&service.to_string()), "{service} missing from {names:?}");
    }

    // The same through v1alpha, which older clients (grpcio's, older grpcurl) speak.
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient as AlphaClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest as AlphaRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse as AlphaResponse;
    let channel = tonic::transport::Channel::from_shared(server.grpc.clone()).unwrap().connect().await.unwrap();
    let request = tonic_reflection::pb::v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(AlphaRequest::ListServices(String::new())),
    };
    let mut responses =
        AlphaClient::new(channel).server_reflection_info(tokio_stream::iter(vec![request])).await.unwrap().into_inner();
    let response = responses.next().await.unwrap().unwrap();
    let Some(AlphaResponse::ListServicesResponse(list)) = response.message_response else { panic!("{response:?}") };
    assert!(list.service.iter().any(|s| s.name == "shale.v1.Records"), "{list:?}");
    server.stop().await;
}

/// Both transports pass the same layers: every answer carries a request id (the
/// client's when it sent one), and `/metrics` counts requests by outcome, gRPC
/// refusals included.
#[tokio::test]
async fn requests_over_both_transports_get_ids_and_are_counted() {
    let server = TestServer::start().await;
    let mut records = setup(&server, &["s"]).await;

    let http = server.client.get(server.url("/v1/basins")).header("x-request-id", "mine-1").send().await.unwrap();
    assert_eq!(http.headers()["x-request-id"], "mine-1");
    let made = server.client.get(server.url("/v1/basins")).send().await.unwrap();
    let made_id = made.headers()["x-request-id"].to_str().unwrap().to_string();
    assert!(made_id.starts_with("all-in-one-"), "{made_id}");
    let bad = server.client.get(server.url("/v1/streams/s/records?count=x")).header("s2-basin", BASIN).send().await;
    assert_eq!(bad.unwrap().status(), 400);

    let response = records.check_tail(pb::CheckTailRequest { basin: BASIN.into(), stream: "s".into() }).await.unwrap();
    assert!(response.metadata().get("x-request-id").is_some(), "gRPC answers carry an id too");
    let refused = records.check_tail(pb::CheckTailRequest { basin: BASIN.into(), stream: "nope".into() }).await;
    assert_eq!(refused.unwrap_err().code(), Code::NotFound);

    let metrics = server.client.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
    let value = |name: &str| -> u64 { series(&metrics, name).unwrap_or_else(|| panic!("{name} missing")) };
    // setup's two gRPC creates, two listings and a check-tail succeeded (this scrape
    // is counted once answered).
    assert_eq!(value("shale_api_requests_ok_total"), 5, "{metrics}");
    assert_eq!(value("shale_api_requests_client_error_total"), 2, "{metrics}");
    assert_eq!(value("shale_api_requests_server_error_total"), 0);
    server.stop().await;
}

/// An invalid input behind valid ones ends the session, but only after every earlier
/// input is acknowledged: they were submitted and may be committed, and a client that
/// saw only the error would send them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_input_ends_a_session_after_the_earlier_inputs_are_acked() {
    let server = TestServer::start().await;
    let mut client = setup(&server, &["s"]).await;
    let inputs = vec![request("s", &["1"]), request("s", &["2"]), request("s", &["3"]), request("s", &[])];
    let mut acks = client.append_session(tokio_stream::iter(inputs)).await.unwrap().into_inner();
    let mut acked = Vec::new();
    let mut error = None;
    while let Some(item) = acks.next().await {
        match item {
            Ok(ack) => acked.push(ack.start.unwrap().seq_num),
            Err(status) => error = Some(status.code()),
        }
    }
    assert_eq!(acked, vec![0, 1, 2], "every applied input acked, in order");
    assert_eq!(error, Some(Code::InvalidArgument));
    let tail = client.check_tail(pb::CheckTailRequest { basin: BASIN.into(), stream: "s".into() }).await.unwrap();
    assert_eq!(tail.into_inner().tail.unwrap().seq_num, 3, "nothing applied without its ack");
    server.stop().await;
}

/// What tonic answers before a handler runs gets the code the call deserves: bytes that
/// are not the request message are `INVALID_ARGUMENT`, a message over the size limit is
/// `RESOURCE_EXHAUSTED`.
#[tokio::test]
async fn undecodable_and_oversized_requests_get_client_error_codes() {
    let server = TestServer::start().await;
    let client = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    // The bytes of a request body, as sent: one frame, several, or none.
    let raw = |body: Vec<u8>| {
        client
            .post(format!("{}/shale.v1.Records/CheckTail", server.grpc))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(body)
            .send()
    };
    let call = |payload: Vec<u8>| {
        let mut frame = vec![0u8];
        frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frame.extend_from_slice(&payload);
        raw(frame)
    };
    let garbage = call(vec![0xff; 16]).await.unwrap();
    assert_eq!(garbage.headers()["grpc-status"], "3", "{:?}", garbage.headers());
    let oversized = call(vec![0; 8 * 1024 * 1024]).await.unwrap();
    assert_eq!(oversized.headers()["grpc-status"], "8", "{:?}", oversized.headers());
    let empty = raw(Vec::new()).await.unwrap();
    assert_eq!(empty.headers()["grpc-status"], "3", "no message at all: {:?}", empty.headers());
    let compressed = raw(vec![1, 0, 0, 0, 0]).await.unwrap();
    assert_eq!(compressed.headers()["grpc-status"], "3", "compressed, no encoding: {:?}", compressed.headers());
    server.stop().await;
}

/// The gRPC listener has the same connection cap: past it a connection is closed at
/// once, and a slot freed is usable again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_connections_are_capped() {
    use tokio::io::AsyncReadExt;
    let server = TestServer::start_with(|config| config.connections.max_connections = 2).await;
    let address = server.grpc.strip_prefix("http://").unwrap().to_string();
    let held = [
        tokio::net::TcpStream::connect(&address).await.unwrap(),
        tokio::net::TcpStream::connect(&address).await.unwrap(),
    ];
    let mut third = tokio::net::TcpStream::connect(&address).await.unwrap();
    let mut buffer = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(10), third.read(&mut buffer)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "a third connection is closed at once: {read:?}");
    drop(held);
    // Freed slots serve again (the server notices the closed connections).
    let mut served = false;
    for _ in 0..50 {
        if let Ok(mut client) = BasinsClient::connect(server.grpc.clone()).await {
            let listed = client.list_basins(pb::ListBasinsRequest::default()).await;
            if listed.is_ok() {
                served = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "no gRPC call was served after the held connections closed");
    server.stop().await;
}

/// A session sending faster than the gateway's in-flight bytes allow waits for its oldest
/// batch and submits the same batch again: every batch is acked once, in order, with its
/// own records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_past_the_in_flight_bytes_waits_and_loses_nothing() {
    let server = TestServer::start_with(|config| {
        config.gateway.max_inflight_bytes = 2 << 20;
        config.store_delay = Duration::from_millis(30);
    })
    .await;
    let mut client = setup(&server, &["full"]).await;
    const BATCHES: u64 = 12;
    const RECORDS: u64 = 900;
    // About 0.9 MB a batch: two fit in flight, so the session meets the bound at once.
    let batch = |i: u64| pb::AppendRequest {
        basin: BASIN.into(),
        stream: "full".into(),
        records: (0..RECORDS)
            .map(|r| pb::AppendRecord {
                body: format!("{i}:{r}:{}", "x".repeat(990)).into_bytes().into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let mut acks = client.append_session(tokio_stream::iter((0..BATCHES).map(batch))).await.unwrap().into_inner();
    let mut expected = 0;
    while let Some(ack) = acks.next().await {
        let ack = ack.unwrap();
        assert_eq!(ack.start.unwrap().seq_num, expected * RECORDS, "acks in order, each once");
        expected += 1;
    }
    assert_eq!(expected, BATCHES);
    for i in 0..BATCHES {
        let read = client.read(read_from("full", i * RECORDS)).await.unwrap().into_inner();
        let first = String::from_utf8(read.records[0].body.to_vec()).unwrap();
        assert!(first.starts_with(&format!("{i}:0:")), "batch {i} holds its own records: {}", &first[..10]);
    }
    server.stop().await;
}
