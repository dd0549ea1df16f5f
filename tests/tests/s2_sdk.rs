//! S2's official Rust SDK (`s2-sdk`, unmodified from crates.io) against `shale serve`:
//! management calls, unary protobuf append and read, an append session, a read session
//! following the tail, check tail, conditions, fencing and trim; a stream's storage
//! metric, and S2's other metrics refused as s2-lite refuses them; S2's error codes with
//! S2's statuses, as the SDK reads them.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use futures::StreamExt;
use s2_sdk::append_session::AppendSessionConfig;
use s2_sdk::error::RequestError;
use s2_sdk::error::{AppendConditionFailed, AppendError};
use s2_sdk::types::{
    AccountMetricSet, AppendInput, AppendRecord, AppendRecordBatch, BasinMetricSet, CommandRecord, CreateBasinInput,
    CreateStreamInput, GetAccountMetricsInput, GetBasinMetricsInput, GetStreamMetricsInput, Header, MeteredBytes,
    Metric, ReadFrom, ReadInput, ReadLimits, ReadSessionConfig, ReadStart, ReadStop, S2Config, S2Endpoints,
    StreamMetricSet, TimeRange,
};
use s2_sdk::S2;
use shale_tests::TestServer;

fn client(server: &TestServer) -> S2 {
    let endpoints = S2Endpoints::for_endpoint(&server.base).unwrap();
    S2::new(S2Config::new("any-token").with_endpoints(endpoints)).unwrap()
}

fn batch(bodies: &[&str]) -> AppendInput {
    AppendInput::new(
        AppendRecordBatch::try_from_iter(bodies.iter().map(|b| AppendRecord::new(b.to_string()).unwrap())).unwrap(),
    )
}

fn from_seq(seq: u64) -> ReadInput {
    ReadInput::new().with_start(ReadStart::new().with_from(ReadFrom::SeqNum(seq)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_sdk_runs_its_normal_flows_against_shale() {
    let server = TestServer::start().await;
    let s2 = client(&server);
    let basin_name: s2_sdk::types::BasinName = "sdk-basin-1".parse().unwrap();
    let info = s2.create_basin(CreateBasinInput::new(basin_name.clone())).await.unwrap();
    assert_eq!(info.name, basin_name);
    let basin = s2.basin(basin_name.clone());
    basin.create_stream(CreateStreamInput::new("events".parse().unwrap())).await.unwrap();
    let listed = basin.list_streams(Default::default()).await.unwrap();
    assert_eq!(listed.values.iter().map(|s| s.name.to_string()).collect::<Vec<_>>(), vec!["events"]);
    let stream = basin.stream("events".parse().unwrap());

    // Unary append and read (protobuf bodies).
    let ack = stream.append(batch(&["one", "two"])).await.unwrap();
    assert_eq!((ack.start.seq_num, ack.end.seq_num), (0, 2));
    let read = stream
        .read(from_seq(0).with_stop(ReadStop::new().with_limits(ReadLimits::new().with_count(10))))
        .await
        .unwrap();
    let bodies: Vec<Vec<u8>> = read.records.iter().map(|r| r.body.to_vec()).collect();
    assert_eq!(bodies, vec![b"one".to_vec(), b"two".to_vec()]);

    // A read session follows the tail while another task appends through a session.
    let mut reader = stream.read_session(from_seq(0), ReadSessionConfig::default()).await.unwrap();
    let writer = {
        let stream = basin.stream("events".parse().unwrap());
        tokio::spawn(async move {
            let session = stream.append_session(AppendSessionConfig::new());
            let mut tickets = Vec::new();
            for i in 0..50 {
                tickets.push(session.submit(batch(&[&format!("s{i}a"), &format!("s{i}b")])).await.unwrap());
            }
            let mut starts = Vec::new();
            for ticket in tickets {
                starts.push(ticket.await.unwrap().start.seq_num);
            }
            session.close().await.unwrap();
            starts
        })
    };
    let mut seen = Vec::new();
    while seen.len() < 102 {
        let next = tokio::time::timeout(Duration::from_secs(30), reader.next()).await.unwrap().unwrap().unwrap();
        seen.extend(next.records.into_iter().map(|r| r.seq_num));
    }
    assert_eq!(seen, (0..102).collect::<Vec<_>>(), "live read session: no gap, no repeat");
    let starts = writer.await.unwrap();
    assert_eq!(starts, (0..50).map(|i| 2 + 2 * i).collect::<Vec<_>>(), "session acks in order");
    drop(reader);

    assert_eq!(stream.check_tail().await.unwrap().seq_num, 102);

    // match_seq_num mismatch reports the tail.
    match stream.append(batch(&["x"]).with_match_seq_num(5)).await {
        Err(AppendError::ConditionFailed(AppendConditionFailed::SeqNumMismatch(tail))) => assert_eq!(tail, 102),
        other => panic!("expected seq num mismatch, got {other:?}"),
    }

    // Fencing.
    let token: s2_sdk::types::FencingToken = "writer-1".parse().unwrap();
    stream
        .append(AppendInput::new(
            AppendRecordBatch::try_from_iter([CommandRecord::fence(token.clone()).into()]).unwrap(),
        ))
        .await
        .unwrap();
    let wrong: s2_sdk::types::FencingToken = "writer-2".parse().unwrap();
    match stream.append(batch(&["fenced"]).with_fencing_token(wrong)).await {
        Err(AppendError::ConditionFailed(AppendConditionFailed::FencingTokenMismatch(actual))) => {
            assert_eq!(actual.to_string(), "writer-1")
        }
        other => panic!("expected fencing token mismatch, got {other:?}"),
    }
    stream.append(batch(&["fenced ok"]).with_fencing_token(token)).await.unwrap();

    // Trim: reads start at the trim point.
    stream
        .append(AppendInput::new(AppendRecordBatch::try_from_iter([CommandRecord::trim(100).into()]).unwrap()))
        .await
        .unwrap();
    let after_trim = stream.read(from_seq(0)).await.unwrap();
    assert_eq!(after_trim.records.first().map(|r| r.seq_num), Some(100));

    s2.delete_basin(s2_sdk::types::DeleteBasinInput::new(basin_name)).await.unwrap();
    server.stop().await;
}

/// The points of the one gauge a stream's `storage` answers.
fn storage_points(metrics: Vec<Metric>) -> Vec<(u32, f64)> {
    match metrics.as_slice() {
        [Metric::Gauge(gauge)] => {
            assert_eq!(gauge.name, "storage");
            gauge.values.clone()
        }
        other => panic!("expected one gauge, got {other:?}"),
    }
}

fn unix_now() -> u32 {
    u32::try_from(shale_storage::Clock::now_ms(&shale_storage::SystemClock) / 1000).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_sdk_reads_a_streams_storage_and_is_refused_other_metrics() {
    let server = TestServer::start().await;
    let s2 = client(&server);
    let basin_name: s2_sdk::types::BasinName = "sdk-metrics".parse().unwrap();
    s2.create_basin(CreateBasinInput::new(basin_name.clone())).await.unwrap();
    let basin = s2.basin(basin_name.clone());
    // A name with a slash: the SDK sends it percent-encoded in the path.
    let name: s2_sdk::types::StreamName = "logs/app".parse().unwrap();
    basin.create_stream(CreateStreamInput::new(name.clone())).await.unwrap();
    let stream = basin.stream(name.clone());
    let with_header = AppendRecord::new("three").unwrap().with_headers([Header::new("k", "value")]).unwrap();
    let records = [AppendRecord::new("one").unwrap(), AppendRecord::new("two").unwrap(), with_header];
    stream.append(AppendInput::new(AppendRecordBatch::try_from_iter(records).unwrap())).await.unwrap();
    stream
        .append(AppendInput::new(AppendRecordBatch::try_from_iter([CommandRecord::trim(1).into()]).unwrap()))
        .await
        .unwrap();

    // What a reader from the trim point gets, metered as the SDK meters it.
    let read = stream.read(from_seq(0)).await.unwrap();
    assert_eq!(read.records.first().map(|r| r.seq_num), Some(1));
    let live: usize = read.records.iter().map(MeteredBytes::metered_bytes).sum();

    let now = unix_now();
    let storage = |range| GetStreamMetricsInput::new(basin_name.clone(), name.clone(), StreamMetricSet::Storage(range));
    let points = storage_points(s2.get_stream_metrics(storage(TimeRange::new(now - 3600, now + 3600))).await.unwrap());
    assert_eq!(points.len(), 1, "{points:?}");
    assert_eq!(points[0].1, live as f64, "the stream's bytes from its trim point");
    assert!(points[0].0.abs_diff(now) <= 5, "the point is now: {points:?}");
    let past = storage_points(s2.get_stream_metrics(storage(TimeRange::new(now - 7200, now - 3600))).await.unwrap());
    assert!(past.is_empty(), "no history is kept: {past:?}");

    let refused = |result: Result<Vec<Metric>, RequestError>| match result {
        Err(RequestError::Server(e)) => (e.status.as_u16(), e.code),
        other => panic!("expected a server error, got {other:?}"),
    };
    let range = TimeRange::new(now - 3600, now);
    let basin_storage = GetBasinMetricsInput::new(basin_name.clone(), BasinMetricSet::Storage(range));
    assert_eq!(refused(s2.get_basin_metrics(basin_storage).await), (501, "not_implemented".to_string()));
    let active = GetAccountMetricsInput::new(AccountMetricSet::ActiveBasins(range));
    assert_eq!(refused(s2.get_account_metrics(active).await), (501, "not_implemented".to_string()));
    let missing = GetStreamMetricsInput::new(basin_name, "nope".parse().unwrap(), StreamMetricSet::Storage(range));
    assert_eq!(refused(s2.get_stream_metrics(missing).await).0, 404);
    server.stop().await;
}

/// Where Shale answers with one of S2's codes, it does so with S2's status, so that S2's
/// SDKs, which decide retries from the two together, treat it as S2's. The one difference
/// on purpose: `invalid` is a 400 here, S2's 422.
#[test]
fn s2s_codes_come_with_s2s_statuses() {
    let mut own = Vec::new();
    for code in shale_proto::ErrorCode::ALL {
        let Ok(theirs) = code.as_str().parse::<s2_sdk::error::ErrorCode>() else {
            own.push(code.as_str());
            continue;
        };
        let expected = if code.as_str() == "invalid" { 400 } else { theirs.status().as_u16() };
        assert_eq!(code.http_status(), expected, "{}", code.as_str());
    }
    // The cases S2 has no code for (its 412 and 416 answers carry no code at all).
    let expected_own = [
        "not_found",
        "seq_num_mismatch",
        "fencing_token_mismatch",
        "producer_seq_mismatch",
        "range_not_satisfiable",
        "indefinite",
        "fenced",
        "internal",
        "wrong_role",
    ];
    assert_eq!(own, expected_own);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_sdk_knows_the_codes_of_missing_and_existing_resources() {
    use s2_sdk::error::ErrorCode;
    let server = TestServer::start().await;
    let s2 = client(&server);
    let known = |result: Result<_, RequestError>| match result {
        Err(RequestError::Server(e)) => (e.known_code(), e.is_retryable()),
        Ok(_) => panic!("expected an error"),
        Err(other) => panic!("expected a server error, got {other:?}"),
    };
    let name: s2_sdk::types::BasinName = "sdk-codes".parse().unwrap();
    s2.create_basin(CreateBasinInput::new(name.clone())).await.unwrap();
    let again = s2.create_basin(CreateBasinInput::new(name.clone())).await.map(|_| ());
    assert_eq!(known(again), (Some(ErrorCode::ResourceAlreadyExists), false));
    let missing_basin: s2_sdk::types::BasinName = "sdk-nothing".parse().unwrap();
    let config = s2.get_basin_config(missing_basin).await.map(|_| ());
    assert_eq!(known(config), (Some(ErrorCode::BasinNotFound), false));
    let basin = s2.basin(name);
    let config = basin.get_stream_config("nope".parse().unwrap()).await.map(|_| ());
    assert_eq!(known(config), (Some(ErrorCode::StreamNotFound), false));
    server.stop().await;
}

/// The SDK's `ensure_basin` and `ensure_stream` (what `s2 apply` runs): created, then
/// unchanged, then updated to exactly the config given, as the SDK reads the answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_sdk_ensures_basins_and_streams_with_their_whole_config() {
    use s2_sdk::types::{
        BasinConfig, EnsureBasinInput, EnsureOutput, EnsureStreamInput, RetentionPolicy, StreamConfig,
    };
    fn kind<T>(output: &EnsureOutput<T>) -> &'static str {
        match output {
            EnsureOutput::Created(_) => "created",
            EnsureOutput::ConfigUpdated(_) => "updated",
            EnsureOutput::ConfigUnchanged(_) => "unchanged",
        }
    }
    let server = TestServer::start().await;
    let s2 = client(&server);
    let basin_name: s2_sdk::types::BasinName = "sdk-ensured".parse().unwrap();
    let reading = BasinConfig::new().with_create_stream_on_read(true);
    let mut outcomes = Vec::new();
    for config in [reading.clone(), reading, BasinConfig::new().with_create_stream_on_append(true)] {
        let input = EnsureBasinInput::new(basin_name.clone()).with_config(config);
        outcomes.push(kind(&s2.ensure_basin(input).await.unwrap()));
    }
    assert_eq!(outcomes, ["created", "unchanged", "updated"]);
    let config = s2.get_basin_config(basin_name.clone()).await.unwrap();
    assert_eq!((config.create_stream_on_append, config.create_stream_on_read), (true, false));

    let basin = s2.basin(basin_name);
    let name: s2_sdk::types::StreamName = "ensured".parse().unwrap();
    let hour = StreamConfig::new().with_retention_policy(RetentionPolicy::Age(3600));
    let mut outcomes = Vec::new();
    for config in [Some(hour.clone()), Some(hour), None] {
        let mut input = EnsureStreamInput::new(name.clone());
        if let Some(config) = config {
            input = input.with_config(config);
        }
        outcomes.push(kind(&basin.ensure_stream(input).await.unwrap()));
    }
    assert_eq!(outcomes, ["created", "unchanged", "updated"]);
    let config = basin.get_stream_config(name).await.unwrap();
    assert_eq!(config.retention_policy, Some(RetentionPolicy::Infinite), "left out: the default again");
    server.stop().await;
}
