//! The S2-compatible HTTP API against `shale serve` on a loopback port.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use shale_tests::{series, SseReader, TestServer};

const BASIN: &str = "http-basin";

async fn setup(server: &TestServer, streams: &[&str]) {
    let r = server.client.post(server.url("/v1/basins")).json(&json!({ "basin": BASIN })).send().await.unwrap();
    assert_eq!(r.status(), 201);
    for stream in streams {
        let r = server
            .client
            .post(server.url("/v1/streams"))
            .header("s2-basin", BASIN)
            .json(&json!({ "stream": stream }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    }
}

async fn call(server: &TestServer, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = server.client.request(method.parse().unwrap(), server.url(path)).header("s2-basin", BASIN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn append(server: &TestServer, stream: &str, bodies: &[&str]) -> Value {
    let records: Vec<Value> = bodies.iter().map(|b| json!({ "body": b })).collect();
    let (status, ack) =
        call(server, "POST", &format!("/v1/streams/{stream}/records"), Some(json!({ "records": records }))).await;
    assert_eq!(status, 200, "{ack}");
    ack
}

/// Reads an SSE response until the server ends it: (records received, saw `[DONE]`).
async fn sse_to_the_end(server: &TestServer, path: &str) -> (usize, bool) {
    let response = server
        .client
        .get(server.url(path))
        .header("s2-basin", BASIN)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let mut events = SseReader::new(response);
    let (mut records, mut done) = (0, false);
    while let Some(event) = events.next(Duration::from_secs(30)).await {
        match event.event.as_str() {
            "batch" => {
                records += serde_json::from_str::<Value>(&event.data).unwrap()["records"].as_array().unwrap().len()
            }
            _ if event.data == "[DONE]" => done = true,
            _ => {}
        }
    }
    (records, done)
}

async fn tail(server: &TestServer, stream: &str) -> u64 {
    let (status, body) = call(server, "GET", &format!("/v1/streams/{stream}/records/tail"), None).await;
    assert_eq!(status, 200, "{body}");
    body["tail"]["seq_num"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basins_and_streams_lifecycle() {
    let server = TestServer::start().await;
    setup(&server, &["apple", "apricot", "banana"]).await;

    let (status, body) = call(&server, "POST", "/v1/basins", Some(json!({ "basin": BASIN }))).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("resource_already_exists")));
    let (status, _) = call(&server, "PUT", "/v1/basins/another-basin", None).await;
    assert_eq!(status, 201);
    let (status, _) = call(&server, "PUT", "/v1/basins/another-basin", None).await;
    assert_eq!(status, 200);
    let (status, list) = call(&server, "GET", "/v1/basins?prefix=another&limit=10", None).await;
    assert_eq!(status, 200);
    assert_eq!(list["basins"][0]["name"], "another-basin");
    assert_eq!(list["basins"][0].get("location"), Some(&Value::Null), "S2's BasinInfo fields: {list}");

    let (status, config) =
        call(&server, "PATCH", &format!("/v1/basins/{BASIN}"), Some(json!({ "create_stream_on_append": true }))).await;
    assert_eq!((status, &config["create_stream_on_append"]), (200, &json!(true)));
    let ack = append(&server, "auto-created", &["x"]).await;
    assert_eq!(ack["end"]["seq_num"], 1);

    let (status, page) = call(&server, "GET", "/v1/streams?prefix=ap&limit=1", None).await;
    assert_eq!(status, 200);
    assert_eq!(page["streams"][0]["name"], "apple");
    assert_eq!(page["streams"][0].get("cipher"), Some(&Value::Null), "S2's StreamInfo fields: {page}");
    assert_eq!(page["has_more"], true);
    let (_, page) = call(&server, "GET", "/v1/streams?prefix=ap&start_after=apple", None).await;
    assert_eq!(page["streams"].as_array().unwrap().len(), 1);
    assert_eq!(page["has_more"], false);

    let (status, config) = call(
        &server,
        "PATCH",
        "/v1/streams/apple",
        Some(json!({ "timestamping": { "mode": "arrival" }, "retention_policy": { "age": 3600 } })),
    )
    .await;
    assert_eq!(status, 200, "{config}");
    let (_, config) = call(&server, "GET", "/v1/streams/apple", None).await;
    assert_eq!(config["timestamping"]["mode"], "arrival");
    assert_eq!(config["retention_policy"]["age"], 3600);
    // A stream that set nothing shows what applies to it, as S2 shows a stream's config.
    let (_, config) = call(&server, "GET", "/v1/streams/apricot", None).await;
    let effective = json!({
        "retention_policy": { "infinite": {} },
        "timestamping": { "mode": "client-prefer", "uncapped": false },
        "delete_on_empty": { "min_age_secs": 0 },
    });
    assert_eq!(config, effective);

    let (status, _) = call(&server, "DELETE", "/v1/streams/banana", None).await;
    assert_eq!(status, 202);
    let (status, body) = call(&server, "GET", "/v1/streams/banana", None).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("stream_not_found")));
    let (status, _) = call(&server, "DELETE", "/v1/basins/another-basin", None).await;
    assert_eq!(status, 202);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_read_conditions_and_formats() {
    let server = TestServer::start().await;
    setup(&server, &["s", "a/b"]).await;
    let ack = append(&server, "s", &["one", "two"]).await;
    assert_eq!((ack["start"]["seq_num"].as_u64(), ack["end"]["seq_num"].as_u64()), (Some(0), Some(2)));
    assert_eq!(ack["tail"]["seq_num"], 2);

    // Base64 bodies and headers.
    let b64 = base64::engine::general_purpose::STANDARD;
    let response = server
        .client
        .post(server.url("/v1/streams/s/records"))
        .header("s2-basin", BASIN)
        .header("s2-format", "base64")
        .json(&json!({ "records": [{ "body": b64.encode([0u8, 255]), "headers": [[b64.encode("k"), b64.encode("v")]] }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let read = server
        .client
        .get(server.url("/v1/streams/s/records?seq_num=2"))
        .header("s2-basin", BASIN)
        .header("s2-format", "base64")
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(read["records"][0]["body"], b64.encode([0u8, 255]));
    assert_eq!(read["records"][0]["headers"][0], json!([b64.encode("k"), b64.encode("v")]));

    let (status, read) = call(&server, "GET", "/v1/streams/s/records?seq_num=0&count=2", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        read["records"].as_array().unwrap().iter().map(|r| r["body"].clone()).collect::<Vec<_>>(),
        vec![json!("one"), json!("two")]
    );
    assert_eq!(read["tail"]["seq_num"], 3);
    let (status, read) = call(&server, "GET", "/v1/streams/s/records?tail_offset=1", None).await;
    assert_eq!((status, read["records"][0]["seq_num"].as_u64()), (200, Some(2)));

    // Stream names with a slash, percent-encoded.
    append(&server, "a%2Fb", &["slash"]).await;
    assert_eq!(tail(&server, "a%2Fb").await, 1);

    // Conditions: 412 with S2's bodies.
    let (status, body) = call(
        &server,
        "POST",
        "/v1/streams/s/records",
        Some(json!({ "records": [{ "body": "x" }], "match_seq_num": 0 })),
    )
    .await;
    assert_eq!((status, body), (412, json!({ "seq_num_mismatch": 3 })));
    let fence = json!({ "records": [{ "headers": [["", "fence"]], "body": "tok" }] });
    assert_eq!(call(&server, "POST", "/v1/streams/s/records", Some(fence)).await.0, 200);
    let (status, body) = call(
        &server,
        "POST",
        "/v1/streams/s/records",
        Some(json!({ "records": [{ "body": "x" }], "fencing_token": "nope" })),
    )
    .await;
    assert_eq!((status, body), (412, json!({ "fencing_token_mismatch": "tok" })));

    // Past the tail: 416 with the tail; clamp turns it into an empty read.
    let (status, body) = call(&server, "GET", "/v1/streams/s/records?seq_num=99", None).await;
    assert_eq!(status, 416);
    assert_eq!(body["tail"]["seq_num"], 4);
    let (status, body) = call(&server, "GET", "/v1/streams/s/records?seq_num=99&clamp=true", None).await;
    assert_eq!((status, body["records"].as_array().map(Vec::len)), (200, Some(0)));

    // Trim command: reads start at the trim point.
    let trim =
        json!({ "records": [{ "headers": [["", b64.encode("trim")]], "body": b64.encode(2u64.to_be_bytes()) }] });
    let response = server
        .client
        .post(server.url("/v1/streams/s/records"))
        .header("s2-basin", BASIN)
        .header("s2-format", "base64")
        .json(&trim)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (_, read) = call(&server, "GET", "/v1/streams/s/records?seq_num=0", None).await;
    assert_eq!(read["records"][0]["seq_num"], 2);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_error_and_changes_nothing() {
    let server = TestServer::start().await;
    setup(&server, &["s"]).await;
    append(&server, "s", &["keep"]).await;
    let big = "x".repeat(1024 * 1024);
    let thousand_and_one: Vec<Value> = (0..1001).map(|_| json!({ "body": "x" })).collect();
    /// (name, path, s2-basin header, body, expected status and code)
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, Option<String>, (u16, &'a str));
    let cases: Vec<Case> = vec![
        ("malformed json", "/v1/streams/s/records", Some(BASIN), Some("{\"records\": [".into()), (400, "bad_json")),
        (
            "unknown field",
            "/v1/streams/s/records",
            Some(BASIN),
            Some(json!({ "records": [{ "body": "x", "bogus": 1 }] }).to_string()),
            (400, "bad_json"),
        ),
        (
            "empty batch",
            "/v1/streams/s/records",
            Some(BASIN),
            Some(json!({ "records": [] }).to_string()),
            (400, "invalid"),
        ),
        (
            "1001 records",
            "/v1/streams/s/records",
            Some(BASIN),
            Some(json!({ "records": thousand_and_one }).to_string()),
            (400, "invalid"),
        ),
        (
            "over 1 MiB",
            "/v1/streams/s/records",
            Some(BASIN),
            Some(json!({ "records": [{ "body": big }] }).to_string()),
            (400, "invalid"),
        ),
        (
            "bad command",
            "/v1/streams/s/records",
            Some(BASIN),
            Some(json!({ "records": [{ "headers": [["", "trim"]], "body": "x" }] }).to_string()),
            (400, "invalid"),
        ),
        (
            "long fencing token",
            "/v1/streams/s/records",
            Some(BASIN),
            Some(json!({ "records": [{ "body": "x" }], "fencing_token": "t".repeat(37) }).to_string()),
            (400, "invalid"),
        ),
        (
            "missing basin header",
            "/v1/streams/s/records",
            None,
            Some(json!({ "records": [{ "body": "x" }] }).to_string()),
            (400, "bad_header"),
        ),
        (
            "invalid basin header",
            "/v1/streams/s/records",
            Some("Bad_Basin"),
            Some(json!({ "records": [{ "body": "x" }] }).to_string()),
            (400, "bad_header"),
        ),
        (
            "unknown stream",
            "/v1/streams/nope/records",
            Some(BASIN),
            Some(json!({ "records": [{ "body": "x" }] }).to_string()),
            (404, "stream_not_found"),
        ),
        ("invalid basin name", "/v1/basins", None, Some(json!({ "basin": "NO" }).to_string()), (400, "invalid")),
    ];
    for (name, path, basin, body, (expected, code)) in cases {
        let mut request = server.client.post(server.url(path)).header("content-type", "application/json");
        if let Some(basin) = basin {
            request = request.header("s2-basin", basin);
        }
        let response = request.body(body.unwrap_or_default()).send().await.unwrap();
        assert_eq!(response.status().as_u16(), expected, "{name}");
        let body: Value = response.json().await.unwrap_or_else(|e| panic!("{name}: body is not JSON: {e}"));
        assert_eq!(body["code"], code, "{name}: {body}");
        assert!(body["message"].is_string(), "{name}: {body}");
    }
    let b64_case = server
        .client
        .post(server.url("/v1/streams/s/records"))
        .header("s2-basin", BASIN)
        .header("s2-format", "base64")
        .json(&json!({ "records": [{ "body": "not base64!" }] }))
        .send()
        .await
        .unwrap();
    assert_eq!(b64_case.status(), 400, "bad base64");

    // A query that cannot be read is S2's `bad_query`; one read whole that breaks a rule,
    // `invalid`.
    let queries = [
        ("seq_num=abc", "bad_query"),
        ("count=-1", "bad_query"),
        ("bogus=1", "bad_query"),
        ("seq_num=1&timestamp=2", "invalid"),
        ("wait=61", "invalid"),
        ("clamp=maybe", "bad_query"),
    ];
    for (query, code) in queries {
        let (status, body) = call(&server, "GET", &format!("/v1/streams/s/records?{query}"), None).await;
        assert_eq!((status, body["code"].as_str()), (400, Some(code)), "{query}: {body}");
        assert!(body["message"].is_string(), "{query}: {body}");
    }
    let (status, body) = call(&server, "GET", "/v1/nothing-here", None).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));

    assert_eq!(tail(&server, "s").await, 1, "no bad request changed the stream");
    server.stop().await;
}

/// As S2 does: a unary read asking for more than 1,000 records or 1 MiB is clamped to
/// that, not refused; in a session, `count` and `bytes` bound the whole session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_limits_are_clamped_per_call_and_bound_whole_sessions() {
    let server = TestServer::start().await;
    setup(&server, &["s"]).await;
    let bodies: Vec<String> = (0..1000).map(|i| format!("r{i}")).collect();
    let bodies: Vec<&str> = bodies.iter().map(String::as_str).collect();
    append(&server, "s", &bodies).await;
    append(&server, "s", &bodies[..500]).await;

    let (status, body) = call(&server, "GET", "/v1/streams/s/records?seq_num=0&count=2000", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["records"].as_array().unwrap().len(), 1000, "clamped to S2's 1,000 per call");
    let (status, body) = call(&server, "GET", "/v1/streams/s/records?seq_num=0&bytes=100000000", None).await;
    assert_eq!(status, 200, "{body}");
    assert!(!body["records"].as_array().unwrap().is_empty());

    let (records, done) = sse_to_the_end(&server, "/v1/streams/s/records?seq_num=0&count=1200").await;
    assert_eq!((records, done), (1200, true), "a session reads its whole count");
    let (records, _) = sse_to_the_end(&server, "/v1/streams/s/records?seq_num=0&count=5000&wait=0").await;
    assert_eq!(records, 1500, "and ends at the tail when it asks for more than there is (wait=0)");
    for bound in ["count=5000", "bytes=100000000", "until=18446744073709551615"] {
        let (records, done) = sse_to_the_end(&server, &format!("/v1/streams/s/records?seq_num=0&{bound}")).await;
        assert_eq!((records, done), (1500, true), "{bound}: a bounded session's wait is 0 unless given, as in S2");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_and_sse_follow_resume_and_finish() {
    let server = TestServer::start().await;
    setup(&server, &["s"]).await;

    // Long poll: a read at the tail with `wait` returns the next append.
    let poll = {
        let client = server.client.clone();
        let url = server.url("/v1/streams/s/records?seq_num=0&wait=30");
        tokio::spawn(async move {
            client.get(url).header("s2-basin", BASIN).send().await.unwrap().json::<Value>().await.unwrap()
        })
    };
    append(&server, "s", &["first"]).await;
    assert_eq!(poll.await.unwrap()["records"][0]["body"], "first");

    // SSE follows the tail live.
    let response = server
        .client
        .get(server.url("/v1/streams/s/records?seq_num=0"))
        .header("s2-basin", BASIN)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut events = SseReader::new(response);
    let first = events.next(Duration::from_secs(30)).await.unwrap();
    assert_eq!(first.event, "batch");
    let data: Value = serde_json::from_str(&first.data).unwrap();
    assert_eq!(data["records"][0]["body"], "first");
    append(&server, "s", &["second", "third"]).await;
    let mut seen = vec![];
    let mut last_id = first.id.clone().unwrap();
    while seen.len() < 2 {
        let event = events.next(Duration::from_secs(30)).await.unwrap();
        if event.event == "batch" {
            let data: Value = serde_json::from_str(&event.data).unwrap();
            seen.extend(data["records"].as_array().unwrap().iter().map(|r| r["seq_num"].as_u64().unwrap()));
            last_id = event.id.unwrap();
        }
    }
    assert_eq!(seen, vec![1, 2]);
    drop(events);

    // Resume after the last event id: the next record only, no gap, no repeat.
    append(&server, "s", &["fourth"]).await;
    let response = server
        .client
        .get(server.url("/v1/streams/s/records?seq_num=0"))
        .header("s2-basin", BASIN)
        .header("accept", "text/event-stream")
        .header("last-event-id", &last_id)
        .send()
        .await
        .unwrap();
    let mut events = SseReader::new(response);
    let event = loop {
        let event = events.next(Duration::from_secs(30)).await.unwrap();
        if event.event == "batch" {
            break event;
        }
    };
    let data: Value = serde_json::from_str(&event.data).unwrap();
    assert_eq!(
        data["records"].as_array().unwrap().iter().map(|r| r["seq_num"].as_u64().unwrap()).collect::<Vec<_>>(),
        vec![3]
    );
    drop(events);

    // A bounded SSE read ends with [DONE].
    assert_eq!(sse_to_the_end(&server, "/v1/streams/s/records?seq_num=0&count=2").await, (2, true));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_ready_and_metrics() {
    let server = TestServer::start().await;
    setup(&server, &["s"]).await;
    append(&server, "s", &["x"]).await;
    call(&server, "GET", "/v1/streams/s/records?seq_num=0", None).await;
    assert_eq!(server.client.get(server.url("/health")).send().await.unwrap().status(), 200);
    assert_eq!(server.client.get(server.url("/ready")).send().await.unwrap().status(), 200);
    let metrics = server.client.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
    let value =
        |name: &str| -> u64 { series(&metrics, name).unwrap_or_else(|| panic!("{name} missing from /metrics")) };
    assert_eq!(value("shale_appends_acked_total"), 1);
    assert_eq!(value("shale_segments_written_total"), 1);
    assert!(value("shale_object_puts_total") >= 1);
    assert_eq!(value("shale_cache_block_misses_total"), 1);
    assert_eq!(value("shale_segment_commit_seconds_count"), 1);
    assert_eq!(value("shale_segment_upload_seconds_count"), 1);
    assert_eq!(value("shale_append_seconds_count"), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_tokens_make_creates_idempotent_and_wait_ends_caught_up_sessions() {
    let server = TestServer::start().await;
    let create = |token: &'static str, on_read: bool| {
        let body = json!({ "basin": "token-basin", "location": "aws:us-east-1", "config": { "create_stream_on_read": on_read } });
        server.client.post(server.url("/v1/basins")).header("s2-request-token", token).json(&body).send()
    };
    let outcome =
        |r: reqwest::Response| (r.status().as_u16(), r.headers()["s2-provision-result"].to_str().unwrap().to_string());
    assert_eq!(outcome(create("t-1", true).await.unwrap()), (201, "created".into()));
    assert_eq!(
        outcome(create("t-1", true).await.unwrap()),
        (201, "noop".into()),
        "a retry with the same token and config answers as the create did, as s2-lite does"
    );
    assert_eq!(
        create("t-1", false).await.unwrap().status(),
        409,
        "the same token with another config is another create"
    );
    assert_eq!(create("t-2", true).await.unwrap().status(), 409, "another token conflicts");
    for (token, code) in [("s-1", 201), ("s-1", 201), ("s-2", 409)] {
        let r = server
            .client
            .post(server.url("/v1/streams"))
            .header("s2-basin", "token-basin")
            .header("s2-request-token", token)
            .json(&json!({ "stream": "token-stream" }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), code, "{token}");
    }

    setup(&server, &["s"]).await;
    append(&server, "s", &["a", "b"]).await;
    // A session with wait=0 reads what is there and ends once caught up.
    assert_eq!(sse_to_the_end(&server, "/v1/streams/s/records?seq_num=0&wait=0").await, (2, true));

    // No start position means the tail, as in S2.
    let (status, body) = call(&server, "GET", "/v1/streams/s/records", None).await;
    assert_eq!((status, body["records"].as_array().map(Vec::len)), (200, Some(0)));
    assert_eq!(body["tail"]["seq_num"], 2);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamping_modes_are_honoured() {
    let server = TestServer::start().await;
    setup(&server, &[]).await;
    for (stream, mode) in [("req", "client-require"), ("arr", "arrival"), ("pref", "client-prefer")] {
        let (status, _) = call(
            &server,
            "POST",
            "/v1/streams",
            Some(json!({ "stream": stream, "config": { "timestamping": { "mode": mode } } })),
        )
        .await;
        assert_eq!(status, 201);
    }
    // client-require: a record without a timestamp is rejected, one with it is kept.
    let (status, body) =
        call(&server, "POST", "/v1/streams/req/records", Some(json!({ "records": [{ "body": "x" }] }))).await;
    assert_eq!(status, 400, "{body}");
    let ack = call(
        &server,
        "POST",
        "/v1/streams/req/records",
        Some(json!({ "records": [{ "body": "x", "timestamp": 1000 }] })),
    )
    .await
    .1;
    assert_eq!(ack["start"]["timestamp"], 1000);
    // arrival: the client's timestamp is ignored.
    let ack =
        call(&server, "POST", "/v1/streams/arr/records", Some(json!({ "records": [{ "body": "x", "timestamp": 5 }] })))
            .await
            .1;
    assert!(ack["start"]["timestamp"].as_u64().unwrap() > 1_700_000_000_000, "{ack}");
    // client-prefer: kept when given, capped at arrival, never going backwards.
    let ack = call(
        &server,
        "POST",
        "/v1/streams/pref/records",
        Some(json!({ "records": [{ "body": "a", "timestamp": 2000 }, { "body": "b", "timestamp": 1500 }, { "body": "c", "timestamp": u64::MAX }] })),
    )
    .await
    .1;
    assert_eq!(ack["start"]["timestamp"], 2000);
    let (_, read) = call(&server, "GET", "/v1/streams/pref/records?seq_num=0", None).await;
    let stamps: Vec<u64> =
        read["records"].as_array().unwrap().iter().map(|r| r["timestamp"].as_u64().unwrap()).collect();
    assert_eq!(&stamps[..2], &[2000, 2000], "never backwards");
    assert!(stamps[2] < u64::MAX && stamps[2] > 1_700_000_000_000, "capped at arrival: {stamps:?}");
    server.stop().await;
}

/// 32 PATCHes of different fields of one stream at once: each is merged at metadata under
/// its writer lock, so every field ends as one of the values written to it and none is
/// reset by a concurrent PATCH of another field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_patches_of_different_fields_all_take_effect() {
    let server = TestServer::start().await;
    setup(&server, &["patched"]).await;
    let patch = |i: u64| match i % 4 {
        0 => json!({ "storage_class": "express" }),
        1 => json!({ "retention_policy": { "age": 1000 + i } }),
        2 => json!({ "timestamping": { "uncapped": true } }),
        _ => json!({ "delete_on_empty": { "min_age_secs": 100 + i } }),
    };
    let patches: Vec<_> = (0..32u64)
        .map(|i| {
            let (client, url) = (server.client.clone(), server.url("/v1/streams/patched"));
            tokio::spawn(async move {
                let response = client.patch(url).header("s2-basin", BASIN).json(&patch(i)).send().await.unwrap();
                response.status().as_u16()
            })
        })
        .collect();
    for patched in patches {
        assert_eq!(patched.await.unwrap(), 200);
    }
    let (status, config) = call(&server, "GET", "/v1/streams/patched", None).await;
    assert_eq!(status, 200);
    assert_eq!(config["storage_class"], "express", "{config}");
    let age = config["retention_policy"]["age"].as_u64().unwrap();
    assert!(age >= 1000 && age % 4 == 1, "{config}");
    assert_eq!(config["timestamping"]["uncapped"], true, "{config}");
    let min_age = config["delete_on_empty"]["min_age_secs"].as_u64().unwrap();
    assert!(min_age >= 100 && min_age % 4 == 3, "{config}");
    server.stop().await;
}

/// A basin's default stream config is validated like a stream's config, on create and
/// on PATCH, with S2's JSON error; nothing is changed by a refused call.
#[tokio::test]
async fn basin_default_stream_configs_are_validated() {
    let server = TestServer::start().await;
    for bad in [json!({ "storage_class": "bogus" }), json!({ "retention_policy": { "age": 0 } })] {
        let body = json!({ "basin": "bad-defaults", "config": { "default_stream_config": bad } });
        let (status, error) = call(&server, "POST", "/v1/basins", Some(body)).await;
        assert_eq!((status, error["code"].as_str()), (400, Some("invalid")), "{error}");
        assert!(error["message"].as_str().unwrap().contains("default_stream_config"), "{error}");
    }
    let (status, _) = call(&server, "GET", "/v1/basins/bad-defaults", None).await;
    assert_eq!(status, 404, "a refused create creates nothing");
    // An array where S2 has an object is refused, not read as an empty config.
    let (status, error) =
        call(&server, "POST", "/v1/basins", Some(json!({ "basin": "array-config", "config": [] }))).await;
    assert_eq!((status, error["code"].as_str()), (400, Some("bad_json")), "{error}");
    assert!(error["message"].as_str().unwrap().contains("`config`"), "{error}");

    setup(&server, &[]).await;
    let patch = json!({ "default_stream_config": { "storage_class": "bogus" } });
    let (status, error) = call(&server, "PATCH", &format!("/v1/basins/{BASIN}"), Some(patch)).await;
    assert_eq!((status, error["code"].as_str()), (400, Some("invalid")), "{error}");
    let (status, config) = call(&server, "GET", &format!("/v1/basins/{BASIN}"), None).await;
    assert_eq!(status, 200);
    assert_eq!(config["default_stream_config"], Value::Null, "a refused PATCH changes nothing: {config}");
    let patch = json!({ "default_stream_config": { "storage_class": "express" } });
    let (status, config) = call(&server, "PATCH", &format!("/v1/basins/{BASIN}"), Some(patch)).await;
    assert_eq!((status, &config["default_stream_config"]["storage_class"]), (200, &json!("express")));
    let stream = json!({ "stream": "array-config", "config": { "timestamping": [] } });
    let (status, error) = call(&server, "POST", "/v1/streams", Some(stream)).await;
    assert_eq!((status, error["code"].as_str()), (400, Some("bad_json")), "{error}");
    assert!(error["message"].as_str().unwrap().contains("`config.timestamping`"), "{error}");
    let (status, _) = call(&server, "GET", "/v1/streams/array-config", None).await;
    assert_eq!(status, 404);
    server.stop().await;
}

/// Unknown fields anywhere in a config are refused (S2 ignores them), and S2's `stream_cipher`
/// is accepted only as `null` (Shale does not encrypt): a refused call creates or
/// changes nothing.
#[tokio::test]
async fn unknown_config_fields_are_refused_everywhere() {
    let server = TestServer::start().await;
    setup(&server, &["s"]).await;
    // An unknown field is a body S2 cannot read (`bad_json`); a cipher is a value Shale
    // refuses (`invalid`).
    let refused = [
        ("POST", "/v1/streams".to_string(), json!({ "stream": "n1", "config": { "bogus": 1 } }), "bad_json"),
        (
            "POST",
            "/v1/streams".to_string(),
            json!({ "stream": "n2", "config": { "timestamping": { "bogus": 1 } } }),
            "bad_json",
        ),
        ("PUT", "/v1/streams/n3".to_string(), json!({ "config": { "delete_on_empty": { "bogus": 1 } } }), "bad_json"),
        ("PATCH", "/v1/streams/s".to_string(), json!({ "bogus": 1 }), "bad_json"),
        ("POST", "/v1/basins".to_string(), json!({ "basin": "new-basin-1", "config": { "bogus": true } }), "bad_json"),
        (
            "POST",
            "/v1/basins".to_string(),
            json!({ "basin": "new-basin-2", "config": { "stream_cipher": "aegis-256" } }),
            "invalid",
        ),
        ("PATCH", format!("/v1/basins/{BASIN}"), json!({ "default_stream_config": { "bogus": 1 } }), "bad_json"),
        ("PATCH", format!("/v1/basins/{BASIN}"), json!({ "stream_cipher": "aegis-256" }), "invalid"),
    ];
    for (method, path, body, code) in refused {
        let (status, error) = call(&server, method, &path, Some(body.clone())).await;
        assert_eq!((status, error["code"].as_str()), (400, Some(code)), "{method} {path} {body}: {error}");
    }
    for missing in
        ["/v1/streams/n1", "/v1/streams/n2", "/v1/streams/n3", "/v1/basins/new-basin-1", "/v1/basins/new-basin-2"]
    {
        assert_eq!(call(&server, "GET", missing, None).await.0, 404, "{missing} was not created");
    }
    let (status, _) = call(
        &server,
        "POST",
        "/v1/basins",
        Some(json!({ "basin": "new-basin-3", "config": { "stream_cipher": null } })),
    )
    .await;
    assert_eq!(status, 201, "a null stream_cipher is S2's default");
    server.stop().await;
}

/// S2's reconfigurations have three states per field, as s2-lite reads them: absent
/// leaves it, a value sets it, `null` sets it back to the basin's default (unset, so
/// Shale's default, where the basin has none); a `null` `timestamping` or
/// `delete_on_empty` resets each of its fields, and a `null` `default_stream_config`
/// the basin's defaults.
#[tokio::test]
async fn null_in_a_reconfiguration_resets_to_the_default() {
    let server = TestServer::start().await;
    setup(&server, &["plain"]).await;
    let stream_path = "/v1/streams/plain";
    let patch = json!({
        "storage_class": "standard",
        "retention_policy": { "age": 3600 },
        "timestamping": { "mode": "arrival", "uncapped": true },
        "delete_on_empty": { "min_age_secs": 60 },
    });
    let (status, config) = call(&server, "PATCH", stream_path, Some(patch)).await;
    assert_eq!(status, 200, "{config}");
    let (status, config) = call(&server, "PATCH", stream_path, Some(json!({ "retention_policy": null }))).await;
    assert_eq!(status, 200, "{config}");
    assert_eq!(config["retention_policy"], json!({ "infinite": {} }), "null resets, absent leaves: {config}");
    assert_eq!(config["storage_class"], json!("standard"), "{config}");
    assert_eq!(config["timestamping"], json!({ "mode": "arrival", "uncapped": true }), "{config}");
    let (_, config) = call(&server, "PATCH", stream_path, Some(json!({ "timestamping": { "mode": null } }))).await;
    assert_eq!(config["timestamping"], json!({ "mode": "client-prefer", "uncapped": true }), "{config}");
    let patch = json!({ "storage_class": null, "timestamping": null, "delete_on_empty": { "min_age_secs": null } });
    let (_, config) = call(&server, "PATCH", stream_path, Some(patch)).await;
    assert_eq!(
        config,
        json!({
            "retention_policy": { "infinite": {} },
            "timestamping": { "mode": "client-prefer", "uncapped": false },
            "delete_on_empty": { "min_age_secs": 0 },
        }),
        "every setting back to its default"
    );

    // Where the basin has a default for a setting, `null` goes back to it.
    let basin_path = format!("/v1/basins/{BASIN}");
    let defaults = json!({ "default_stream_config": { "retention_policy": { "age": 600 }, "delete_on_empty": { "min_age_secs": 30 } } });
    let (status, basin) = call(&server, "PATCH", &basin_path, Some(defaults)).await;
    assert_eq!(status, 200, "{basin}");
    let (_, config) = call(&server, "PATCH", stream_path, Some(json!({ "retention_policy": { "age": 5 } }))).await;
    assert_eq!(config["retention_policy"], json!({ "age": 5 }), "{config}");
    let patch = json!({ "retention_policy": null, "delete_on_empty": null });
    let (_, config) = call(&server, "PATCH", stream_path, Some(patch)).await;
    assert_eq!(config["retention_policy"], json!({ "age": 600 }), "back to the basin's default: {config}");
    assert_eq!(config["delete_on_empty"], json!({ "min_age_secs": 30 }), "{config}");
    let (_, config) = call(&server, "GET", stream_path, None).await;
    assert_eq!(config["retention_policy"], json!({ "age": 600 }), "stored as answered: {config}");

    // The basin's own defaults, field by field and whole.
    let patch = json!({ "default_stream_config": { "retention_policy": null } });
    let (_, basin) = call(&server, "PATCH", &basin_path, Some(patch)).await;
    assert_eq!(basin["default_stream_config"], json!({ "delete_on_empty": { "min_age_secs": 30 } }), "{basin}");
    let (_, basin) = call(&server, "PATCH", &basin_path, Some(json!({ "default_stream_config": null }))).await;
    assert_eq!(basin["default_stream_config"], Value::Null, "{basin}");
    assert_eq!(basin["stream_cipher"], Value::Null, "shown as s2-lite shows it: {basin}");
    let (_, basin) = call(&server, "GET", &basin_path, None).await;
    assert_eq!(basin["default_stream_config"], Value::Null, "{basin}");
    server.stop().await;
}

/// S2's PUT (`s2 apply`, the SDKs' `ensure_*`) takes the whole config (a stream's as the
/// body itself, a basin's under `config`): it creates what is missing, and makes what
/// exists have exactly that config, what it leaves out at its default (a stream's at the
/// basin's default), saying which in `s2-provision-result`, as s2-lite does.
#[tokio::test]
async fn a_put_declares_the_whole_config() {
    let server = TestServer::start().await;
    setup(&server, &[]).await;
    let put = |path: &'static str, body: Option<Value>| {
        let mut request = server.client.put(server.url(path)).header("s2-basin", BASIN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let r = request.send().await.unwrap();
            let outcome = r.headers()["s2-provision-result"].to_str().unwrap().to_string();
            (r.status().as_u16(), outcome)
        }
    };
    let created = put("/v1/streams/declared", Some(json!({ "retention_policy": { "age": 100 } }))).await;
    assert_eq!(created, (201, "created".into()));
    let (_, config) = call(&server, "GET", "/v1/streams/declared", None).await;
    assert_eq!(config["retention_policy"], json!({ "age": 100 }), "{config}");
    let same = put("/v1/streams/declared", Some(json!({ "retention_policy": { "age": 100 } }))).await;
    assert_eq!(same, (200, "noop".into()));
    let other = put("/v1/streams/declared", Some(json!({ "timestamping": { "mode": "arrival" } }))).await;
    assert_eq!(other, (200, "updated".into()));
    let (_, config) = call(&server, "GET", "/v1/streams/declared", None).await;
    assert_eq!(config["retention_policy"], json!({ "infinite": {} }), "left out: the default again: {config}");
    assert_eq!(config["timestamping"]["mode"], json!("arrival"), "{config}");

    // Left out, a setting takes the basin's default.
    let defaults = json!({ "default_stream_config": { "retention_policy": { "age": 600 } } });
    assert_eq!(call(&server, "PATCH", &format!("/v1/basins/{BASIN}"), Some(defaults)).await.0, 200);
    assert_eq!(put("/v1/streams/declared", None).await, (200, "updated".into()));
    let (_, config) = call(&server, "GET", "/v1/streams/declared", None).await;
    assert_eq!(config["retention_policy"], json!({ "age": 600 }), "{config}");
    assert_eq!(config["timestamping"]["mode"], json!("client-prefer"), "{config}");
    assert_eq!(put("/v1/streams/declared", None).await, (200, "noop".into()));
    let (status, error) = call(&server, "PUT", "/v1/streams/declared", Some(json!({ "config": {} }))).await;
    assert_eq!((status, error["code"].as_str()), (400, Some("bad_json")), "S2's body is the config: {error}");

    // A basin: its whole config under `config`.
    let basin = json!({ "config": { "create_stream_on_read": true } });
    assert_eq!(put("/v1/basins/declared-basin", Some(basin.clone())).await, (201, "created".into()));
    assert_eq!(put("/v1/basins/declared-basin", Some(basin)).await, (200, "noop".into()));
    let basin = json!({ "config": { "create_stream_on_append": true } });
    assert_eq!(put("/v1/basins/declared-basin", Some(basin)).await, (200, "updated".into()));
    let (_, config) = call(&server, "GET", "/v1/basins/declared-basin", None).await;
    assert_eq!((&config["create_stream_on_append"], &config["create_stream_on_read"]), (&json!(true), &json!(false)));
    let empty_defaults = json!({ "config": { "create_stream_on_append": true, "default_stream_config": {} } });
    assert_eq!(
        put("/v1/basins/declared-basin", Some(empty_defaults)).await,
        (200, "noop".into()),
        "{{}} sets no default"
    );
    server.stop().await;
}

/// A basin that creates streams on read creates a missing one for a read and for a check
/// of its tail (as s2-lite does); one that does not answers `stream_not_found`.
#[tokio::test]
async fn reads_and_tail_checks_create_streams_where_the_basin_says_so() {
    let server = TestServer::start().await;
    setup(&server, &[]).await;
    let (status, error) = call(&server, "GET", "/v1/streams/missing/records/tail", None).await;
    assert_eq!((status, error["code"].as_str()), (404, Some("stream_not_found")), "{error}");
    let patch = json!({ "create_stream_on_read": true });
    assert_eq!(call(&server, "PATCH", &format!("/v1/basins/{BASIN}"), Some(patch)).await.0, 200);
    let (status, tail) = call(&server, "GET", "/v1/streams/checked/records/tail", None).await;
    assert_eq!((status, &tail["tail"]["seq_num"]), (200, &json!(0)), "{tail}");
    let (status, read) = call(&server, "GET", "/v1/streams/read/records?seq_num=0", None).await;
    assert_eq!((status, &read["records"]), (200, &json!([])), "{read}");
    let (_, page) = call(&server, "GET", "/v1/streams", None).await;
    let names: Vec<&str> = page["streams"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["checked", "read"], "both created");
    server.stop().await;
}

/// A listing `limit` over S2's 1,000 is taken as 1,000, as s2-lite takes it, not refused.
#[tokio::test]
async fn a_list_limit_over_the_maximum_is_the_maximum() {
    let server = TestServer::start().await;
    setup(&server, &["a", "b"]).await;
    for path in ["/v1/streams?limit=5000", "/v1/basins?limit=1001", "/v1/streams?limit=1&start_after=a"] {
        let (status, page) = call(&server, "GET", path, None).await;
        assert_eq!(status, 200, "{path}: {page}");
        assert_eq!(page["has_more"], json!(false), "{path}: {page}");
    }
    let (_, page) = call(&server, "GET", "/v1/streams?limit=5000", None).await;
    let names: Vec<&str> = page["streams"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b"]);
    server.stop().await;
}

/// S2's `wait` on a session: once caught up, the session ends after `wait` seconds
/// without new records, not twice that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caught_up_session_ends_after_its_wait() {
    let server = TestServer::start().await;
    setup(&server, &["s"]).await;
    append(&server, "s", &["a"]).await;
    let started = tokio::time::Instant::now();
    assert_eq!(sse_to_the_end(&server, "/v1/streams/s/records?seq_num=0&wait=2").await, (1, true));
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(2), "ended before its wait: {took:?}");
    assert!(took < Duration::from_millis(3500), "ended {took:?} after catching up, want about 2 s");
    server.stop().await;
}

/// A session that reaches the tail with nothing to send says so at once with a ping
/// carrying the tail, as S2 does (the TypeScript SDK's `caughtUp()` waits for it), then
/// pings every 5 s; one that gets there with a batch has the tail in the batch; one with
/// a `wait` pings, then ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_at_the_tail_pings_at_once_with_the_tail() {
    let server = TestServer::start().await;
    setup(&server, &["s"]).await;
    append(&server, "s", &["a", "b"]).await;
    let open = |path: &'static str| {
        let request = server.client.get(server.url(path)).header("s2-basin", BASIN);
        async move { SseReader::new(request.header("accept", "text/event-stream").send().await.unwrap()) }
    };
    let mut at_tail = open("/v1/streams/s/records?seq_num=2").await;
    let started = tokio::time::Instant::now();
    let event = at_tail.next(Duration::from_secs(30)).await.unwrap();
    assert_eq!(event.event, "ping", "{}", event.data);
    let ping: Value = serde_json::from_str(&event.data).unwrap();
    assert_eq!(ping["tail"]["seq_num"], json!(2), "{ping}");
    // The quiet-spell heartbeat comes after 5 s; this one as the session gets there.
    assert!(started.elapsed() < Duration::from_secs(4), "pinged after {:?}", started.elapsed());
    let mut behind = open("/v1/streams/s/records?seq_num=0").await;
    let event = behind.next(Duration::from_secs(30)).await.unwrap();
    let batch: Value = serde_json::from_str(&event.data).unwrap();
    assert_eq!((event.event.as_str(), &batch["tail"]["seq_num"]), ("batch", &json!(2)), "{batch}");

    let mut events = open("/v1/streams/s/records?seq_num=2&wait=1").await;
    let mut seen = Vec::new();
    while let Some(event) = events.next(Duration::from_secs(30)).await {
        seen.push(if event.data == "[DONE]" { "[DONE]".to_string() } else { event.event });
    }
    assert_eq!(seen, ["ping", "[DONE]"]);
    server.stop().await;
}

/// Errors the HTTP stack answers by itself still carry S2's JSON body and their own
/// status; bodies over the limit are refused before they are read; messages quote
/// values, not Rust debug output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_is_json_and_oversized_bodies_are_refused_unread() {
    let server = TestServer::start().await;
    setup(&server, &["s"]).await;
    let json_error = |response: reqwest::Response| async move {
        let status = response.status().as_u16();
        let content_type = response.headers()["content-type"].to_str().unwrap().to_string();
        let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert!(content_type.starts_with("application/json"), "{status}: {content_type}");
        (status, body)
    };
    let client = &server.client;

    let (status, body) = json_error(client.put(server.url("/v1/basins")).send().await.unwrap()).await;
    assert_eq!((status, body["code"].as_str()), (405, Some("invalid")), "{body}");

    let big = vec![b'x'; 3 * 1024 * 1024];
    let response = client.post(server.url("/v1/basins")).body(big).send().await.unwrap();
    let (status, body) = json_error(response).await;
    assert_eq!((status, body["code"].as_str()), (413, Some("invalid")), "{body}");

    // Headers announcing a 9 MiB append, and no body at all: the answer comes from the
    // headers alone, so nothing of the body was waited for or buffered.
    let address = server.base.strip_prefix("http://").unwrap();
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST /v1/streams/s/records HTTP/1.1\r\nhost: {address}\r\ns2-basin: {BASIN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        9 * 1024 * 1024
    );
    tokio::io::AsyncWriteExt::write_all(&mut socket, head.as_bytes()).await.unwrap();
    let mut buffer = vec![0; 4096];
    let read = tokio::io::AsyncReadExt::read(&mut socket, &mut buffer);
    let len = tokio::time::timeout(Duration::from_secs(10), read).await.unwrap().unwrap();
    let answer = String::from_utf8_lossy(&buffer[..len]).to_string();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("application/json") && answer.contains("exceeds the limit"), "{answer}");
    // The body was never read, so the connection cannot serve another request: the
    // answer says so rather than letting a client reuse it.
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");

    let response = client
        .get(server.url("/v1/streams/s/records?seq_num=0"))
        .header("s2-basin", BASIN)
        .header("s2-format", "hex")
        .send()
        .await
        .unwrap();
    let (status, body) = json_error(response).await;
    assert_eq!(status, 400);
    assert!(body["message"].as_str().unwrap().contains("got `hex`"), "{body}");
    assert_eq!(tail(&server, "s").await, 0, "nothing was appended");
    server.stop().await;
}

/// A client that never finishes its headers loses its connection after the header
/// deadline; past the connection cap a new connection is answered 503 with S2's JSON
/// body and closed at once, and a slot freed is usable again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_clients_are_dropped_and_connections_are_capped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = TestServer::start_with(|config| {
        config.connections.max_connections = 3;
        config.connections.header_read_timeout = Duration::from_millis(1500);
    })
    .await;
    let address = server.base.strip_prefix("http://").unwrap().to_string();
    let read_to_end = |mut socket: tokio::net::TcpStream| async move {
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut answer)).await;
        String::from_utf8_lossy(&answer).to_string() + if read.is_err() { "<still open>" } else { "" }
    };

    // Three connections that send half a request hold every slot.
    let mut silent = Vec::new();
    for _ in 0..3 {
        let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
        socket.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n").await.unwrap();
        silent.push(socket);
    }
    let fourth = tokio::net::TcpStream::connect(&address).await.unwrap();
    let answer = read_to_end(fourth).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains(r#""code":"unavailable""#), "{answer}");

    // The header deadline closes the silent ones, which frees their slots.
    for socket in silent {
        let answer = read_to_end(socket).await;
        assert!(!answer.contains("<still open>"), "a silent client kept its connection: {answer}");
    }
    let response = server.client.get(server.url("/health")).send().await.unwrap();
    assert_eq!(response.status(), 200);

    // A keep-alive connection left idle after a request is closed after the same deadline.
    let mut idle = tokio::net::TcpStream::connect(&address).await.unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let answer = read_to_end(idle).await;
    assert!(answer.starts_with("HTTP/1.1 200") && !answer.contains("<still open>"), "{answer}");

    // A connection that sends nothing at all is closed after the same deadline, on the
    // HTTP listener and on the gRPC one.
    let grpc_address = server.grpc.strip_prefix("http://").unwrap().to_string();
    for address in [&address, &grpc_address] {
        let socket = tokio::net::TcpStream::connect(address).await.unwrap();
        let answer = read_to_end(socket).await;
        assert!(!answer.contains("<still open>"), "a silent connection to {address} stayed open");
    }
    server.stop().await;
}

/// `shale_object_gets_total` from the server's `/metrics`.
async fn store_gets(server: &TestServer) -> u64 {
    let text = server.client.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap();
    series(&text, "shale_object_gets_total").expect("the GET counter")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_what_the_server_just_wrote_make_no_store_request() {
    for recent_write_bytes in [64 << 20, 0] {
        let server = TestServer::start_with(|config| config.reader.recent_write_bytes = recent_write_bytes).await;
        setup(&server, &["fresh"]).await;
        for i in 0..5 {
            append(&server, "fresh", &[&format!("r{i}a"), &format!("r{i}b")]).await;
        }
        let before = store_gets(&server).await;
        let (status, body) = call(&server, "GET", "/v1/streams/fresh/records?seq_num=0&count=10", None).await;
        assert_eq!(status, 200, "{body}");
        let bodies: Vec<&str> =
            body["records"].as_array().unwrap().iter().map(|r| r["body"].as_str().unwrap()).collect();
        let expected: Vec<String> = (0..5).flat_map(|i| [format!("r{i}a"), format!("r{i}b")]).collect();
        assert_eq!(bodies, expected);
        let made = store_gets(&server).await - before;
        if recent_write_bytes > 0 {
            assert_eq!(made, 0, "the segments just written are read from memory");
        } else {
            assert!(made >= 1, "with recent_write_bytes = 0 the same read goes to the store");
        }
    }
}
