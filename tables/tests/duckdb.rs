//! A file `write_parquet` makes, as DuckDB reads it: every record of 50 streams once,
//! dense per stream, with its timestamp, headers and body, in the types Iceberg has.

#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use shale_proto::record::{Header, SequencedRecord};
use shale_tables::{write_parquet, TableRow};

fn python() -> std::path::PathBuf {
    let venv = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    assert!(venv.exists(), "{} missing: run scripts/test.sh (localstack/s3-local.sh install)", venv.display());
    venv
}

#[test]
fn duckdb_reads_every_record_once_with_its_fields() {
    let mut rows = Vec::new();
    for stream in 0..50u64 {
        for seq_num in 0..(20 + stream) {
            let headers = match seq_num % 3 {
                0 => vec![],
                _ => vec![Header { name: Bytes::from("k"), value: Bytes::from(format!("v{seq_num}")) }],
            };
            let body = Bytes::from(format!("s{stream}-r{seq_num}"));
            let record =
                SequencedRecord { seq_num, timestamp: 1_700_000_000_000 + seq_num * 10, headers: headers.into(), body };
            rows.push(TableRow { stream: format!("stream-{stream:02}"), created_at_ms: 0, record });
        }
    }
    rows.reverse();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("part-0.parquet");
    std::fs::write(&file, write_parquet(rows, &[]).unwrap()).unwrap();

    let script = r#"
import sys, duckdb
path = sys.argv[1]
q = lambda sql: duckdb.sql(sql.replace("T", f"read_parquet('{path}')")).fetchall()
print(q("select count(*), count(distinct stream) from T")[0])
dense = q("select stream, count(*), min(seq_num), max(seq_num) from T group by stream order by stream")
print(all(c == 20 + i and lo == 0 and hi == c - 1 for i, (s, c, lo, hi) in enumerate(dense)))
print(q("select typeof(seq_num), typeof(timestamp), epoch_ms(timestamp), decode(body), headers[1].key, decode(headers[1].value) from T where stream = 'stream-07' and seq_num = 5")[0])
print(q("select count(*) from T where stream = 'stream-07' and len(headers) = 0")[0][0])
"#;
    let output = std::process::Command::new(python()).arg("-c").arg(script).arg(&file).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    let total: u64 = (0..50).map(|s| 20 + s).sum();
    assert_eq!(lines[0], format!("({total}, 50)"));
    assert_eq!(lines[1], "True", "every stream dense from 0");
    assert_eq!(lines[2], "('BIGINT', 'TIMESTAMP WITH TIME ZONE', 1700000000050, 's7-r5', b'k', 'v5')");
    assert_eq!(lines[3], "9", "records 0, 3, ..., 24 of stream-07's 27 have no headers");
}
