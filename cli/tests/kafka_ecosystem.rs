//! Kafka Connect, Debezium and Flink, unchanged, against `shale serve --kafka`: a Connect
//! worker in distributed mode copying a file through a topic and resuming after a restart
//! of the server (with and without exactly-once source support), Debezium's PostgreSQL
//! connector streaming a table's changes into a topic, and a Flink job copying a topic
//! exactly once. The steps are in `tests/kafka/java/ConnectPipeline.java` and
//! `FlinkPipeline.java`; they need `scripts/java-kafka.sh` and, for Debezium, Debian's
//! `postgresql` package (`scripts/test.sh` and `.ci/run` see to both).

#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{free_port, run_flink, run_java, serve_kafka, terminate};

/// A Kafka Connect worker in distributed mode (Kafka's connect-runtime 4.3, unchanged but
/// for its REST server, whose Jetty security module cannot be fetched here): it creates its
/// compacted config, offset and status topics and joins its group; a file source and a
/// file sink connector copy 500 lines through a topic in order; then, after the server
/// restarts and 500 more lines are appended, a new worker finds the connectors in its
/// config topic and their places in its offset topic and group, and copies only the new
/// lines. The steps are in `tests/kafka/java/ConnectPipeline.java`.
#[test]
fn kafka_connect_copies_a_file_through_a_topic_and_resumes_after_a_restart() {
    connect_pipeline_through_a_restart("at-least-once");
}

/// [`kafka_connect_copies_a_file_through_a_topic_and_resumes_after_a_restart`] with
/// exactly-once source support: the config topic written by a transactional producer, the
/// source task's records and offsets in transactions of its own id, zombie tasks fenced.
#[test]
fn kafka_connect_with_exactly_once_sources_resumes_after_a_restart() {
    connect_pipeline_through_a_restart("exactly-once");
}

fn connect_pipeline_through_a_restart(delivery: &str) {
    let dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let files_dir = files.path().to_str().unwrap();
    for phase in ["first", "again"] {
        let (server, _http, kafka) = serve_kafka(dir.path(), 0);
        run_java("ConnectPipeline.java", &[&kafka, files_dir, phase, delivery]);
        assert!(terminate(server).success());
    }
}

/// Debezium's PostgreSQL connector (logical replication with `pgoutput`) in a Connect
/// worker: a table's snapshot, then an insert, an update and a delete with its tombstone,
/// read from the topic Connect creates for the table, in commit order; then, with the
/// worker stopped, rows changed and the server restarted, a new worker resumes the
/// replication stream and a reader of the same group gets those changes and nothing else.
#[test]
fn debezium_streams_a_postgres_table_into_a_topic_and_resumes_after_a_restart() {
    let postgres = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    for phase in ["first", "again"] {
        let (server, _http, kafka) = serve_kafka(dir.path(), 0);
        run_java("ConnectPipeline.java", &[&kafka, "debezium", &postgres.port.to_string(), phase]);
        assert!(terminate(server).success());
    }
    postgres.stop();
}

/// Apache Flink 2.0 on a local cluster: a bounded KafkaSource reads a topic of two
/// partitions to its end and an exactly-once KafkaSink (a transaction per checkpoint)
/// writes each record to another topic; read_committed sees each once, the sink's
/// transactions are listed, the offsets the source committed lie within their partitions
/// (its last commit may not be sent before a bounded job ends).
#[test]
fn flink_copies_a_topic_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, kafka) = serve_kafka(dir.path(), 0);
    run_flink("FlinkPipeline.java", &[&kafka]);
    assert!(terminate(server).success());
}

/// A PostgreSQL server of Debian's package on a loopback port, with logical replication,
/// in a directory of its own; run as the `postgres` user when the tests run as root,
/// which it refuses.
struct Postgres {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Postgres {
    fn start() -> Postgres {
        let bin = postgres_bin();
        let dir = tempfile::tempdir().unwrap();
        let user = run_as();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let data = dir.path().join("data");
        let as_user = |command: &mut Command| {
            if let Some((uid, gid)) = user {
                command.uid(uid).gid(gid);
            }
        };
        let mut initdb = Command::new(bin.join("initdb"));
        initdb.args(["-D", data.to_str().unwrap(), "-A", "trust", "-U", "postgres"]);
        as_user(&mut initdb);
        let out = initdb.output().unwrap();
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        let port = free_port();
        let mut postgres = Command::new(bin.join("postgres"));
        postgres.args(["-D", data.to_str().unwrap(), "-k", dir.path().to_str().unwrap(), "-p", &port.to_string()]);
        for setting in [
            "listen_addresses=127.0.0.1",
            "wal_level=logical",
            "max_wal_senders=4",
            "max_replication_slots=4",
            "fsync=off",
        ] {
            postgres.args(["-c", setting]);
        }
        as_user(&mut postgres);
        let child = postgres.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let ready = Command::new(bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &port.to_string()])
                .output()
                .unwrap();
            if ready.status.success() {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "PostgreSQL did not start in 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        Postgres { child, port, _dir: dir }
    }

    /// A fast shutdown (SIGINT), waited for.
    fn stop(mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        self.child.wait().unwrap();
    }
}

/// The newest PostgreSQL's binaries under `/usr/lib/postgresql`.
fn postgres_bin() -> std::path::PathBuf {
    let mut versions: Vec<_> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("Debian's postgresql package (.ci/run installs it)")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .collect();
    versions.sort();
    let newest = versions.last().expect("a PostgreSQL version under /usr/lib/postgresql");
    std::path::PathBuf::from(format!("/usr/lib/postgresql/{newest}/bin"))
}

/// The `postgres` user's ids when this process is root, which PostgreSQL refuses to run as.
fn run_as() -> Option<(u32, u32)> {
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let id = |flag: &str| {
        let out = Command::new("id").args([flag, "postgres"]).output().unwrap();
        assert!(out.status.success(), "no postgres user: install Debian's postgresql package");
        String::from_utf8(out.stdout).unwrap().trim().parse::<u32>().unwrap()
    };
    Some((id("-u"), id("-g")))
}
