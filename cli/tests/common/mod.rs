//! Starting and stopping a real `shale serve` process for tests.

#![allow(dead_code, clippy::unwrap_used)]

pub mod cluster;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// Starts `shale serve` in `dir` on a free loopback port; returns it and its address,
/// read from the log line that says where it listens.
pub fn start(dir: &std::path::Path) -> (Child, String, String) {
    spawn(dir, &["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"], &[])
}

/// Starts `shale` with `args` (a server command) in `dir`; returns the process and its
/// HTTP and gRPC base URLs, read from the log line that says where it listens.
pub fn spawn(dir: &std::path::Path, args: &[&str], env: &[(&str, String)]) -> (Child, String, String) {
    let (child, http, grpc, _logs) = spawn_logged(dir, args, env);
    (child, http, grpc)
}

/// As [`spawn`], also handing over the log lines that follow the start line.
pub fn spawn_logged(
    dir: &std::path::Path,
    args: &[&str],
    env: &[(&str, String)],
) -> (Child, String, String, std::sync::mpsc::Receiver<String>) {
    let (child, start, logs) = spawn_started(dir, args, env);
    let field = |name: &str| start_field(&start, name).unwrap_or_default();
    (child, format!("http://{}", field("http=")), format!("http://{}", field("grpc=")), logs)
}

/// The value of `name` (`"kafka="`) in a server's start line.
pub fn start_field(start: &str, name: &str) -> Option<String> {
    start.split(name).nth(1).map(|rest| rest.split_whitespace().next().unwrap_or_default().to_string())
}

/// Starts `shale` with `args` (a server command); returns the process, its start line
/// (`shale serving ...`, ANSI codes stripped) and the log lines after it.
pub fn spawn_started(
    dir: &std::path::Path,
    args: &[&str],
    env: &[(&str, String)],
) -> (Child, String, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(args)
        .current_dir(dir)
        .env("SHALE_LOG", "info")
        .env("NO_COLOR", "1")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    stop_with_test(&child);
    let logs = child.stderr.take().unwrap();
    let mut lines = BufReader::new(logs).lines();
    let start = loop {
        let line = lines.next().expect("shale exited before listening").unwrap();
        let plain: String = strip_ansi(&line);
        // Every server logs its HTTP address; all but the compactor a gRPC one too.
        if plain.contains("shale serving") && start_field(&plain, "http=").is_some() {
            break plain;
        }
    };
    // Keep draining the log so the child never blocks on a full pipe.
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = sender.send(strip_ansi(&line));
        }
    });
    (child, start, receiver)
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

pub use shale_tests::stop_with_test;

pub fn terminate(mut child: Child) -> std::process::ExitStatus {
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap()
}

/// A loopback port free now, for a server that must come back on the same address or
/// that is given its port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `shale serve` in `dir` with Kafka on `kafka` (a port, or 0 for any): the process,
/// its HTTP base URL and its Kafka bootstrap address.
pub fn serve_kafka(dir: &std::path::Path, kafka: u16) -> (Child, String, String) {
    let listen = format!("127.0.0.1:{kafka}");
    let args = ["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--kafka", &listen];
    let (child, start, _logs) = spawn_started(dir, &args, &[]);
    let http = format!("http://{}", start_field(&start, "http=").unwrap());
    (child, http, start_field(&start, "kafka=").unwrap())
}

/// `shale` running a client command `args` against `server`, its output piped.
pub fn spawn_client(args: &[&str], server: &str) -> Child {
    shale().args(args).env("SHALE_SERVER", server).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// The `shale` binary, for client commands.
pub fn shale() -> Command {
    Command::new(env!("CARGO_BIN_EXE_shale"))
}

/// A script of `tests/kafka/`.
pub fn kafka_script(name: &str) -> String {
    format!("{}/tests/kafka/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs the virtualenv's Python with `args` and returns what it printed; fails the test,
/// with its output, unless it succeeded.
pub fn run_python(args: &[&str]) -> String {
    run_python_of(&python(), args)
}

/// Runs `interpreter` with `args` and returns what it printed; fails the test, with its
/// output, unless it succeeded.
pub fn run_python_of(interpreter: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(interpreter).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `tests/kafkajs/<script>` with `args` under Node; fails the test, with its output,
/// unless it printed that every step passed.
pub fn run_kafkajs(script: &str, args: &[&str]) {
    let scripts = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kafkajs");
    assert!(
        scripts.join("node_modules/kafkajs").exists(),
        "run `npm ci` in {} (scripts/test.sh does)",
        scripts.display()
    );
    let out = Command::new("node").arg(script).args(args).current_dir(&scripts).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("every step passed"),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `tests/kafka/java/<source>` (one Java file, compiled by the launcher) with
/// `args`, Apache Kafka's Java client on its class path, and returns what it printed;
/// fails the test, with its output, unless it printed that every step passed.
pub fn run_java(source: &str, args: &[&str]) -> String {
    passes(java_command(source).args(args), source)
}

/// [`run_java`] with Apache Flink and its Kafka connector on the class path instead.
pub fn run_flink(source: &str, args: &[&str]) -> String {
    passes(java_command_on("flink", source).args(args), source)
}

fn passes(command: &mut Command, source: &str) -> String {
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("every step passed"),
        "{source} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `java` running `tests/kafka/java/<source>` with Kafka's Java client on its class path;
/// its arguments are the caller's to add.
pub fn java_command(source: &str) -> Command {
    java_command_on("libs", source)
}

/// `java` running `tests/kafka/java/<source>` with the jars of `.java-kafka/<jars>` on
/// its class path.
fn java_command_on(jars: &str, source: &str) -> Command {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let libs = root.join(".java-kafka").join(jars);
    assert!(
        std::fs::read_dir(&libs).is_ok_and(|mut d| d.next().is_some()),
        "run scripts/java-kafka.sh to fetch Kafka's Java client and Flink (scripts/test.sh does)"
    );
    let source = format!("{}/tests/kafka/java/{source}", env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new("java");
    command.args(["-cp", &format!("{}/*", libs.display()), &source]);
    command
}

/// The virtualenv's Python, with moto, grpcio-tools, grpcio-status and prometheus-client.
pub fn python() -> std::path::PathBuf {
    venv_python(".venv")
}

/// The Python of the virtualenv with Quix Streams, which pins an older confluent-kafka
/// than the one the other Kafka tests run.
pub fn quix_python() -> std::path::PathBuf {
    venv_python(".venv-quix")
}

fn venv_python(venv: &str) -> std::path::PathBuf {
    let venv = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(venv).join("bin/python");
    assert!(
        venv.exists(),
        "{} missing: run scripts/test.sh (it creates the virtualenvs with localstack/s3-local.sh install)",
        venv.display()
    );
    venv
}
