//! What a client is told when something goes wrong outside its request: S2's JSON error
//! body always, and nothing about the server's own disk.

#![allow(clippy::unwrap_used)]

use serde_json::{json, Value};
use shale_tests::TestServer;

const BASIN: &str = "errors-basin";

async fn call(server: &TestServer, method: &str, path: &str, body: Option<Value>) -> (u16, String) {
    let mut request = server.client.request(method.parse().unwrap(), server.url(path)).header("s2-basin", BASIN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// A segment lost from a local store: the read fails with S2's JSON body, naming the
/// object's key but not where the data directory is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_names_no_local_path() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let url = format!("file://{}", root.display());
    // Without the recent writes kept in memory, which would answer the read below from
    // what the server wrote.
    let server = TestServer::start_with(|config| {
        config.store = Some(url);
        config.reader.recent_write_bytes = 0;
    })
    .await;
    assert_eq!(call(&server, "POST", "/v1/basins", Some(json!({ "basin": BASIN }))).await.0, 201);
    assert_eq!(call(&server, "POST", "/v1/streams", Some(json!({ "stream": "s" }))).await.0, 201);
    let (status, _) =
        call(&server, "POST", "/v1/streams/s/records", Some(json!({ "records": [{ "body": "x" }] }))).await;
    assert_eq!(status, 200);
    for segment in std::fs::read_dir(root.join("segments")).unwrap() {
        std::fs::remove_file(segment.unwrap().path()).unwrap();
    }

    let (status, text) = call(&server, "GET", "/v1/streams/s/records?seq_num=0", None).await;
    assert!(status >= 500, "{status} {text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("segments/"), "names the object: {message}");
    assert!(!message.contains(&root.display().to_string()), "names a local path: {message}");
    server.stop().await;
}

/// Too many headers, or headers too large: 431 with S2's JSON body, over HTTP/1.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_get_a_json_431() {
    let server = TestServer::start().await;
    let many = (0..150)
        .fold(server.client.get(server.url("/v1/basins")), |request, i| request.header(format!("x-extra-{i}"), "v"));
    let large = server.client.get(server.url("/v1/basins")).header("x-large", "v".repeat(100 * 1024));
    for request in [many, large] {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 431);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "invalid", "{body}");
        assert!(body["message"].as_str().unwrap().contains("headers too large"), "{body}");
    }
    server.stop().await;
}
