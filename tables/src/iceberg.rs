//! Iceberg table metadata (format v2), written to the specification: each tiering pass
//! that adds files adds one manifest (its data files), one manifest list (every
//! current manifest) and one `append` snapshot; a maintenance commit (`maintenance`)
//! writes one `replace` snapshot whose single manifest names every live file, so
//! manifests are merged and small files rewritten into larger ones. The table metadata
//! file `v<pass>.metadata.json` is made from the committed [`TableState`] alone, so it
//! can be written again, to the same bytes, after a crash.
//!
//! - Schema: the record's columns with field ids 1 to 8 (`seq_num` a `long`, `timestamp`
//!   a `timestamptz`), then any decoded body columns, each schema change a new schema id.
//! - Partitioning: by `day(timestamp)`. Engines prune the common question, a time range,
//!   by partition before opening a file, and a pass (records of one age) falls in one
//!   day, two at most around midnight, so it still writes one file or two. By stream
//!   bucket instead, each pass would write a file per bucket (small files), and a
//!   stream's rows are already grouped in every file by the sort order, whose
//!   statistics let engines skip the other streams' row groups.
//! - Sort order 1: `stream`, then `seq_num`, ascending, as every file is written.
//! - Each data file carries its bounds on `stream`, `seq_num` and `timestamp`, and each
//!   manifest the range of days it covers, so engines prune without opening files.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use crate::avro::{self, Value};
use crate::body_columns::{BodyColumn, ColumnType};
use crate::{TableRow, TableState};

/// The partition spec's id and its one field's id (Iceberg starts these at 1000).
const SPEC_ID: i32 = 0;
const PARTITION_FIELD_ID: i32 = 1000;
/// The sort order every file is written in.
const SORT_ORDER_ID: i32 = 1;
/// Milliseconds in a day: the partition is the record's day since the epoch.
const DAY_MS: u64 = 86_400_000;

/// Snapshots the table metadata keeps at least: older ones are expired once they stopped
/// being current more than the snapshot retention ago (`maintenance::expire_snapshots`).
pub const KEPT_SNAPSHOTS: usize = 20;

/// A data file as the table's metadata names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFile {
    /// The file's key on the store.
    pub path: String,
    /// Its partition: days since the epoch of every record's timestamp.
    pub day: i32,
    pub records: u64,
    pub size: u64,
    pub bounds: Bounds,
    /// The snapshot that added the file, which is also its sequence number (0 in states
    /// written before files recorded it: read as 1, older than every other).
    #[serde(default)]
    pub snapshot_id: i64,
}

impl DataFile {
    /// The snapshot that added the file, and its sequence number.
    pub fn added_in(&self) -> i64 {
        self.snapshot_id.max(1)
    }
}

/// A data file's lowest and highest values of the columns engines prune by.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    pub stream: (String, String),
    pub seq_num: (u64, u64),
    pub timestamp_ms: (u64, u64),
}

impl Bounds {
    /// The bounds of `rows`, none when empty.
    pub fn of(rows: &[TableRow]) -> Option<Self> {
        let first = rows.first()?;
        let mut bounds = Bounds {
            stream: (first.stream.clone(), first.stream.clone()),
            seq_num: (first.record.seq_num, first.record.seq_num),
            timestamp_ms: (first.record.timestamp, first.record.timestamp),
        };
        for TableRow { stream, record, .. } in rows {
            if *stream < bounds.stream.0 {
                bounds.stream.0 = stream.clone();
            }
            if *stream > bounds.stream.1 {
                bounds.stream.1 = stream.clone();
            }
            bounds.seq_num = (bounds.seq_num.0.min(record.seq_num), bounds.seq_num.1.max(record.seq_num));
            bounds.timestamp_ms =
                (bounds.timestamp_ms.0.min(record.timestamp), bounds.timestamp_ms.1.max(record.timestamp));
        }
        Some(bounds)
    }
}

/// The partition of a record: its timestamp's day since the epoch.
pub fn day_of(timestamp_ms: u64) -> i32 {
    i32::try_from(timestamp_ms / DAY_MS).unwrap_or(i32::MAX)
}

/// A day as `YYYY-MM-DD` (the proleptic Gregorian calendar, as Iceberg's `day`
/// partition paths name it).
pub fn day_name(day: i32) -> String {
    // Days to civil date, after Howard Hinnant's `civil_from_days`.
    let z = i64::from(day) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// A manifest as a manifest list names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The manifest's key on the store.
    pub path: String,
    pub length: u64,
    /// The snapshot (pass) that added it, which is also its sequence number.
    pub snapshot_id: i64,
    /// Files and rows the manifest adds.
    pub files: u64,
    pub rows: u64,
    /// The lowest and highest day of its files.
    pub days: (i32, i32),
    /// Files and rows it names as already in the table (a merged manifest's).
    #[serde(default)]
    pub existing_files: u64,
    #[serde(default)]
    pub existing_rows: u64,
    /// Files and rows it names as removed by its snapshot (a rewrite's).
    #[serde(default)]
    pub deleted_files: u64,
    #[serde(default)]
    pub deleted_rows: u64,
    /// The lowest sequence number of its live files (0: its own snapshot's).
    #[serde(default)]
    pub min_sequence: i64,
}

/// A committed snapshot: one pass that added files, or one maintenance commit that
/// replaced small files or merged manifests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The pass number, which is also the snapshot's sequence number.
    pub id: i64,
    pub timestamp_ms: u64,
    /// The manifest list's key on the store.
    pub manifest_list: String,
    pub schema_id: i32,
    pub added_files: u64,
    pub added_rows: u64,
    #[serde(default)]
    pub operation: Operation,
    #[serde(default)]
    pub deleted_files: u64,
    #[serde(default)]
    pub deleted_rows: u64,
}

/// What a snapshot did, as Iceberg's snapshot summary names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// New files only.
    #[default]
    Append,
    /// Files rewritten or manifests merged: the same rows, differently laid out.
    Replace,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Append => "append",
            Operation::Replace => "replace",
        }
    }
}

/// How a manifest names a file, as Iceberg's manifest entry status counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryStatus {
    /// Added by an earlier snapshot, still live.
    Existing = 0,
    /// Added by the manifest's snapshot.
    Added = 1,
    /// Removed by the manifest's snapshot.
    Deleted = 2,
}

/// Where keys on the store are, as URIs engines open: `location` is the store's URL
/// (`file:///abs/dir`, `s3://bucket/prefix`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreLocation(pub String);

impl StoreLocation {
    /// The location of the store opened from `url`: a `file://` path made absolute (as
    /// engines on the same machine open it), any other URL as it is.
    pub fn of_url(url: &str) -> Self {
        match url.strip_prefix("file://") {
            Some(path) => {
                let absolute = std::fs::canonicalize(path).map_or(path.to_string(), |p| p.display().to_string());
                Self(format!("file://{absolute}"))
            }
            None => Self(url.to_string()),
        }
    }

    pub fn uri(&self, key: &str) -> String {
        format!("{}/{}", self.0.trim_end_matches('/'), key)
    }
}

/// The schema `schema_id` as Iceberg's JSON: the record's columns, then the decoded
/// columns that schema has.
pub fn schema(schema_id: i32, columns: &[BodyColumn]) -> Json {
    let binary_pair = json!({
        "type": "struct",
        "fields": [
            { "id": 6, "name": "key", "required": true, "type": "binary" },
            { "id": 7, "name": "value", "required": true, "type": "binary" },
        ],
    });
    let mut fields = vec![
        json!({ "id": 1, "name": "stream", "required": true, "type": "string" }),
        json!({ "id": 2, "name": "seq_num", "required": true, "type": "long" }),
        json!({ "id": 3, "name": "timestamp", "required": true, "type": "timestamptz" }),
        json!({ "id": 4, "name": "headers", "required": true, "type": {
            "type": "list", "element-id": 5, "element-required": true, "element": binary_pair,
        } }),
        json!({ "id": 8, "name": "body", "required": true, "type": "binary" }),
    ];
    for column in columns.iter().filter(|c| c.schema_id <= schema_id) {
        let kind = match column.column_type {
            ColumnType::Boolean => "boolean",
            ColumnType::Long => "long",
            ColumnType::Double => "double",
            ColumnType::String => "string",
            ColumnType::Binary => "binary",
        };
        fields.push(json!({ "id": column.id, "name": column.name, "required": false, "type": kind }));
    }
    json!({ "type": "struct", "schema-id": schema_id, "fields": fields })
}

/// The table's current schema id: the last one a decoded column was added under.
pub fn current_schema_id(columns: &[BodyColumn]) -> i32 {
    columns.iter().map(|c| c.schema_id).max().unwrap_or(0)
}

fn partition_fields() -> Json {
    json!([{ "source-id": 3, "field-id": PARTITION_FIELD_ID, "name": "timestamp_day", "transform": "day" }])
}

/// The Avro schema of a manifest's entries (Iceberg v2, the fields this table writes).
const MANIFEST_ENTRY_SCHEMA: &str = r#"{"type":"record","name":"manifest_entry","fields":[
{"name":"status","type":"int","field-id":0},
{"name":"snapshot_id","type":["null","long"],"default":null,"field-id":1},
{"name":"sequence_number","type":["null","long"],"default":null,"field-id":3},
{"name":"file_sequence_number","type":["null","long"],"default":null,"field-id":4},
{"name":"data_file","type":{"type":"record","name":"r2","fields":[
 {"name":"content","type":"int","field-id":134},
 {"name":"file_path","type":"string","field-id":100},
 {"name":"file_format","type":"string","field-id":101},
 {"name":"partition","type":{"type":"record","name":"r102","fields":[
  {"name":"timestamp_day","type":["null",{"type":"int","logicalType":"date"}],"default":null,"field-id":1000}]},"field-id":102},
 {"name":"record_count","type":"long","field-id":103},
 {"name":"file_size_in_bytes","type":"long","field-id":104},
 {"name":"lower_bounds","type":["null",{"type":"array","logicalType":"map","items":{"type":"record","name":"k126_v127","fields":[
  {"name":"key","type":"int","field-id":126},{"name":"value","type":"bytes","field-id":127}]}}],"default":null,"field-id":125},
 {"name":"upper_bounds","type":["null",{"type":"array","logicalType":"map","items":{"type":"record","name":"k129_v130","fields":[
  {"name":"key","type":"int","field-id":129},{"name":"value","type":"bytes","field-id":130}]}}],"default":null,"field-id":128},
 {"name":"sort_order_id","type":["null","int"],"default":null,"field-id":140}
]},"field-id":2}]}"#;

/// The Avro schema of a manifest list's entries (Iceberg v2).
const MANIFEST_FILE_SCHEMA: &str = r#"{"type":"record","name":"manifest_file","fields":[
{"name":"manifest_path","type":"string","field-id":500},
{"name":"manifest_length","type":"long","field-id":501},
{"name":"partition_spec_id","type":"int","field-id":502},
{"name":"content","type":"int","field-id":517},
{"name":"sequence_number","type":"long","field-id":515},
{"name":"min_sequence_number","type":"long","field-id":516},
{"name":"added_snapshot_id","type":"long","field-id":503},
{"name":"added_files_count","type":"int","field-id":504},
{"name":"existing_files_count","type":"int","field-id":505},
{"name":"deleted_files_count","type":"int","field-id":506},
{"name":"added_rows_count","type":"long","field-id":512},
{"name":"existing_rows_count","type":"long","field-id":513},
{"name":"deleted_rows_count","type":"long","field-id":514},
{"name":"partitions","type":["null",{"type":"array","items":{"type":"record","name":"r508","fields":[
 {"name":"contains_null","type":"boolean","field-id":509},
 {"name":"contains_nan","type":["null","boolean"],"default":null,"field-id":518},
 {"name":"lower_bound","type":["null","bytes"],"default":null,"field-id":510},
 {"name":"upper_bound","type":["null","bytes"],"default":null,"field-id":511}]},"element-id":508}],"default":null,"field-id":507}
]}"#;

/// Bounds as Iceberg's single-value serialization: strings as UTF-8, longs and
/// timestamps (microseconds) as 8 bytes little-endian, dates as 4.
fn bound_entries(bounds: &Bounds, pick: fn((u64, u64)) -> u64, stream: &str) -> Value {
    let long = |v: u64| Value::Bytes((v as i64).to_le_bytes().to_vec());
    let entry = |key: i32, value: Value| Value::Record(vec![Value::Int(key), value]);
    Value::some(Value::Array(vec![
        entry(1, Value::Bytes(stream.as_bytes().to_vec())),
        entry(2, long(pick(bounds.seq_num))),
        entry(3, long(pick(bounds.timestamp_ms).saturating_mul(1000))),
    ]))
}

/// A manifest of `entries`, written by snapshot `snapshot_id` under the schema
/// `schema_id`: added files carry that snapshot (and sequence number), existing and
/// deleted ones the sequence number of the snapshot that added them.
pub fn manifest(
    entries: &[(EntryStatus, &DataFile)],
    location: &StoreLocation,
    snapshot_id: i64,
    schema_id: i32,
    columns: &[BodyColumn],
) -> Vec<u8> {
    let entries: Vec<Value> = entries
        .iter()
        .map(|&(status, file)| {
            let data_file = Value::Record(vec![
                Value::Int(0),
                Value::String(location.uri(&file.path)),
                Value::String("PARQUET".into()),
                Value::Record(vec![Value::some(Value::Int(file.day))]),
                Value::Long(file.records as i64),
                Value::Long(file.size as i64),
                bound_entries(&file.bounds, |(low, _)| low, &file.bounds.stream.0),
                bound_entries(&file.bounds, |(_, high)| high, &file.bounds.stream.1),
                Value::some(Value::Int(SORT_ORDER_ID)),
            ]);
            let (entry_snapshot, sequence) = match status {
                EntryStatus::Added => (snapshot_id, snapshot_id),
                EntryStatus::Existing => (file.added_in(), file.added_in()),
                EntryStatus::Deleted => (snapshot_id, file.added_in()),
            };
            Value::Record(vec![
                Value::Int(status as i32),
                Value::some(Value::Long(entry_snapshot)),
                Value::some(Value::Long(sequence)),
                Value::some(Value::Long(sequence)),
                data_file,
            ])
        })
        .collect();
    let metadata = [
        ("schema", schema(schema_id, columns).to_string()),
        ("schema-id", schema_id.to_string()),
        ("partition-spec", partition_fields().to_string()),
        ("partition-spec-id", SPEC_ID.to_string()),
        ("format-version", "2".to_string()),
        ("content", "data".to_string()),
    ];
    avro::container(MANIFEST_ENTRY_SCHEMA, &metadata, &entries, sync_marker(snapshot_id, 0))
}

/// A manifest list naming `manifests`, for snapshot `snapshot_id`.
pub fn manifest_list(
    manifests: &[Manifest],
    location: &StoreLocation,
    snapshot_id: i64,
    parent: Option<i64>,
) -> Vec<u8> {
    let day = |d: i32| Value::some(Value::Bytes(d.to_le_bytes().to_vec()));
    let entries: Vec<Value> = manifests
        .iter()
        .map(|manifest| {
            let summary =
                Value::Record(vec![Value::Boolean(false), Value::none(), day(manifest.days.0), day(manifest.days.1)]);
            Value::Record(vec![
                Value::String(location.uri(&manifest.path)),
                Value::Long(manifest.length as i64),
                Value::Int(SPEC_ID),
                Value::Int(0), // data
                Value::Long(manifest.snapshot_id),
                Value::Long(if manifest.min_sequence > 0 { manifest.min_sequence } else { manifest.snapshot_id }),
                Value::Long(manifest.snapshot_id),
                Value::Int(manifest.files as i32),
                Value::Int(manifest.existing_files as i32),
                Value::Int(manifest.deleted_files as i32),
                Value::Long(manifest.rows as i64),
                Value::Long(manifest.existing_rows as i64),
                Value::Long(manifest.deleted_rows as i64),
                Value::some(Value::Array(vec![summary])),
            ])
        })
        .collect();
    let metadata = [
        ("snapshot-id", snapshot_id.to_string()),
        ("parent-snapshot-id", parent.map_or("null".to_string(), |p| p.to_string())),
        ("sequence-number", snapshot_id.to_string()),
        ("format-version", "2".to_string()),
    ];
    avro::container(MANIFEST_FILE_SCHEMA, &metadata, &entries, sync_marker(snapshot_id, 1))
}

/// A sync marker that depends only on what the file is, so a file written again is the
/// same bytes.
fn sync_marker(snapshot_id: i64, kind: u64) -> [u8; 16] {
    let mut marker = [0u8; 16];
    marker[..8].copy_from_slice(&crate::fnv1a(&snapshot_id.to_le_bytes(), kind).to_le_bytes());
    marker[8..].copy_from_slice(&crate::fnv1a(&snapshot_id.to_le_bytes(), kind + 2).to_le_bytes());
    marker
}

/// The key of pass `pass`'s table metadata file under the table root.
pub fn metadata_file(table_root: &str, pass: u64) -> String {
    format!("{table_root}/metadata/v{pass}.metadata.json")
}

/// The table metadata of `state`, the table at `table_root` on the store.
pub fn table_metadata(state: &TableState, table_root: &str, location: &StoreLocation) -> Json {
    let current_schema = current_schema_id(&state.body_columns);
    let schemas: Vec<Json> = (0..=current_schema).map(|id| schema(id, &state.body_columns)).collect();
    let last_column_id = state.body_columns.iter().map(|c| c.id).max().unwrap_or(8).max(8);
    let snapshots: Vec<Json> = state
        .snapshots
        .iter()
        .map(|snapshot| {
            let mut value = json!({
                "snapshot-id": snapshot.id,
                "sequence-number": snapshot.id,
                "timestamp-ms": snapshot.timestamp_ms,
                "manifest-list": location.uri(&snapshot.manifest_list),
                "schema-id": snapshot.schema_id,
                "summary": {
                    "operation": snapshot.operation.name(),
                    "added-data-files": snapshot.added_files.to_string(),
                    "added-records": snapshot.added_rows.to_string(),
                },
            });
            if snapshot.operation == Operation::Replace {
                value["summary"]["deleted-data-files"] = json!(snapshot.deleted_files.to_string());
                value["summary"]["deleted-records"] = json!(snapshot.deleted_rows.to_string());
            }
            if snapshot.id > 1 {
                value["parent-snapshot-id"] = json!(snapshot.id - 1);
            }
            value
        })
        .collect();
    let current = state.snapshots.last();
    let mut metadata = json!({
        "format-version": 2,
        "table-uuid": state.table_uuid,
        "location": location.uri(table_root),
        "last-sequence-number": current.map_or(0, |s| s.id),
        "last-updated-ms": current.map_or(0, |s| s.timestamp_ms),
        "last-column-id": last_column_id,
        "current-schema-id": current_schema,
        "schemas": schemas,
        "default-spec-id": SPEC_ID,
        "partition-specs": [{ "spec-id": SPEC_ID, "fields": partition_fields() }],
        "last-partition-id": PARTITION_FIELD_ID,
        "default-sort-order-id": SORT_ORDER_ID,
        "sort-orders": [
            { "order-id": 0, "fields": [] },
            { "order-id": SORT_ORDER_ID, "fields": [
                { "transform": "identity", "source-id": 1, "direction": "asc", "null-order": "nulls-first" },
                { "transform": "identity", "source-id": 2, "direction": "asc", "null-order": "nulls-first" },
            ] },
        ],
        "properties": { "write.format.default": "parquet", "write.parquet.compression-codec": "zstd" },
        "snapshots": snapshots,
        "snapshot-log": state.snapshots.iter().map(|s| json!({ "timestamp-ms": s.timestamp_ms, "snapshot-id": s.id })).collect::<Vec<_>>(),
        "metadata-log": state.snapshots.iter().rev().skip(1).rev().map(|s| json!({
            "timestamp-ms": s.timestamp_ms,
            "metadata-file": location.uri(&metadata_file(table_root, s.id as u64)),
        })).collect::<Vec<_>>(),
    });
    if let Some(current) = current {
        metadata["current-snapshot-id"] = json!(current.id);
        metadata["refs"] = json!({ "main": { "snapshot-id": current.id, "type": "branch" } });
    }
    metadata
}

/// A table's id: made from the basin's name and creation time, so a basin deleted and
/// created again is another table, and a table written again keeps its id.
pub fn table_uuid(basin: &str, created_at_ms: u64) -> String {
    let high = crate::fnv1a(basin.as_bytes(), created_at_ms);
    let low = crate::fnv1a(basin.as_bytes(), created_at_ms.wrapping_add(1));
    // RFC 9562 version 8 (custom) and variant bits.
    let high = (high & !0xf000) | 0x8000;
    let low = (low & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xffff,
        high & 0xffff,
        low >> 48,
        low & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_named_as_calendar_dates() {
        assert_eq!(day_name(0), "1970-01-01");
        assert_eq!(day_name(day_of(1_700_000_000_000)), "2023-11-14");
        assert_eq!(day_name(day_of(951_782_400_000)), "2000-02-29");
        assert_eq!(day_name(-1), "1969-12-31");
        assert_eq!(day_of(DAY_MS - 1), 0);
        assert_eq!(day_of(DAY_MS), 1);
    }

    #[test]
    fn table_ids_are_stable_uuids_per_basin_incarnation() {
        let id = table_uuid("basin", 1);
        assert_eq!(id, table_uuid("basin", 1));
        assert_ne!(id, table_uuid("basin", 2));
        assert_ne!(id, table_uuid("other", 1));
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12]);
        assert!(parts[2].starts_with('8'), "version 8: {id}");
    }

    /// Every schema keeps the record's columns; a decoded column appears from the schema
    /// that added it on.
    #[test]
    fn schemas_grow_with_decoded_columns() {
        let columns = vec![
            BodyColumn {
                id: 9,
                name: "amount".into(),
                field: "amount".into(),
                column_type: ColumnType::Double,
                schema_id: 1,
                header: None,
            },
            BodyColumn {
                id: 10,
                name: "note".into(),
                field: "note".into(),
                column_type: ColumnType::String,
                schema_id: 2,
                header: None,
            },
        ];
        let names = |id| -> Vec<String> {
            schema(id, &columns)["fields"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names(0), ["stream", "seq_num", "timestamp", "headers", "body"]);
        assert_eq!(names(1).last().unwrap(), "amount");
        assert_eq!(names(2)[5..], ["amount".to_string(), "note".to_string()]);
        assert_eq!(current_schema_id(&columns), 2);
        assert_eq!(current_schema_id(&[]), 0);
    }
}
