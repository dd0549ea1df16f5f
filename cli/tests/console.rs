//! The web console: its pages and session answer, then the console driven in headless
//! Chromium (Playwright) against a real `shale serve` with access control on, and S2's
//! TypeScript SDK ensuring a stream (its answer header read across origins), appending
//! and reading from a page of another origin (CORS).
//!
//! The browser test needs Debian's `chromium` and `npm ci` in `cli/tests/browser`
//! (`.ci/run` and `scripts/test.sh` do both). Screenshots go to a temporary directory, or
//! to `SHALE_CONSOLE_SCREENSHOTS` (`docs/console/` refreshes the ones the docs show).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{spawn, terminate};
use serde_json::{json, Value};

const ROOT: &str = "console-root-token-0123456789";

fn serve(dir: &std::path::Path) -> (std::process::Child, String) {
    let (child, http, _) =
        spawn(dir, &["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"], &[("SHALE_ROOT_TOKEN", ROOT.into())]);
    (child, http)
}

/// `GET base + path` with `token`, and the basin header when there is one.
async fn get(base: &str, path: &str, token: &str, basin: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(format!("{base}{path}")).bearer_auth(token);
    if let Some(basin) = basin {
        request = request.header("s2-basin", basin);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn the_page_is_open_and_the_session_says_what_a_token_may_do() {
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = serve(dir.path());
    let client = reqwest::Client::new();
    for (path, kind) in [("/console", "text/html"), ("/console/static/console.js", "text/javascript")] {
        let r = client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with(kind), "{path}");
    }
    let process: Value = client.get(format!("{base}/console/process.json")).send().await.unwrap().json().await.unwrap();
    assert_eq!(process["role"], "all-in-one");
    assert_eq!(process["client_api"], true);

    let session = client.get(format!("{base}/console/session")).send().await.unwrap();
    assert_eq!(session.status(), 401, "the session answered without a token");
    let root: Value = get(&base, "/console/session", ROOT, None).await.json().await.unwrap();
    assert_eq!(root["auth"], true);
    assert!(root["operations"].as_array().unwrap().contains(&json!("append")), "{root}");

    let issued: Value = client
        .post(format!("{base}/v1/access-tokens"))
        .bearer_auth(ROOT)
        .json(&json!({ "id": "viewer", "scope": { "basins": { "prefix": "" }, "streams": { "prefix": "" },
            "op_groups": { "account": { "read": true }, "stream": { "read": true } } } }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let viewer = issued["access_token"].as_str().unwrap();
    let session: Value = get(&base, "/console/session", viewer, None).await.json().await.unwrap();
    let operations = session["operations"].as_array().unwrap();
    assert_eq!(session["token"], "viewer");
    assert!(operations.contains(&json!("read")) && operations.contains(&json!("list-basins")), "{session}");
    assert!(!operations.contains(&json!("append")) && !operations.contains(&json!("delete-stream")), "{session}");
    terminate(server);
}

#[tokio::test]
async fn the_console_in_a_browser_and_the_s2_sdk_over_cors() {
    let browser_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    assert!(
        browser_dir.join("node_modules/playwright-core").exists(),
        "run `npm ci` in {} (scripts/test.sh does)",
        browser_dir.display()
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(std::path::Path::new(&chromium).exists(), "{chromium} missing: apt-get install chromium");
    let shots_temp = tempfile::tempdir().unwrap();
    let shots =
        std::env::var("SHALE_CONSOLE_SCREENSHOTS").map_or_else(|_| shots_temp.path().to_path_buf(), PathBuf::from);

    let dir = tempfile::tempdir().unwrap();
    let (server, base) = serve(dir.path());
    let out = Command::new("node")
        .arg("console.mjs")
        .current_dir(&browser_dir)
        .env("SHALE_HTTP", &base)
        .env("SHALE_ROOT_TOKEN", ROOT)
        .env("SCREENSHOTS", &shots)
        .env("CHROMIUM", &chromium)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the browser test failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let measured: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    println!("console: {measured}");
    assert!(measured["live_ms"].as_u64().unwrap() < 1000, "{measured}");

    // What the browser did, seen from outside it.
    let read: Value = get(&base, "/v1/streams/from-the-browser/records?seq_num=0", ROOT, Some("console-demo"))
        .await
        .json()
        .await
        .unwrap();
    let bodies: Vec<&str> = read["records"].as_array().unwrap().iter().map(|r| r["body"].as_str().unwrap()).collect();
    assert_eq!(bodies, ["appended by the SDK in a browser", "and a second record"]);
    let gone = get(&base, "/v1/streams/made-in-console", ROOT, Some("console-demo")).await;
    assert_eq!(gone.status(), 404, "the stream the console deleted is still there");
    for page in ["token-refused", "basins", "basin", "stream", "metrics", "tables", "cluster", "read-only"] {
        let size = std::fs::metadata(shots.join(format!("{page}.png"))).map(|m| m.len()).unwrap_or(0);
        assert!(size > 10_000, "no screenshot of {page}");
    }
    terminate(server);
}
