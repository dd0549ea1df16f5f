//! The real `shale serve` process: the embedded default store, SIGTERM, restart.

#![allow(clippy::unwrap_used)]

mod common;

use common::{start, terminate};
use serde_json::{json, Value};

#[tokio::test]
async fn serve_stores_under_shale_data_and_survives_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (child, base, _grpc) = start(dir.path());
    let r = client.post(format!("{base}/v1/basins")).json(&json!({ "basin": "proc-basin" })).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let r = client
        .post(format!("{base}/v1/streams"))
        .header("s2-basin", "proc-basin")
        .json(&json!({ "stream": "s" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    for i in 0..20 {
        let r = client
            .post(format!("{base}/v1/streams/s/records"))
            .header("s2-basin", "proc-basin")
            .json(&json!({ "records": [{ "body": format!("r{i}") }] }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let status = terminate(child);
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    assert!(dir.path().join("shale-data/segments").is_dir(), "segments live under ./shale-data");

    let (child, base, _grpc) = start(dir.path());
    let read: Value = client
        .get(format!("{base}/v1/streams/s/records?seq_num=0"))
        .header("s2-basin", "proc-basin")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bodies: Vec<&str> = read["records"].as_array().unwrap().iter().map(|r| r["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, (0..20).map(|i| format!("r{i}")).collect::<Vec<_>>());
    assert!(terminate(child).success());
}

#[tokio::test]
async fn acked_appends_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (mut child, base, _grpc) = start(dir.path());
    client.post(format!("{base}/v1/basins")).json(&json!({ "basin": "crash-basin" })).send().await.unwrap();
    let r = client
        .post(format!("{base}/v1/streams"))
        .header("s2-basin", "crash-basin")
        .json(&json!({ "stream": "s" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    for i in 0..10 {
        let r = client
            .post(format!("{base}/v1/streams/s/records"))
            .header("s2-basin", "crash-basin")
            .json(&json!({ "records": [{ "body": format!("r{i}") }] }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // No shutdown path runs: every acknowledged record must already be durable.
    child.kill().unwrap();
    child.wait().unwrap();

    let (child, base, _grpc) = start(dir.path());
    let read: Value = client
        .get(format!("{base}/v1/streams/s/records?seq_num=0"))
        .header("s2-basin", "crash-basin")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bodies: Vec<&str> = read["records"].as_array().unwrap().iter().map(|r| r["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, (0..10).map(|i| format!("r{i}")).collect::<Vec<_>>());
    assert!(terminate(child).success());
}

#[tokio::test]
async fn a_second_server_on_the_same_store_fences_the_first_which_exits() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (mut first, first_base, _grpc) = start(dir.path());
    let r =
        client.post(format!("{first_base}/v1/basins")).json(&json!({ "basin": "fence-basin" })).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let (second, second_base, _grpc) = start(dir.path());

    // The first server's next write finds it was fenced: 503, and the process exits.
    let r = client
        .post(format!("{first_base}/v1/streams"))
        .header("s2-basin", "fence-basin")
        .json(&json!({ "stream": "late" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "fenced");
    let status = tokio::task::spawn_blocking(move || first.wait().unwrap()).await.unwrap();
    assert!(!status.success(), "a fenced server exits with an error");

    // The new one carries on with the durable state.
    let r = client
        .post(format!("{second_base}/v1/streams"))
        .header("s2-basin", "fence-basin")
        .json(&json!({ "stream": "late" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert!(terminate(second).success());
}
