//! Real, unmodified Kafka clients against `shale serve --kafka`: Apache Kafka's Java
//! client, confluent-kafka (librdkafka), kafka-python and KafkaJS (independent
//! implementations) and kcat, each driven by a program that asserts every step
//! (`tests/kafka/*.py`, `tests/kafka/java/*.java`, `tests/kafkajs/*.mjs`), and a
//! `kill -9` of the server under idempotent acks=all producers.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use common::{
    free_port, java_command, kafka_script, python, quix_python, run_java, run_kafkajs, run_python, run_python_of,
    serve_kafka, shale, spawn_started, start_field, terminate,
};

/// The Kafka basin `shale serve` creates by default.
const BASIN: &str = "kafka-topics";

/// Runs `tests/kafka/<script>` against a fresh `shale serve --kafka` with its bootstrap
/// address (then, `with_http`, the HTTP base and the basin) and checks that every step
/// passed and the server then stopped cleanly.
fn passes_against_serve(script: &str, with_http: bool) {
    passes_against_serve_in(&python(), script, with_http);
}

/// [`passes_against_serve`] with the Python of another virtualenv.
fn passes_against_serve_in(interpreter: &std::path::Path, script: &str, with_http: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (server, http, kafka) = serve_kafka(dir.path(), 0);
    let script = kafka_script(script);
    let mut args = vec![script.as_str(), kafka.as_str()];
    if with_http {
        args.extend([http.as_str(), BASIN]);
    }
    let out = run_python_of(interpreter, &args);
    assert!(out.contains("every step passed"), "{out}");
    assert!(terminate(server).success());
}

#[test]
fn confluent_kafka_produces_consumes_and_administers_unchanged() {
    passes_against_serve("confluent.py", true);
}

/// librdkafka's consumers under the consumer group protocol (KIP-848): the coordinator
/// assigns, a second member gets partitions only as the first gives them up, the admin
/// client lists and describes the group, a member leaving hands everything on, and every
/// record is read exactly once. The steps are in `tests/kafka/consumer_protocol.py`.
#[test]
fn confluent_kafka_consumers_share_partitions_under_the_consumer_protocol() {
    passes_against_serve("consumer_protocol.py", false);
}

/// Apache Kafka's own Java client (kafka-clients 4.3), the reference implementation:
/// topics created and described by name and by id, configs altered, idempotent produce
/// under every compression, a classic and a consumer-protocol group, offsets for times,
/// transactions (aborted records never shown, a fenced producer refused), a
/// consume-transform-produce loop with its offsets in each transaction, group offsets
/// altered and deleted, records deleted, partitions added, and `KafkaShareConsumer` with
/// its group described, its start offset read, reset (the records after it handed out
/// again) and deleted, and the group listed by the admin client. The
/// steps are in `tests/kafka/java/JavaClients.java`; it needs `scripts/java-kafka.sh`
/// (`scripts/test.sh` runs it).
#[test]
fn java_kafka_clients_produce_consume_transact_and_administer_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, kafka) = serve_kafka(dir.path(), 0);
    run_java("JavaClients.java", &[&kafka]);
    assert!(terminate(server).success());
}

/// KafkaJS, a third implementation of the protocol (JavaScript): administration,
/// idempotent and gzip produce, a group of two members, offsets reset and set by its admin
/// client (which commits -2 to reset), a consumer fallen below the log start, and
/// transactions read by a read_committed consumer. The steps are in
/// `tests/kafkajs/kafkajs.mjs`; it needs `npm ci` in `tests/kafkajs` (`scripts/test.sh`
/// does it).
#[test]
fn kafkajs_produces_consumes_and_administers_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, kafka) = serve_kafka(dir.path(), 0);
    run_kafkajs("kafkajs.mjs", &[&kafka]);
    assert!(terminate(server).success());
}

/// Quix Streams, a stream processing library (on confluent-kafka), unmodified: a count per
/// word behind a `group_by` (a repartition topic the library creates), at least once,
/// three app instances one after another, each on a fresh state directory, so the second
/// and third rebuild the state from the library's compacted changelog topic: one output
/// per input, the counts carried on. The steps are in `tests/kafka/quix_streams.py`; it
/// runs in `.venv-quix` (`localstack/s3-local.sh install` makes it).
#[test]
fn quix_streams_counts_with_state_rebuilt_from_its_changelog() {
    passes_against_serve_in(&quix_python(), "quix_streams.py", false);
}

/// kafka-python's admin client on consumer groups: a group whose consumer has gone listed
/// and described with its offsets, offsets altered, reset and deleted on one partition
/// (OffsetDelete), a static member removed by instance, groups deleted. The steps are in
/// `tests/kafka/kafka_python_admin.py`.
#[test]
fn kafka_python_administers_groups_and_their_offsets() {
    passes_against_serve("kafka_python_admin.py", false);
}

/// Static members (`group.instance.id`) with confluent-kafka: one closed and started again
/// under its instance id gets its partitions back while the other sees no rebalance. The
/// steps are in `tests/kafka/static_members.py`.
#[test]
fn confluent_kafka_static_members_rejoin_without_a_rebalance() {
    passes_against_serve("static_members.py", false);
}

/// Transactional confluent-kafka producers: commits and aborts across 3 topics x 3
/// partitions seen exactly by read_committed (and read_uncommitted) consumers, a zombie
/// fenced, an abandoned transaction timed out, a consume-transform-produce loop with
/// `send_offsets_to_transaction`. The steps are in `tests/kafka/transactions.py`.
#[test]
fn confluent_kafka_transactions_commit_abort_fence_and_time_out() {
    passes_against_serve("transactions.py", false);
}

/// Transactional kafka-python producers: commits and aborts read by read_committed
/// consumers, a zombie fenced, offsets committed with a transaction and not with an
/// aborted one. The steps are in `tests/kafka/transactions_kafka_python.py`.
#[test]
fn kafka_python_transactions_commit_abort_and_fence() {
    passes_against_serve("transactions_kafka_python.py", false);
}

#[test]
fn kafka_python_produces_consumes_and_administers_unchanged() {
    passes_against_serve("kafka_python.py", false);
}

/// aiokafka (asyncio, its own protocol code asking older API versions): admin calls,
/// idempotent produce under each codec, a group of two, offsets for times, transactions
/// with offsets. The steps are in `tests/kafka/aiokafka_client.py`.
#[test]
fn aiokafka_produces_consumes_and_administers_unchanged() {
    passes_against_serve("aiokafka_client.py", false);
}

/// kcat (librdkafka 2.0, from Debian): keyed records in, the same records out, and the
/// metadata listing; then the listener's counters on `/metrics`: the requests by API, the
/// connections (none open once the clients are gone), and a request with an unknown API
/// key counted as such, its connection as one closed by an error.
#[test]
fn kcat_produces_and_consumes() {
    let kcat = which("kcat").expect("kcat missing: apt-get install kcat (.ci/run installs it)");
    let dir = tempfile::tempdir().unwrap();
    let (server, http, kafka) = serve_kafka(dir.path(), 0);
    let create = run_python(&["-c", CREATE_TOPIC, &kafka, "kcat-topic", "2"]);
    assert!(create.contains("created"), "{create}");
    let mut produce = Command::new(&kcat)
        .args(["-b", &kafka, "-P", "-t", "kcat-topic", "-K", ":", "-p", "1", "-z", "lz4"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    produce.stdin.take().unwrap().write_all(b"a:1\nb:2\nc:3\n").unwrap();
    assert!(produce.wait().unwrap().success());
    let consumed = Command::new(&kcat)
        .args(["-b", &kafka, "-C", "-t", "kcat-topic", "-p", "1", "-o", "beginning", "-e", "-f", "%k=%s@%o\n"])
        .output()
        .unwrap();
    assert!(consumed.status.success(), "{}", String::from_utf8_lossy(&consumed.stderr));
    assert_eq!(String::from_utf8_lossy(&consumed.stdout), "a=1@0\nb=2@1\nc=3@2\n");
    let listing = Command::new(&kcat).args(["-b", &kafka, "-L", "-t", "kcat-topic"]).output().unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.contains("topic \"kcat-topic\" with 2 partitions"), "{listing}");

    for api in ["ApiVersions", "Metadata", "CreateTopics", "Produce", "Fetch", "ListOffsets"] {
        let count = series(&metrics(&http), &format!("shale_kafka_requests_total{{api=\"{api}\"}}"));
        assert!(count >= 1, "{api}: {count}");
    }
    assert!(series(&metrics(&http), "shale_kafka_connections_total") >= 4);
    let deadline = Instant::now() + Duration::from_secs(20);
    while series(&metrics(&http), "shale_kafka_connections") != 0 {
        assert!(Instant::now() < deadline, "connections still counted open after their clients left");
        std::thread::sleep(Duration::from_millis(50));
    }
    let failed = series(&metrics(&http), "shale_kafka_connections_failed_total");
    // A request frame for API key 9999: size, key, version, correlation id, no client id.
    let mut socket = std::net::TcpStream::connect(&kafka).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    socket.write_all(&[0, 0, 0, 10, 0x27, 0x0f, 0, 0, 0, 0, 0, 7, 0xff, 0xff]).unwrap();
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut socket, &mut rest).unwrap();
    assert!(rest.is_empty(), "an unknown API key is not answered: the connection closes");
    let deadline = Instant::now() + Duration::from_secs(20);
    while series(&metrics(&http), "shale_kafka_connections_failed_total") != failed + 1 {
        assert!(Instant::now() < deadline, "the closed connection was not counted");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(series(&metrics(&http), "shale_kafka_requests_total{api=\"unknown\"}"), 1);
    assert!(terminate(server).success());
}

/// The server's `/metrics` text.
fn metrics(http: &str) -> String {
    let out = Command::new("curl").args(["-sf", &format!("{http}/metrics")]).output().unwrap();
    assert!(out.status.success(), "GET /metrics failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The value of the series named exactly `name` (labels included); 0 when it is absent.
fn series(metrics: &str, name: &str) -> u64 {
    shale_tests::series(metrics, name).unwrap_or(0)
}

const CREATE_TOPIC: &str = r#"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
for _, f in admin.create_topics([NewTopic(sys.argv[2], num_partitions=int(sys.argv[3]))]).items():
    f.result(20)
print("created")
"#;

fn which(tool: &str) -> Option<String> {
    let out = Command::new("sh").arg("-c").arg(format!("command -v {tool}")).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// `kill -9` of the server while idempotent acks=all producers produce (the Java
/// client's and librdkafka's), then a restart on the same address: the producers retry
/// what was not acked, and every acknowledged record is there exactly once (no record at
/// all is there twice).
#[test]
fn kill_9_under_idempotent_producers_loses_and_duplicates_nothing() {
    const COUNT: usize = 3000;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let (mut server, _http, kafka) = serve_kafka(dir.path(), port);
    run_python(&["-c", CREATE_TOPIC, &kafka, "crash", "4"]);
    // One producer is the Java client's (paced at 1,000 records a second), the other
    // librdkafka's, started once the Java one (whose JVM starts slower) has its first ack,
    // so the kill finds both mid-stream. Both send the values `r-0`, `r-1`, ...
    let mut producers = Vec::new();
    for n in 0..2 {
        let acked = dir.path().join(format!("acked-{n}"));
        let count = COUNT.to_string();
        let mut command = if n == 0 {
            let mut java = java_command("JavaSteadyProducer.java");
            java.args([&kafka, "crash", "r", "1000", &count]);
            java
        } else {
            let mut python = Command::new(python());
            python.arg(kafka_script("crash_producer.py")).args([&kafka, "crash", &count]);
            python
        };
        let child = command.arg(&acked).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let started = Instant::now() + Duration::from_secs(60);
        while n == 0 && lines(&acked).is_empty() {
            assert!(Instant::now() < started, "the Java producer had nothing acked in 60 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        producers.push((child, acked));
    }
    // Kill once both producers have had a third of their records acked.
    let deadline = Instant::now() + Duration::from_secs(120);
    while producers.iter().any(|(_, acked)| lines(acked).len() < COUNT / 3) {
        assert!(Instant::now() < deadline, "producers did not get a third acked in 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.kill().unwrap();
    server.wait().unwrap();
    let acked_before_kill: Vec<usize> = producers.iter().map(|(_, acked)| lines(acked).len()).collect();
    assert!(acked_before_kill.iter().any(|&n| n < COUNT), "the kill came after every record was acked: raise COUNT");
    let (server, _http, kafka) = serve_kafka(dir.path(), port);
    let mut acked = Vec::new();
    for (n, (child, path)) in producers.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "producer {n}: {}", String::from_utf8_lossy(&out.stderr));
        // A line is the value, or `partition offset value`.
        acked.extend(lines(&path).iter().filter_map(|line| line.rsplit(' ').next().map(str::to_string)));
    }
    // Both producers wrote the same values; each is expected once per producer.
    let values: Vec<String> =
        serde_json::from_str(&run_python(&[&kafka_script("read_all.py"), &kafka, "crash"])).unwrap();
    let mut stored: HashMap<&str, usize> = HashMap::new();
    for value in &values {
        *stored.entry(value.as_str()).or_default() += 1;
    }
    assert_eq!(acked.len(), 2 * COUNT, "every record was acked once the producers finished");
    let mut want: HashMap<&str, usize> = HashMap::new();
    for value in &acked {
        *want.entry(value.as_str()).or_default() += 1;
    }
    let wrong: Vec<_> = want.iter().filter(|(v, n)| stored.get(*v) != Some(n)).take(5).collect();
    assert!(wrong.is_empty(), "acked values stored a different number of times: {wrong:?} (stored {})", values.len());
    assert_eq!(values.len(), 2 * COUNT, "nothing but the acked records is stored");
    eprintln!("{acked_before_kill:?} of {COUNT} records each acked before the kill (Java, librdkafka)");
    assert!(terminate(server).success());
}

/// Kafka's codec sizes an array from the length a request claims before reading it:
/// requests claiming 2^31 and 2^32 elements close their connection, and the server
/// (on jemalloc, which reserves such sizes without backing them) goes on serving.
#[test]
fn requests_claiming_huge_arrays_close_only_their_connection() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, kafka) = serve_kafka(dir.path(), 0);
    // Metadata v1 (topics: a 4-byte length) and v9 (flexible: a varint length + 1).
    let v1: Vec<u8> = [
        &3i16.to_be_bytes()[..],
        &1i16.to_be_bytes(),
        &7i32.to_be_bytes(),
        &(-1i16).to_be_bytes(),
        &i32::MAX.to_be_bytes(),
    ]
    .concat();
    let v9: Vec<u8> = [
        &3i16.to_be_bytes()[..],
        &9i16.to_be_bytes(),
        &7i32.to_be_bytes(),
        &(-1i16).to_be_bytes(),
        &[0],
        &[0xff, 0xff, 0xff, 0xff, 0x0f],
    ]
    .concat();
    for body in [v1, v9] {
        let mut socket = std::net::TcpStream::connect(&kafka).unwrap();
        socket.write_all(&(body.len() as i32).to_be_bytes()).unwrap();
        socket.write_all(&body).unwrap();
        let mut rest = Vec::new();
        socket.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "answered instead of closing: {rest:?}");
    }
    let create = run_python(&["-c", CREATE_TOPIC, &kafka, "still-up", "1"]);
    assert!(create.contains("created"), "{create}");
    assert!(terminate(server).success());
}

/// With access control on, Kafka clients would bypass every token: until SASL is built,
/// such a start is refused with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_records_land_in_the_table_tier_with_their_key_as_a_column() {
    let kcat = which("kcat").expect("kcat missing: apt-get install kcat (.ci/run installs it)");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shale.toml"), "[tables]\npass_interval = \"100ms\"\n").unwrap();
    let args =
        ["serve", "--config", "shale.toml", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--kafka", "127.0.0.1:0"];
    let (server, start, _logs) = spawn_started(dir.path(), &args, &[]);
    let http = format!("http://{}", start_field(&start, "http=").unwrap());
    let kafka = start_field(&start, "kafka=").unwrap();
    let tiered = serde_json::json!({ "tables": { "after_secs": 0 } });
    let patched = reqwest::Client::new().patch(format!("{http}/v1/basins/{BASIN}")).json(&tiered).send().await.unwrap();
    assert_eq!(patched.status(), 200, "{}", patched.text().await.unwrap());
    let create = run_python(&["-c", CREATE_TOPIC, &kafka, "keyed", "1"]);
    assert!(create.contains("created"), "{create}");
    for (args, input) in [(&["-K", ":"][..], &b"k1:v1\nk2:v2\n"[..]), (&[][..], &b"plain\n"[..])] {
        let mut produce = Command::new(&kcat)
            .args(["-b", &kafka, "-P", "-t", "keyed", "-p", "0"])
            .args(args)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        produce.stdin.take().unwrap().write_all(input).unwrap();
        assert!(produce.wait().unwrap().success());
    }
    let data = dir.path().join("shale-data");
    common::cluster::wait_until("the three records tiered", Duration::from_secs(60), || async {
        shale_tests::tables::tiered_records(&data, BASIN) == 3
    })
    .await;

    let location = format!("file://{}", dir.path().join("shale-data").canonicalize().unwrap().display());
    let query = "select seq_num, hex(key), hex(body) from {T} order by seq_num";
    let view = shale_tests::tables::read_table(&location, BASIN, None, &[query], &[]);
    let expected = serde_json::json!([[[0, "6B31", "7631"], [1, "6B32", "7632"], [2, null, "706C61696E"]]]);
    assert_eq!(serde_json::Value::Array(view.duckdb_sql.clone()), expected, "DuckDB over the files");
    assert_eq!(view.duckdb_sql, view.iceberg_sql, "pyiceberg reads the same keys");
    assert!(view.schemas.last().unwrap().contains(&"key".to_string()), "{:?}", view.schemas);
    assert!(terminate(server).success());
}

/// SASL over access tokens on a TLS listener with a custom CA: confluent-kafka and
/// kafka-python log in with PLAIN and SCRAM-SHA-256/512; a token scoped to `orders/`
/// reaches only that topic; a revoked token is refused within the revocation bound
/// (1 s here). The steps are in `tests/kafka/sasl.py`.
#[test]
fn sasl_over_access_tokens_on_tls_keeps_each_token_to_its_scope() {
    const ROOT: &str = "kafka-root-secret";
    let certs = shale_tests::tls::TestCerts::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shale.toml");
    std::fs::write(&config, "[auth]\nrevocation_bound = \"1s\"\n").unwrap();
    let env = [
        ("SHALE_TLS_CERT", certs.cert.display().to_string()),
        ("SHALE_TLS_KEY", certs.key.display().to_string()),
        ("SHALE_ROOT_TOKEN", ROOT.to_string()),
        ("SHALE_CONFIG", config.display().to_string()),
    ];
    let args = ["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--kafka", "127.0.0.1:0"];
    let (server, start, _logs) = spawn_started(dir.path(), &args, &env);
    let kafka = start_field(&start, "kafka=").unwrap();
    let http = format!("https://{}", start_field(&start, "http=").unwrap());
    let grpc = format!("https://{}", start_field(&start, "grpc=").unwrap());
    let ca = certs.ca.display().to_string();
    let issue = |id: &str, ops: &str| {
        let out = shale()
            .args(["tokens", "issue", id, "--basins", "", "--streams", "orders/", "--ops", ops])
            .args(["--server", &grpc, "--ca-file", &ca, "--token", ROOT])
            .output()
            .unwrap();
        assert!(out.status.success(), "issuing {id}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let scoped = issue("orders-rw", "read,append");
    let append_only = issue("append-only", "append");
    let out = run_python(&[&kafka_script("sasl.py"), &kafka, &http, &ca, ROOT, &scoped, &append_only, "1"]);
    assert!(out.contains("every step passed"), "{out}");
    println!("{out}");
    assert!(terminate(server).success());
}

/// KafkaJS's own SASL (PLAIN, SCRAM-SHA-256 and -512) and TLS against access tokens: a
/// token scoped to `orders/` produces, consumes and lists only `orders`, is refused
/// another topic, and a wrong secret is refused. The steps are in `tests/kafkajs/sasl.mjs`.
#[test]
fn kafkajs_logs_in_with_sasl_over_tls_within_its_token() {
    with_a_scoped_token_on_tls("orders-js", |kafka, ca, root, secret| {
        run_kafkajs("sasl.mjs", &[kafka, ca, root, "orders-js", secret]);
    });
}

/// The same steps with the Java client's SASL_SSL (its own SCRAM, the CA as a PEM trust
/// store). The steps are in `tests/kafka/java/JavaSasl.java`.
#[test]
fn java_kafka_client_logs_in_with_sasl_over_tls_within_its_token() {
    with_a_scoped_token_on_tls("orders-java", |kafka, ca, root, secret| {
        run_java("JavaSasl.java", &[kafka, ca, root, "orders-java", secret]);
    });
}

/// Runs `client` with the Kafka address, the CA file, the root token and the secret of a
/// token `token_id` scoped to the streams `orders/` (read, append) of a `shale serve`
/// with TLS and access control.
fn with_a_scoped_token_on_tls(token_id: &str, client: impl FnOnce(&str, &str, &str, &str)) {
    const ROOT: &str = "kafka-clients-root-secret";
    let certs = shale_tests::tls::TestCerts::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("SHALE_TLS_CERT", certs.cert.display().to_string()),
        ("SHALE_TLS_KEY", certs.key.display().to_string()),
        ("SHALE_ROOT_TOKEN", ROOT.to_string()),
    ];
    let args = ["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--kafka", "127.0.0.1:0"];
    let (server, start, _logs) = spawn_started(dir.path(), &args, &env);
    let kafka = start_field(&start, "kafka=").unwrap();
    let grpc = format!("https://{}", start_field(&start, "grpc=").unwrap());
    let ca = certs.ca.display().to_string();
    let out = shale()
        .args(["tokens", "issue", token_id, "--basins", "", "--streams", "orders/", "--ops", "read,append"])
        .args(["--server", &grpc, "--ca-file", &ca, "--token", ROOT])
        .output()
        .unwrap();
    assert!(out.status.success(), "issuing the token: {}", String::from_utf8_lossy(&out.stderr));
    let secret = String::from_utf8(out.stdout).unwrap().trim().to_string();
    client(&kafka, &ca, ROOT, &secret);
    assert!(terminate(server).success());
}

/// librdkafka's share consumer (KIP-932) against share groups: two members read a
/// topic's records, each delivered to exactly one of them; the group starts at the latest offset; a
/// released record comes back with its delivery count raised; and after a restart of
/// the server what was accepted is not delivered again while what was never read is.
/// The steps are in `tests/kafka/share_groups.py`.
#[test]
fn confluent_kafka_share_consumers_split_records_and_keep_their_place_through_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let script = kafka_script("share_groups.py");
    for phase in ["first", "again"] {
        let (server, _, kafka) = serve_kafka(dir.path(), 0);
        let out = run_python(&[&script, &kafka, phase]);
        assert!(out.contains("every step passed"), "{phase}: {out}");
        assert!(terminate(server).success());
    }
}
