//! The table tier as engines read it: `tests/python/table_check.py` run on a store's
//! table, DuckDB over its Parquet files and pyiceberg over its Iceberg metadata.

use serde_json::{json, Value};
use shale_proto::record::SequencedRecord;

/// What both engines saw of a basin's table.
#[derive(Debug)]
pub struct TableView {
    /// Rows as `[stream, seq_num, timestamp_ms, [[key_hex, value_hex]...], body_hex]`,
    /// sorted by stream and sequence number: DuckDB over the files, and pyiceberg.
    pub duckdb: Vec<Value>,
    pub iceberg: Vec<Value>,
    /// Each query's result, per engine.
    pub duckdb_sql: Vec<Value>,
    pub iceberg_sql: Vec<Value>,
    /// Per row filter: the rows pyiceberg's scan with it returns (pruned by the table
    /// metadata's bounds and partitions), and the rows DuckDB finds with it as a WHERE.
    pub filters: Vec<(u64, u64)>,
    /// Snapshots in the table metadata.
    pub snapshots: u64,
    /// The published metadata version read (`v<version>.metadata.json`, the pass that
    /// committed it).
    pub version: u64,
    /// Each schema's column names, oldest schema first.
    pub schemas: Vec<Vec<String>>,
}

/// Records tiered so far by `basin`'s committed table state in the local data directory
/// `data_dir` (`shale-data` of a `shale serve`): the sum of its streams' positions; 0
/// before the first pass commits.
pub fn tiered_records(data_dir: &std::path::Path, basin: &str) -> u64 {
    let Ok(text) = std::fs::read(data_dir.join(format!("tables/{basin}/state.json"))) else { return 0 };
    let state: Value = serde_json::from_slice(&text).expect("a committed table state is JSON");
    let positions = state["positions"].as_object().expect("a table state has positions");
    positions.values().map(|p| p["next_seq"].as_u64().expect("a position has next_seq")).sum()
}

/// A record as [`TableView`] shows a row of `stream`.
pub fn table_row(stream: &str, record: &SequencedRecord) -> Value {
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02X}")).collect::<String>();
    let headers: Vec<Value> = record.headers.iter().map(|h| json!([hex(&h.name), hex(&h.value)])).collect();
    json!([stream, record.seq_num, record.timestamp, headers, hex(&record.body)])
}

/// Runs both engines on `basin`'s table on the store at `location` (`file://` or
/// `s3://`; `endpoint` is the S3 server's), with `{T}` in each of `queries` standing for
/// the engine's table, and each of `filters` a row filter (pyiceberg's expression
/// syntax, also valid SQL).
pub fn read_table(
    location: &str,
    basin: &str,
    endpoint: Option<&str>,
    queries: &[&str],
    filters: &[&str],
) -> TableView {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("../.venv/bin/python");
    assert!(python.exists(), "{} missing: run scripts/test.sh (localstack/s3-local.sh install)", python.display());
    let mut command = std::process::Command::new(python);
    command.arg(root.join("python/table_check.py")).args([location, basin]);
    if let Some(endpoint) = endpoint {
        command.args(["--endpoint", endpoint]);
    }
    for query in queries {
        command.args(["--sql", query]);
    }
    for filter in filters {
        command.args(["--filter", filter]);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "table_check.py: {}", String::from_utf8_lossy(&output.stderr));
    let mut out: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut take = |key: &str| out[key].take().as_array().cloned().unwrap_or_default();
    let (duckdb, iceberg, duckdb_sql, iceberg_sql) =
        (take("duckdb"), take("iceberg"), take("duckdb_sql"), take("iceberg_sql"));
    let seen = take("filters").iter().map(|f| (f[0].as_u64().unwrap(), f[1].as_u64().unwrap())).collect();
    let schemas = out["schemas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect())
        .collect();
    let (snapshots, version) = (out["snapshots"].as_u64().unwrap(), out["version"].as_u64().unwrap());
    TableView { duckdb, iceberg, duckdb_sql, iceberg_sql, filters: seen, snapshots, version, schemas }
}
