//! The real `shale serve` process: the embedded default store, SIGTERM, restart.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

/// Starts `shale serve` in `dir` on a free loopback port; returns it and its address,
/// read from the log line that says where it listens.
fn start(dir: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .current_dir(dir)
        .env("SHALE_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let addr = loop {
        let line = lines.next().expect("shale exited before listening").unwrap();
        let plain: String = strip_ansi(&line);
        if let Some(rest) = plain.split("http=").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep draining the log so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, format!("http://{addr}"))
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn terminate(mut child: Child) -> std::process::ExitStatus {
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap()
}

#[tokio::test]
async fn serve_stores_under_shale_data_and_survives_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (child, base) = start(dir.path());
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

    let (child, base) = start(dir.path());
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
