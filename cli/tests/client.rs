//! The client commands against a real `shale serve` process, and the protos used from
//! another language (Python stubs generated with grpcio-tools).

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{python, shale, spawn_client, start, terminate};

fn run(args: &[&str], server: &str, stdin: Option<&[u8]>) -> Output {
    let mut child = shale()
        .args(args)
        .env("SHALE_SERVER", server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        input.write_all(bytes).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

#[test]
fn append_from_stdin_reads_back_identical_and_exit_codes_are_stable() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, grpc) = start(dir.path());
    assert!(run(&["basins", "create", "cli-basin"], &grpc, None).status.success());
    assert!(run(&["streams", "create", "cli-basin/s"], &grpc, None).status.success());

    let input: String = (0..2500).map(|i| format!("line {i} ✓ {}\n", "x".repeat(i % 50))).collect();
    let appended = run(&["append", "cli-basin/s"], &grpc, Some(input.as_bytes()));
    assert!(appended.status.success(), "{}", String::from_utf8_lossy(&appended.stderr));
    let read = run(&["read", "cli-basin/s", "-s", "0", "--no-follow"], &grpc, None);
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));
    assert_eq!(String::from_utf8(read.stdout).unwrap(), input, "read back byte-identical");

    let tail = run(&["check-tail", "cli-basin/s"], &grpc, None);
    assert!(String::from_utf8(tail.stdout).unwrap().starts_with("seq_num=2500 timestamp="));
    let last = run(&["tail", "cli-basin/s", "-n", "2"], &grpc, None);
    let expected: String = (2498..2500).map(|i| format!("line {i} ✓ {}\n", "x".repeat(i % 50))).collect();
    assert_eq!(String::from_utf8(last.stdout).unwrap(), expected, "the last two records");
    let json = run(&["read", "cli-basin/s", "--tail-offset", "1", "--no-follow", "--format", "json"], &grpc, None);
    let line: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(line["seq_num"], 2499);

    let listed = run(&["streams", "list", "cli-basin"], &grpc, None);
    assert_eq!(String::from_utf8(listed.stdout).unwrap(), "s\n");
    assert_eq!(run(&["read", "cli-basin/missing", "--no-follow"], &grpc, None).status.code(), Some(3), "not found");
    assert_eq!(run(&["streams", "create", "cli-basin/s"], &grpc, None).status.code(), Some(4), "exists");
    let mismatch = run(&["append", "cli-basin/s", "--match-seq-num", "0"], &grpc, Some(b"x\n"));
    assert_eq!(mismatch.status.code(), Some(5), "condition failed");
    assert!(String::from_utf8_lossy(&mismatch.stderr).contains("2500"), "the error names the tail");
    assert_eq!(run(&["read", "no-slash"], &grpc, None).status.code(), Some(2), "bad target");
    assert!(terminate(server).success());
}

#[test]
fn read_with_a_consumer_resumes_where_it_left_off() {
    let dir = tempfile::tempdir().unwrap();
    let (server, http, grpc) = start(dir.path());
    assert!(run(&["basins", "create", "cli-basin"], &grpc, None).status.success());
    assert!(run(&["streams", "create", "cli-basin/s"], &grpc, None).status.success());
    let input: String = (0..5).map(|i| format!("r{i}\n")).collect();
    assert!(run(&["append", "cli-basin/s"], &grpc, Some(input.as_bytes())).status.success());

    let first = run(&["read", "cli-basin/s", "--consumer", "job", "-s", "0", "--count", "3"], &grpc, None);
    assert_eq!(String::from_utf8(first.stdout).unwrap(), "r0\nr1\nr2\n");
    let rest = run(&["read", "cli-basin/s", "--consumer", "job", "--no-follow"], &grpc, None);
    assert!(rest.status.success(), "{}", String::from_utf8_lossy(&rest.stderr));
    assert_eq!(String::from_utf8(rest.stdout).unwrap(), "r3\nr4\n", "resumed from the committed position");

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let position: serde_json::Value = runtime.block_on(async {
        let url = format!("{http}/v1/streams/s/consumers/job");
        let r = reqwest::Client::new().get(url).header("s2-basin", "cli-basin").send().await.unwrap();
        r.json().await.unwrap()
    });
    assert_eq!(position["seq_num"], 5);
    assert_eq!(position["lag"]["records"], 0);
    assert!(terminate(server).success());
}

#[test]
fn follow_prints_records_appended_later() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, grpc) = start(dir.path());
    assert!(run(&["basins", "create", "cli-basin", "--create-stream-on-append"], &grpc, None).status.success());
    assert!(run(&["append", "cli-basin/live"], &grpc, Some(b"before\n")).status.success());

    let mut follower = spawn_client(&["read", "cli-basin/live", "--seq-num", "0"], &grpc);
    let lines = lines_of(&mut follower);
    assert_eq!(lines.recv_timeout(Duration::from_secs(30)).unwrap(), "before");
    assert!(run(&["append", "cli-basin/live"], &grpc, Some(b"after\n")).status.success());
    assert_eq!(lines.recv_timeout(Duration::from_secs(30)).unwrap(), "after");
    follower.kill().unwrap();
    follower.wait().unwrap();
    assert!(terminate(server).success());
}

#[test]
fn python_stubs_append_and_read() {
    let python = python();
    let out = tempfile::tempdir().unwrap();
    let protos = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto/protos");
    let generated = Command::new(&python)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(&protos)
        .arg(format!("--python_out={}", out.path().display()))
        .arg(format!("--grpc_python_out={}", out.path().display()))
        .arg(protos.join("shale/v1/shale.proto"))
        .output()
        .unwrap();
    assert!(generated.status.success(), "grpcio-tools failed: {}", String::from_utf8_lossy(&generated.stderr));

    let dir = tempfile::tempdir().unwrap();
    let (server, _http, grpc) = start(dir.path());
    let script = r#"
import sys, grpc
from shale.v1 import shale_pb2 as pb, shale_pb2_grpc as rpc
channel = grpc.insecure_channel(sys.argv[1])
rpc.BasinsStub(channel).CreateBasin(pb.CreateBasinRequest(basin="py-basin-1"))
rpc.StreamsStub(channel).CreateStream(pb.CreateStreamRequest(basin="py-basin-1", stream="s"))
records = rpc.RecordsStub(channel)
ack = records.Append(pb.AppendRequest(basin="py-basin-1", stream="s", records=[pb.AppendRecord(body=b"from python")]))
batch = records.Read(pb.ReadRequest(basin="py-basin-1", stream="s", seq_num=0))
print(ack.end.seq_num, batch.records[0].body.decode())
# Errors carry a google.rpc.Status that grpcio-status decodes, with S2's body in an ErrorInfo.
import json
from grpc_status import rpc_status
from google.rpc import error_details_pb2
try:
    records.Append(pb.AppendRequest(basin="py-basin-1", stream="s", match_seq_num=0, records=[pb.AppendRecord(body=b"x")]))
    sys.exit("a stale match_seq_num was accepted")
except grpc.RpcError as error:
    status = rpc_status.from_call(error)
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    print(status.code, info.reason, info.domain, json.loads(info.metadata["json"])["seq_num_mismatch"])
"#;
    let result = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(grpc.trim_start_matches("http://"))
        .env("PYTHONPATH", out.path())
        .output()
        .unwrap();
    assert!(result.status.success(), "python client failed: {}", String::from_utf8_lossy(&result.stderr));
    assert_eq!(String::from_utf8(result.stdout).unwrap().trim(), "1 from python\n9 SEQ_NUM_MISMATCH shale 1");
    assert!(terminate(server).success());
}

/// `shale read | head` ends quietly with 0 when the reader of its output goes away; a
/// server address without a scheme is accepted; the HTTP port given as the gRPC one is
/// named as such; a failed connection names the address.
#[test]
fn closed_output_addresses_without_scheme_and_connection_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (server, http, grpc) = start(dir.path());
    let bare = grpc.trim_start_matches("http://").to_string();
    assert!(run(&["basins", "create", "pipe-basin"], &bare, None).status.success(), "host:port works as --server");
    assert!(run(&["streams", "create", "pipe-basin/s"], &bare, None).status.success());
    let input: String = (0..20_000).map(|i| format!("line {i} {}\n", "x".repeat(40))).collect();
    assert!(run(&["append", "pipe-basin/s"], &grpc, Some(input.as_bytes())).status.success());

    let mut child = spawn_client(&["read", "pipe-basin/s", "--from", "0"], &grpc);
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert_eq!(first, "line 0 ".to_string() + &"x".repeat(40) + "\n");
    // The pipe's read end is dropped here; the rest of the output has nowhere to go.
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));

    let wrong_port = run(&["basins", "list"], http.trim_start_matches("http://"), None);
    assert_ne!(wrong_port.status.code(), Some(0));
    let message = String::from_utf8_lossy(&wrong_port.stderr);
    assert!(message.contains("HTTP port") && message.contains("--grpc"), "{message}");

    let refused = run(&["basins", "list"], "127.0.0.1:1", None);
    assert_eq!(refused.status.code(), Some(6));
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("127.0.0.1:1"), "{message}");
    terminate(server);
}

/// Reads the lines `child` prints, in the background, into a channel.
fn lines_of(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let (lines_tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines_tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    lines
}

/// `shale read` works as S2's CLI does: without a start it begins at the tail and
/// follows; `--count` bounds the whole read, past the per-call cap of 1000; `--bytes`,
/// `--until` and `--clamp` are the API's; `-o` writes a file.
#[test]
fn read_is_a_session_from_the_tail_bounded_by_its_limits() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, grpc) = start(dir.path());
    assert!(run(&["basins", "create", "cli-basin", "--create-stream-on-append"], &grpc, None).status.success());
    let input: String = (0..2500).map(|i| format!("r{i}\n")).collect();
    assert!(run(&["append", "cli-basin/s"], &grpc, Some(input.as_bytes())).status.success());

    let mut follower = spawn_client(&["read", "cli-basin/s"], &grpc);
    let lines = lines_of(&mut follower);
    // Appended until the follower has printed something: it began at the tail, so the
    // first line it prints is one appended after it started.
    let mut printed = None;
    for attempt in 0..300 {
        assert!(run(&["append", "cli-basin/s"], &grpc, Some(format!("new {attempt}\n").as_bytes())).status.success());
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(100)) {
            printed = Some(line);
            break;
        }
    }
    assert!(printed.unwrap().starts_with("new "), "the read began at the tail");
    follower.kill().unwrap();
    follower.wait().unwrap();

    let counted = run(&["read", "cli-basin/s", "-s", "0", "-n", "2500"], &grpc, None);
    assert!(counted.status.success(), "{}", String::from_utf8_lossy(&counted.stderr));
    assert_eq!(String::from_utf8(counted.stdout).unwrap(), input, "2500 records: the count bounds the whole read");

    // Each record `rN` (N < 10) meters 8 + 2 bytes: 100 bytes are exactly ten of them.
    let bytes = run(&["read", "cli-basin/s", "-s", "0", "-b", "100", "--no-follow"], &grpc, None);
    let expected: String = (0..10).map(|i| format!("r{i}\n")).collect();
    assert_eq!(String::from_utf8(bytes.stdout).unwrap(), expected);

    let stamped = r#"{"body":"a","timestamp":1000}
{"body":"b","timestamp":2000}
{"body":"c","timestamp":3000}
"#;
    assert!(run(&["append", "cli-basin/t", "--format", "json"], &grpc, Some(stamped.as_bytes())).status.success());
    let until = run(&["read", "cli-basin/t", "-s", "0", "--until", "2500"], &grpc, None);
    assert_eq!(String::from_utf8(until.stdout).unwrap(), "a\nb\n", "the read ends at the first record past --until");

    let past = run(&["read", "cli-basin/t", "-s", "99", "--no-follow"], &grpc, None);
    assert_eq!(past.status.code(), Some(8), "{}", String::from_utf8_lossy(&past.stderr));
    let clamped = run(&["read", "cli-basin/t", "-s", "99", "--clamp", "--no-follow"], &grpc, None);
    assert!(clamped.status.success() && clamped.stdout.is_empty(), "{}", String::from_utf8_lossy(&clamped.stderr));

    let file = dir.path().join("out.txt");
    let written = run(&["read", "cli-basin/s", "-s", "0", "-n", "3", "-o", file.to_str().unwrap()], &grpc, None);
    assert!(written.status.success() && written.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "r0\nr1\nr2\n");
    assert!(terminate(server).success());
}

/// Any bytes go in with `--format raw` (one body per line) and `json-binsafe` (base64)
/// and come out the same; text refuses a line that is not UTF-8, naming it, and appends
/// nothing of it.
#[test]
fn binary_bodies_round_trip_in_raw_and_json_binsafe() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, grpc) = start(dir.path());
    assert!(run(&["basins", "create", "cli-basin", "--create-stream-on-append"], &grpc, None).status.success());
    let input = b"x\x00\xffy\n\r\nplain\n";

    let refused = run(&["append", "cli-basin/bin"], &grpc, Some(input));
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("line 1: not UTF-8") && stderr.contains("nothing appended"), "{stderr}");

    assert!(run(&["append", "cli-basin/bin", "--format", "raw"], &grpc, Some(input)).status.success());
    let tail = run(&["check-tail", "cli-basin/bin"], &grpc, None);
    assert!(String::from_utf8_lossy(&tail.stdout).starts_with("seq_num=3 "), "only the raw append landed");
    let raw = run(&["read", "cli-basin/bin", "-s", "0", "--no-follow", "--format", "raw"], &grpc, None);
    assert_eq!(raw.stdout, input, "byte for byte");

    let binsafe = run(&["read", "cli-basin/bin", "-s", "0", "--no-follow", "--format", "json-binsafe"], &grpc, None);
    let first: serde_json::Value =
        serde_json::from_slice(binsafe.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["body"], "eAD/eQ==", "{first}");
    let copied = run(&["append", "cli-basin/copy", "--format", "json-binsafe"], &grpc, Some(&binsafe.stdout));
    assert!(copied.status.success(), "{}", String::from_utf8_lossy(&copied.stderr));
    let again = run(&["read", "cli-basin/copy", "-s", "0", "--no-follow", "--format", "raw"], &grpc, None);
    assert_eq!(again.stdout, input, "json-binsafe output appends back to the same bytes");
    assert!(terminate(server).success());
}

/// A bad line deep in the input stops `shale append` with the line's number and what
/// was appended before it: every earlier line, once.
#[test]
fn a_bad_line_names_itself_and_what_was_appended() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, grpc) = start(dir.path());
    assert!(run(&["basins", "create", "cli-basin", "--create-stream-on-append"], &grpc, None).status.success());
    let mut input: String = (0..2500).map(|i| format!("{{\"body\":\"r{i}\"}}\n")).collect();
    input += "{\"body\": oops}\n{\"body\":\"never\"}\n";
    let failed = run(&["append", "cli-basin/s", "--format", "json"], &grpc, Some(input.as_bytes()));
    assert_eq!(failed.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("line 2501: bad JSON record"), "{stderr}");
    assert!(stderr.contains("appended 2500 records, seq 0..2500"), "{stderr}");
    let read = run(&["read", "cli-basin/s", "-s", "0", "--no-follow"], &grpc, None);
    let expected: String = (0..2500).map(|i| format!("r{i}\n")).collect();
    assert_eq!(String::from_utf8(read.stdout).unwrap(), expected, "every line before the bad one, once");
    assert!(terminate(server).success());
}

/// `shale read` writes its output a batch at a time, not a record at a time: 5,000
/// records reach stdout in a few dozen write calls at most (one per record before).
#[test]
fn read_output_is_written_a_batch_at_a_time() {
    assert!(Command::new("strace").arg("-V").output().is_ok_and(|o| o.status.success()), "strace is required");
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, grpc) = start(dir.path());
    assert!(run(&["basins", "create", "cli-basin", "--create-stream-on-append"], &grpc, None).status.success());
    let input: String = (0..5000).map(|i| format!("record {i}\n")).collect();
    assert!(run(&["append", "cli-basin/s"], &grpc, Some(input.as_bytes())).status.success());

    let trace = dir.path().join("trace");
    let output = Command::new("strace")
        .args(["-f", "-e", "trace=write,writev", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_shale"))
        .args(["read", "cli-basin/s", "-s", "0", "-n", "5000", "--no-follow"])
        .env("SHALE_SERVER", &grpc)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(String::from_utf8(output.stdout).unwrap(), input);
    let calls = std::fs::read_to_string(&trace).unwrap();
    let to_stdout = calls.lines().filter(|l| l.contains("write(1,") || l.contains("writev(1,")).count();
    assert!((1..=50).contains(&to_stdout), "{to_stdout} writes to stdout for 5,000 records");
    assert!(terminate(server).success());
}

/// `shale` with `args` against `server`, with `token` as SHALE_ACCESS_TOKEN if given.
fn run_as(args: &[&str], server: &str, token: Option<&str>, stdin: &[u8]) -> Output {
    let mut command = shale();
    command.args(args).env("SHALE_SERVER", server).env_remove("SHALE_ACCESS_TOKEN");
    if let Some(token) = token {
        command.env("SHALE_ACCESS_TOKEN", token);
    }
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn tokens_are_issued_listed_and_revoked_from_the_cli() {
    const ROOT: &str = "root-token-for-the-cli-test";
    let dir = tempfile::tempdir().unwrap();
    let args = ["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    let (server, _http, grpc) = common::spawn(dir.path(), &args, &[("SHALE_ROOT_TOKEN", ROOT.to_string())]);

    let anonymous = run_as(&["basins", "list"], &grpc, None, b"");
    assert_eq!(anonymous.status.code(), Some(7));
    assert!(text(&anonymous.stderr).contains("--token or set SHALE_ACCESS_TOKEN"), "{}", text(&anonymous.stderr));

    // The connection flags before the command, as after it.
    let created = run_as(&["--server", &grpc, "--token", ROOT, "basins", "create", "token-basin"], "x:1", None, b"");
    assert!(created.status.success(), "{}", text(&created.stderr));
    assert_eq!(text(&created.stdout), "created basin token-basin\n");
    let created = run_as(&["--token", ROOT, "streams", "--server", &grpc, "create", "token-basin/s"], "x:1", None, b"");
    assert!(created.status.success(), "{}", text(&created.stderr));
    assert!(run_as(&["append", "token-basin/s"], &grpc, Some(ROOT), b"one\n").status.success());

    let issue = [
        "tokens",
        "issue",
        "reader",
        "--basins",
        "token-",
        "--streams",
        "",
        "--op-groups",
        "stream=r",
        "--ops",
        "list-basins",
    ];
    let issued = run_as(&issue, &grpc, Some(ROOT), b"");
    assert!(issued.status.success(), "{}", text(&issued.stderr));
    let reader = text(&issued.stdout).trim().to_string();
    assert!(!reader.is_empty());
    let listed = text(&run_as(&["tokens", "list"], &grpc, Some(ROOT), b"").stdout);
    let line = listed.lines().find(|l| l.starts_with("reader ")).unwrap_or_else(|| panic!("{listed}"));
    assert!(line.contains("token-*") && line.contains("list-basins") && line.contains("stream=r"), "{line}");

    // The scoped token lists basins and reads, but may not create a basin: 403, exit 7.
    assert_eq!(text(&run_as(&["basins", "list"], &grpc, Some(&reader), b"").stdout), "token-basin\n");
    let read = run_as(&["read", "token-basin/s", "-s", "0", "--no-follow"], &grpc, Some(&reader), b"");
    assert_eq!(text(&read.stdout), "one\n", "{}", text(&read.stderr));
    let refused = run_as(&["basins", "create", "token-other"], &grpc, Some(&reader), b"");
    assert_eq!(refused.status.code(), Some(7), "{}", text(&refused.stderr));
    let bad_group = run_as(&["tokens", "issue", "x", "--op-groups", "stream=x"], &grpc, Some(ROOT), b"");
    assert_eq!(bad_group.status.code(), Some(2), "clap refuses a bad op group");

    let revoked = run_as(&["tokens", "revoke", "reader"], &grpc, Some(ROOT), b"");
    assert_eq!(text(&revoked.stdout), "revoked token reader\n");
    assert_eq!(run_as(&["basins", "list"], &grpc, Some(&reader), b"").status.code(), Some(7), "revoked");
    assert!(!text(&run_as(&["tokens", "list"], &grpc, Some(ROOT), b"").stdout).contains("reader "));
    assert!(terminate(server).success());
}

#[test]
fn commands_say_what_they_did_and_a_read_past_the_tail_says_where_the_tail_is() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _http, grpc) = start(dir.path());
    let created = run(&["basins", "create", "told-basin"], &grpc, None);
    assert_eq!(text(&created.stdout), "created basin told-basin\n");
    let created = run(&["streams", "create", "told-basin/s"], &grpc, None);
    assert_eq!(text(&created.stdout), "created stream told-basin/s\n");

    let one = run(&["append", "told-basin/s"], &grpc, Some(b"only\n"));
    assert!(text(&one.stderr).contains("appended 1 record, seq 0..1"), "{}", text(&one.stderr));
    let none = run(&["append", "told-basin/s"], &grpc, Some(b""));
    assert!(none.status.success());
    assert!(text(&none.stderr).contains("nothing to append"), "{}", text(&none.stderr));

    let past = run(&["read", "told-basin/s", "-s", "100", "--no-follow"], &grpc, None);
    assert_eq!(past.status.code(), Some(8), "past the tail is not invalid arguments");
    let message = text(&past.stderr);
    assert!(message.contains("past the stream's tail (seq_num 1)") && !message.contains('{'), "{message}");

    let deleted = run(&["streams", "delete", "told-basin/s"], &grpc, None);
    assert_eq!(text(&deleted.stdout), "deleted stream told-basin/s\n");
    assert!(terminate(server).success());
}
