//! The real `shale serve` process: the embedded default store, SIGTERM, crash, restart,
//! takeover.

#![allow(clippy::unwrap_used)]

mod common;

use common::{shale, spawn, spawn_client, spawn_logged, start, terminate};
use serde_json::{json, Value};

/// Creates `basin` and its `stream`.
async fn create_stream(client: &reqwest::Client, base: &str, basin: &str, stream: &str) {
    let r = client.post(format!("{base}/v1/basins")).json(&json!({ "basin": basin })).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let r = client
        .post(format!("{base}/v1/streams"))
        .header("s2-basin", basin)
        .json(&json!({ "stream": stream }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
}

/// Creates `basin` and its stream `s`, then appends `r0..r{count}` one record at a time.
async fn write_records(client: &reqwest::Client, base: &str, basin: &str, count: usize) {
    create_stream(client, base, basin, "s").await;
    for i in 0..count {
        assert_eq!(append(client, base, basin, "s", &format!("r{i}")).await, 200);
    }
}

/// Appends one record with `body`; answers the status.
async fn append(client: &reqwest::Client, base: &str, basin: &str, stream: &str, body: &str) -> reqwest::StatusCode {
    let r = client
        .post(format!("{base}/v1/streams/{stream}/records"))
        .header("s2-basin", basin)
        .json(&json!({ "records": [{ "body": body }] }))
        .send()
        .await
        .unwrap();
    r.status()
}

/// Every body of stream `s`, from the start.
async fn read_bodies(client: &reqwest::Client, base: &str, basin: &str) -> Vec<String> {
    read_stream_bodies(client, base, basin, "s").await
}

/// Every body of `stream`, from the start.
async fn read_stream_bodies(client: &reqwest::Client, base: &str, basin: &str, stream: &str) -> Vec<String> {
    let read: Value = client
        .get(format!("{base}/v1/streams/{stream}/records?seq_num=0"))
        .header("s2-basin", basin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    read["records"].as_array().unwrap().iter().map(|r| r["body"].as_str().unwrap().to_string()).collect()
}

fn expected(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("r{i}")).collect()
}

#[tokio::test]
async fn serve_stores_under_shale_data_and_survives_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (child, base, _grpc) = start(dir.path());
    write_records(&client, &base, "proc-basin", 20).await;
    let status = terminate(child);
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    assert!(dir.path().join("shale-data/segments").is_dir(), "segments live under ./shale-data");

    let (child, base, _grpc) = start(dir.path());
    assert_eq!(read_bodies(&client, &base, "proc-basin").await, expected(20));
    assert!(terminate(child).success());
}

#[tokio::test]
async fn acked_appends_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (mut child, base, _grpc) = start(dir.path());
    write_records(&client, &base, "crash-basin", 10).await;
    // No shutdown path runs: every acknowledged record must already be durable.
    child.kill().unwrap();
    child.wait().unwrap();

    let (child, base, _grpc) = start(dir.path());
    assert_eq!(read_bodies(&client, &base, "crash-basin").await, expected(10));
    assert!(terminate(child).success());
}

/// On a local directory a long block is read by mapping its segment file: the block the
/// read left in the block cache is a mapping of the file (the page cache's bytes), not a
/// copy in the server's own memory, and it reads back exactly what was appended.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_long_block_on_a_local_directory_is_read_through_a_mapping_of_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (child, base, _grpc) = start(dir.path());
    create_stream(&client, &base, "map-basin", "long").await;
    // Four records of 40 KiB in one append: one block of 160 KiB, past the 64 KiB mapped.
    let bodies: Vec<String> = (0..4).map(|i| format!("{i}").repeat(40 * 1024)).collect();
    let records: Vec<Value> = bodies.iter().map(|body| json!({ "body": body })).collect();
    let r = client
        .post(format!("{base}/v1/streams/long/records"))
        .header("s2-basin", "map-basin")
        .json(&json!({ "records": records }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let segments = dir.path().join("shale-data/segments").canonicalize().unwrap();
    let mapped = || {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", child.id())).unwrap();
        maps.lines().filter(|line| line.contains(segments.to_str().unwrap())).count()
    };
    assert_eq!(mapped(), 0, "nothing read yet");
    assert_eq!(read_stream_bodies(&client, &base, "map-basin", "long").await, bodies);
    assert_eq!(mapped(), 1, "the cached block is a mapping of its segment file");
    assert!(terminate(child).success());
}

/// A server on a local directory leaves one core to blocking work (file writes and their
/// fsyncs): one worker fewer than the machine's cores, at least one; on another store every
/// core runs a worker; tokio's `TOKIO_WORKER_THREADS` overrides both. `/metrics` tells.
#[tokio::test]
async fn the_runtime_leaves_a_core_to_file_writes_on_a_directory_unless_the_environment_says() {
    let workers = |base: String| async move {
        let text = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
        shale_tests::series::<usize>(&text, "shale_runtime_workers").unwrap_or_else(|| panic!("{text}"))
    };
    let cores = std::thread::available_parallelism().unwrap().get();
    let dir = tempfile::tempdir().unwrap();
    let (child, base, _grpc) = start(dir.path());
    assert_eq!(workers(base).await, cores.saturating_sub(1).max(1));
    assert!(terminate(child).success());
    let args = ["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    let (child, base, _grpc) = spawn(dir.path(), &args, &[("TOKIO_WORKER_THREADS", "3".to_string())]);
    assert_eq!(workers(base).await, 3);
    assert!(terminate(child).success());
    let in_memory = ["serve", "--store", "memory://", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    let (child, base, _grpc) = spawn(dir.path(), &in_memory, &[]);
    assert_eq!(workers(base).await, cores);
    assert!(terminate(child).success());
}

/// One server per local data directory: a second `shale serve` there is refused with a
/// message that names the owner and `--takeover`; with `--takeover` the first drains and
/// stops, and the second carries on from the durable state. Two servers never answer
/// from one directory at once (the first would otherwise serve reads from a view the
/// second had fenced).
#[tokio::test]
async fn a_second_server_on_a_data_directory_is_refused_or_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (first, first_base, _grpc) = start(dir.path());
    let r =
        client.post(format!("{first_base}/v1/basins")).json(&json!({ "basin": "fence-basin" })).send().await.unwrap();
    assert_eq!(r.status(), 201);

    let refused = shale()
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains(&format!("process {}", first.id())) && message.contains("--takeover"), "{message}");
    let r = client.get(format!("{first_base}/v1/basins/fence-basin")).send().await.unwrap();
    assert_eq!(r.status(), 200, "the first server is untouched");

    let (second, second_base, _grpc) =
        spawn(dir.path(), &["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--takeover"], &[]);
    let mut first = first;
    let status = tokio::task::spawn_blocking(move || first.wait().unwrap()).await.unwrap();
    assert!(status.success(), "the first server stopped cleanly when asked");
    let r = client.get(format!("{first_base}/v1/basins/fence-basin")).send().await;
    assert!(r.is_err(), "and answers nothing any more");
    let r = client
        .post(format!("{second_base}/v1/streams"))
        .header("s2-basin", "fence-basin")
        .json(&json!({ "stream": "late" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "the second carries on with the durable state");
    assert!(terminate(second).success());
}

/// Waits (bounded) until `base` answers `/ready` with 200.
async fn wait_ready(client: &reqwest::Client, base: &str) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(format!("{base}/ready")).send().await {
            if r.status() == 200 {
                return;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "{base} never became ready");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Two `shale serve` on one S3 bucket (no directory to lock): the second fences the
/// first, which must stop answering before the second answers anything, and exit
/// non-zero, instead of serving reads from the view it had when fenced.
#[tokio::test]
async fn a_serve_fenced_on_a_shared_store_stops_answering_and_exits() {
    let cluster = common::cluster::Cluster::new("").await;
    let args = ["serve", "--store", &cluster.store_url, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    let client = reqwest::Client::new();
    let (first, first_base, _grpc) = spawn(cluster.dir.path(), &args, &cluster.env);
    wait_ready(&client, &first_base).await;
    write_records(&client, &first_base, "shared-basin", 1).await;

    let (second, second_base, _grpc) = spawn(cluster.dir.path(), &args, &cluster.env);
    wait_ready(&client, &second_base).await;
    assert_eq!(append(&client, &second_base, "shared-basin", "s", "r1").await, 200, "the second server writes");
    assert_eq!(read_bodies(&client, &second_base, "shared-basin").await, expected(2));

    // From here on the first server's view is stale: it may refuse, or be gone, never answer.
    let mut first = first;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = first.try_wait().unwrap() {
            break status;
        }
        assert!(tokio::time::Instant::now() < deadline, "the fenced server kept running");
        if let Ok(r) = client
            .get(format!("{first_base}/v1/streams/s/records/tail"))
            .header("s2-basin", "shared-basin")
            .send()
            .await
        {
            assert_ne!(r.status(), 200, "a fenced server answered a check-tail: {:?}", r.text().await);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(!status.success(), "a fenced server exits non-zero: {status}");
    assert!(terminate(second).success());
}

/// Server logs go to stderr (stdout stays empty), without color codes when stderr is not
/// a terminal; the start line names the version and the config source, and each request
/// gets one line at info with its route, basin, status and latency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_go_to_stderr_with_one_line_per_request() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let mut child = shale()
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .current_dir(dir.path())
        .env("SHALE_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            if lines_tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let next_matching = |pattern: &str| -> String {
        loop {
            let line = lines.recv_timeout(Duration::from_secs(20)).expect("the log line in time");
            assert!(!line.contains('\u{1b}'), "no color codes when not on a terminal: {line:?}");
            if line.contains(pattern) {
                return line;
            }
        }
    };
    let serving = next_matching("shale serving");
    assert!(serving.contains("version=") && serving.contains("config=defaults"), "{serving}");
    let http = serving.split("http=").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
    let client = reqwest::Client::new();
    let created =
        client.post(format!("http://{http}/v1/basins")).json(&json!({ "basin": "logged-basin" })).send().await.unwrap();
    assert_eq!(created.status(), 201);
    let line = next_matching("finished processing request");
    assert!(line.contains("path=/v1/basins") && line.contains("status=201") && line.contains("latency="), "{line}");
    let mut stdout = child.stdout.take().unwrap();
    let status = terminate(child);
    assert!(status.success());
    let mut printed = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut printed).unwrap();
    assert_eq!(printed, "", "nothing on stdout");
}

#[test]
fn roles_refuse_to_start_without_a_store() {
    for args in [
        vec!["gateway", "--metadata", "127.0.0.1:1"],
        vec!["reader", "--metadata", "127.0.0.1:1"],
        vec!["metadata"],
        vec!["compactor", "--metadata", "127.0.0.1:1"],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let output = common::shale().args(&args).current_dir(dir.path()).env_remove("SHALE_STORE").output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} started without a store");
        assert!(stderr.contains("--store"), "{args:?}: {stderr}");
        assert!(!dir.path().join("shale-data").exists(), "{args:?} created a local store");
    }
}

/// SIGTERM with live reads open: each ends at once with S2's error (an SSE `error` event
/// with `server_draining`; gRPC `UNAVAILABLE`, on which `shale read` exits 6 naming the
/// shutdown), and the server exits 0 without waiting out its drain bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_live_reads_with_their_error_and_stops_without_waiting() {
    use std::io::{BufRead, BufReader};
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let args = ["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    let (mut server, http, grpc, logs) = spawn_logged(dir.path(), &args, &[]);
    let client = reqwest::Client::new();
    write_records(&client, &http, "draining-basin", 1).await;

    let mut follower = spawn_client(&["read", "draining-basin/s", "--seq-num", "0"], &grpc);
    let mut first = String::new();
    BufReader::new(follower.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert_eq!(first, "r0\n", "the CLI's session is open");

    let mut sse = client
        .get(format!("{http}/v1/streams/s/records?seq_num=0"))
        .header("s2-basin", "draining-basin")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let mut events = String::new();
    while !events.contains("event: batch") {
        events += &String::from_utf8_lossy(&sse.chunk().await.unwrap().unwrap());
    }

    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let rest = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = sse.chunk().await.unwrap() {
            events += &String::from_utf8_lossy(&chunk);
        }
        events
    });
    let events = rest.await.expect("the SSE read ends");
    assert!(events.contains("event: error") && events.contains("server_draining"), "{events}");

    let output = tokio::task::spawn_blocking(move || follower.wait_with_output().unwrap()).await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("shutting down"), "{stderr}");
    assert!(tokio::task::spawn_blocking(move || server.wait().unwrap()).await.unwrap().success());
    let logged: Vec<String> = logs.iter().collect();
    assert!(logged.iter().any(|line| line.contains("stopped")), "{logged:#?}");
    assert!(!logged.iter().any(|line| line.contains("did not finish")), "reads were not cut at the bound: {logged:#?}");
}

/// Every role refuses a local directory `shale serve` holds, naming the serve's process,
/// and leaves the directory as it was; a start that fails on a busy port creates
/// nothing, not even its data directory.
#[tokio::test]
async fn every_role_refuses_a_directory_serve_holds_and_a_failed_start_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let (server, base, _grpc) = start(dir.path());
    let data = dir.path().join("shale-data");
    let lock_before = std::fs::read_to_string(data.join("shale.lock")).unwrap();
    let entries = |path: &std::path::Path| {
        let mut names: Vec<String> =
            std::fs::read_dir(path).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    let top_before = entries(&data);
    let data_arg = data.display().to_string();
    let ports = ["--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    for role in [
        vec!["metadata"],
        vec!["gateway", "--metadata", "127.0.0.1:1"],
        vec!["reader", "--metadata", "127.0.0.1:1"],
        vec!["compactor", "--metadata", "127.0.0.1:1", "--http", "127.0.0.1:0"],
        vec!["serve"],
    ] {
        let mut args = role.clone();
        args.extend(["--data-dir", &data_arg]);
        if role[0] != "compactor" {
            args.extend(ports);
        }
        let refused = shale().args(&args).output().unwrap();
        let message = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{role:?} started on a held directory");
        assert!(message.contains(&format!("process {} (shale serve)", server.id())), "{role:?}: {message}");
        assert_eq!(std::fs::read_to_string(data.join("shale.lock")).unwrap(), lock_before, "{role:?}");
        assert_eq!(entries(&data), top_before, "{role:?} changed the directory");
    }
    let r = client.get(format!("{base}/ready")).send().await.unwrap();
    assert_eq!(r.status(), 200, "the server is untouched");

    // The server's port is busy: each role fails before making its directory.
    let busy = base.trim_start_matches("http://").to_string();
    for role in [
        vec!["serve", "--grpc", "127.0.0.1:0"],
        vec!["metadata", "--grpc", "127.0.0.1:0"],
        vec!["gateway", "--metadata", "127.0.0.1:1", "--grpc", "127.0.0.1:0"],
        vec!["reader", "--metadata", "127.0.0.1:1", "--grpc", "127.0.0.1:0"],
        vec!["compactor", "--metadata", "127.0.0.1:1"],
    ] {
        let fresh = dir.path().join(format!("fresh-{}", role[0]));
        let mut args = role.clone();
        let fresh_arg = fresh.display().to_string();
        args.extend(["--http", &busy, "--data-dir", &fresh_arg]);
        let failed = shale().args(&args).output().unwrap();
        assert!(!failed.status.success(), "{role:?} started on a busy port");
        assert!(String::from_utf8_lossy(&failed.stderr).contains(&busy), "{role:?} names the address");
        assert!(!fresh.exists(), "{role:?} created {}", fresh.display());
    }
    assert!(terminate(server).success());
}

/// A gRPC append and read each write one request line at info naming the role, the
/// method, the basin, the status and the latency; a caller's mistake (a missing stream)
/// is logged at info, never at error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_write_one_request_line_with_their_basin_at_a_level_by_fault() {
    use shale_proto::grpc as pb;
    use shale_proto::grpc::records_client::RecordsClient;
    use std::time::Duration;

    let dir = tempfile::tempdir().unwrap();
    let args = ["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    let (server, http, grpc, logs) = spawn_logged(dir.path(), &args, &[]);
    let client = reqwest::Client::new();
    let body = json!({ "basin": "grpc-log-basin", "config": { "create_stream_on_append": true } });
    assert_eq!(client.post(format!("{http}/v1/basins")).json(&body).send().await.unwrap().status(), 201);

    let mut records = RecordsClient::connect(grpc.clone()).await.unwrap();
    let record = pb::AppendRecord { body: b"logged".to_vec().into(), ..Default::default() };
    let append = pb::AppendRequest {
        basin: "grpc-log-basin".into(),
        stream: "s".into(),
        records: vec![record],
        ..Default::default()
    };
    records.append(append).await.unwrap();
    let read = pb::ReadRequest { basin: "grpc-log-basin".into(), stream: "s".into(), ..Default::default() };
    records.read(read.clone()).await.unwrap();
    let missing = records.read(pb::ReadRequest { stream: "missing".into(), ..read }).await.unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);

    let mut lines = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let wanted = |lines: &[String], method: &str, status: &str| {
        lines
            .iter()
            .filter(|l| l.contains(&format!("method=/shale.v1.Records/{method} ")) && l.contains(status))
            .count()
    };
    while wanted(&lines, "Read", "status=NotFound") == 0 {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        lines.push(logs.recv_timeout(left).expect("the request lines in time"));
    }
    for (method, status) in [("Append", "status=Ok"), ("Read", "status=Ok"), ("Read", "status=NotFound")] {
        let line = lines
            .iter()
            .find(|l| l.contains(&format!("method=/shale.v1.Records/{method} ")) && l.contains(status))
            .unwrap_or_else(|| panic!("no {method} {status} line in {lines:#?}"));
        assert!(line.contains(" INFO "), "{line}");
        assert!(line.contains("role=") && line.contains("all-in-one"), "{line}");
        assert!(line.contains("basin=grpc-log-basin") && line.contains("latency_us="), "{line}");
    }
    assert_eq!(wanted(&lines, "Append", "status=Ok"), 1, "one line per call: {lines:#?}");
    assert!(!lines.iter().any(|l| l.contains(" ERROR ")), "{lines:#?}");
    assert!(terminate(server).success());
}

/// A store whose bucket does not exist stops every role at start with one line that
/// names the bucket and says to create it (not S3's XML, once per layer it went through).
#[tokio::test]
async fn a_missing_bucket_is_one_line_naming_it() {
    let moto = shale_tests::Moto::shared().await;
    let dir = tempfile::tempdir().unwrap();
    for role in [vec!["serve"], vec!["metadata"], vec!["gateway", "--metadata", "127.0.0.1:1"]] {
        let mut args = role.clone();
        args.extend(["--store", "s3://no-such-bucket-here/shale", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"]);
        let output =
            shale().args(&args).current_dir(dir.path()).envs(moto.env()).env("SHALE_LOG", "warn").output().unwrap();
        assert!(!output.status.success(), "{role:?} started");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let error: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(error.len(), 1, "{role:?}: {stderr}");
        assert!(error[0].contains("`no-such-bucket-here` does not exist: create it first"), "{role:?}: {stderr}");
        assert!(!stderr.contains("<Error>"), "{role:?}: {stderr}");
    }
}

/// A browser preflight from another origin (S2's TypeScript SDK in a page) is answered
/// before authentication with what the page asked for, `Authorization` included; the
/// call itself then needs its token like any other and its answer carries the CORS
/// headers. With `--no-cors` a preflight is a call like any other (here 401: no token),
/// and no answer carries a CORS header.
#[tokio::test]
async fn browser_pages_reach_the_api_through_cors_unless_turned_off() {
    const ROOT: &str = "cors-root-token-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let token = [("SHALE_ROOT_TOKEN", ROOT.to_string())];
    let (child, base, _grpc) = spawn(dir.path(), &["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"], &token);
    let origin = "http://localhost:5173";
    let preflight = client
        .request(reqwest::Method::OPTIONS, format!("{base}/v1/basins"))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "authorization,content-type,s2-request-token")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 200);
    let header = |name: &str| preflight.headers().get(name).map(|v| v.to_str().unwrap().to_string());
    assert_eq!(header("access-control-allow-origin").as_deref(), Some("*"));
    assert!(header("access-control-allow-methods").unwrap().contains("POST"));
    assert_eq!(header("access-control-allow-headers").as_deref(), Some("authorization,content-type,s2-request-token"));

    let unauthenticated = client.get(format!("{base}/v1/basins")).header("origin", origin).send().await.unwrap();
    assert_eq!(unauthenticated.status(), 401, "a page needs a token like any client");
    let listed =
        client.get(format!("{base}/v1/basins")).header("origin", origin).bearer_auth(ROOT).send().await.unwrap();
    assert_eq!(listed.status(), 200);
    assert_eq!(listed.headers()["access-control-allow-origin"], "*");
    assert!(terminate(child).success());

    let args = ["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--no-cors"];
    let (child, base, _grpc) = spawn(dir.path(), &args, &token);
    let preflight = client
        .request(reqwest::Method::OPTIONS, format!("{base}/v1/basins"))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 401, "answered like any call without its token");
    assert!(preflight.headers().get("access-control-allow-origin").is_none());
    assert!(terminate(child).success());
}

/// The init file creates what it declares at start; changed and started again, it
/// reconfigures what changed (a `null` setting back to its default) and creates what is
/// new, and touches nothing else (a stream created through the API, records); a bad file
/// stops the start with its line.
#[tokio::test]
async fn the_init_file_creates_and_reconciles_basins_and_streams_at_every_start() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let file = dir.path().join("init.json");
    let spec = |retention: &str, extra: &str| {
        format!(
            "{{\"basins\": [{{\"name\": \"init-basin\", \"config\": {{\"create_stream_on_read\": true}},\n\
             \"streams\": [{{\"name\": \"orders\", \"config\": {{\"retention_policy\": {retention}}}}}{extra}]}}]}}\n"
        )
    };
    std::fs::write(&file, spec("{\"age\": 3600}", "")).unwrap();
    let args = ["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--init-file", "init.json"];
    let (child, base, _grpc) = spawn(dir.path(), &args, &[]);
    let basin: Value = client.get(format!("{base}/v1/basins/init-basin")).send().await.unwrap().json().await.unwrap();
    assert_eq!(basin["create_stream_on_read"], true, "{basin}");
    let stream_config = |base: String, stream: &'static str| {
        let client = client.clone();
        async move {
            let r = client.get(format!("{base}/v1/streams/{stream}")).header("s2-basin", "init-basin").send().await;
            r.unwrap().json::<Value>().await.unwrap()
        }
    };
    assert_eq!(stream_config(base.clone(), "orders").await["retention_policy"], json!({ "age": 3600 }));
    // Not in the file: created through the API, with a record.
    let r = client
        .post(format!("{base}/v1/streams"))
        .header("s2-basin", "init-basin")
        .json(&json!({ "stream": "manual", "config": { "retention_policy": { "age": 60 } } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(append(&client, &base, "init-basin", "orders", "kept").await, 200);
    assert!(terminate(child).success());

    std::fs::write(&file, spec("{\"age\": 7200}", ", {\"name\": \"refunds\"}")).unwrap();
    let (child, base, _grpc) = spawn(dir.path(), &args, &[]);
    assert_eq!(stream_config(base.clone(), "orders").await["retention_policy"], json!({ "age": 7200 }));
    let created = stream_config(base.clone(), "refunds").await;
    assert_eq!(created["retention_policy"], json!({ "infinite": {} }), "created with the defaults: kept until trimmed");
    assert_eq!(stream_config(base.clone(), "manual").await["retention_policy"], json!({ "age": 60 }), "untouched");
    assert_eq!(read_stream_bodies(&client, &base, "init-basin", "orders").await, ["kept"]);
    assert!(terminate(child).success());

    // `null` sets the stream's retention back to its default, as a PATCH does.
    std::fs::write(&file, spec("null", "")).unwrap();
    let (child, base, _grpc) = spawn(dir.path(), &args, &[]);
    assert_eq!(stream_config(base.clone(), "orders").await["retention_policy"], json!({ "infinite": {} }));
    assert!(terminate(child).success());

    // A bad file: nothing starts, and the error names the line.
    std::fs::write(&file, "{\"basins\": [\n  {\"name\": \"init-basin\",\n   \"streams\": [{\"name\": \"\"}]}\n]}\n")
        .unwrap();
    let output = common::shale().args(args).current_dir(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started with a bad init file");
    assert!(stderr.contains("init.json") && stderr.contains("line 3"), "{stderr}");
}

/// Access tokens in the init file: issued with the secret from the named variable,
/// scoped as declared; a changed scope or secret is applied at the next start (the old
/// secret refused); a missing variable stops the start with the line at fault.
#[tokio::test]
async fn the_init_file_declares_access_tokens_with_secrets_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let file = dir.path().join("init.json");
    let spec = |append: bool| {
        format!(
            "{{\"basins\": [{{\"name\": \"init-tokens\", \"streams\": [{{\"name\": \"orders\"}}]}}],\n\
             \"access_tokens\": [{{\"secret_env\": \"ORDERS_SECRET\",\n\
             \"token\": {{\"id\": \"orders-app\", \"scope\": {{\"basins\": {{\"exact\": \"init-tokens\"}},\n\
             \"streams\": {{\"prefix\": \"\"}}, \"op_groups\": {{\"stream\": {{\"read\": true, \"write\": {append}}}}}}}}}}}]}}\n"
        )
    };
    let root = ("SHALE_ROOT_TOKEN", "init-root-token-0123456789".to_string());
    let first_secret = "orders-app-secret-0123456789".to_string();
    let second_secret = "orders-app-secret-9876543210".to_string();
    let args = ["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--init-file", "init.json"];
    let append_as = |base: String, secret: String| {
        let client = client.clone();
        async move {
            client
                .post(format!("{base}/v1/streams/orders/records"))
                .bearer_auth(secret)
                .header("s2-basin", "init-tokens")
                .json(&json!({ "records": [{ "body": "x" }] }))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let read_as = |base: String, secret: String| {
        let client = client.clone();
        async move {
            let url = format!("{base}/v1/streams/orders/records?seq_num=0");
            let r = client.get(url).bearer_auth(secret).header("s2-basin", "init-tokens").send().await.unwrap();
            r.status().as_u16()
        }
    };

    std::fs::write(&file, spec(false)).unwrap();
    let env = [root.clone(), ("ORDERS_SECRET", first_secret.clone())];
    let (child, base, _) = spawn(dir.path(), &args, &env);
    assert_eq!(read_as(base.clone(), first_secret.clone()).await, 200);
    assert_eq!(append_as(base.clone(), first_secret.clone()).await, 403, "the declared scope reads only");
    assert!(terminate(child).success());

    // The scope widened, the same secret: appends now pass.
    std::fs::write(&file, spec(true)).unwrap();
    let (child, base, _) = spawn(dir.path(), &args, &env);
    assert_eq!(append_as(base.clone(), first_secret.clone()).await, 200);
    assert!(terminate(child).success());

    // The secret changed: the old one is refused, the new one works.
    let env = [root.clone(), ("ORDERS_SECRET", second_secret.clone())];
    let (child, base, _) = spawn(dir.path(), &args, &env);
    assert_eq!(read_as(base.clone(), first_secret).await, 401, "the old secret");
    assert_eq!(append_as(base.clone(), second_secret).await, 200);
    assert!(terminate(child).success());

    // No secret in the environment: nothing starts, and the error names the line.
    let output = common::shale().args(args).current_dir(dir.path()).env(root.0, root.1).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started without the token's secret");
    assert!(stderr.contains("ORDERS_SECRET") && stderr.contains("line 2"), "{stderr}");
}
