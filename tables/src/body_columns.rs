//! Decoded JSON bodies: a basin that declares its bodies JSON gets each top-level field of
//! its records' bodies as a typed, optional column beside `body`.
//!
//! A field's type is chosen the pass it first appears in, from every value it has in
//! that pass: booleans make a `boolean` column, integers a `long`, numbers with a
//! fraction (or integers mixed with them) a `double`, and strings, objects, arrays or
//! a mix of kinds a `string` (objects and arrays as their JSON text). The type never
//! changes afterwards: a later value that does not fit (a string in a `long` column, a
//! fraction in a `long` column) is null there, and the body keeps it. A body that is
//! not a JSON object has only the binary column. Columns are added, never removed or
//! renamed: each pass that adds some makes a new schema, so a table's schema history is
//! the order its fields appeared in.
//!
//! Records with a key (the reserved [`KEY_HEADER`], which Kafka's producers fill) get
//! one more column the same way, whatever the body format: `key`, binary, added by the
//! first pass that tiers a keyed record. The header stays in `headers` too, so the
//! table keeps every record whole.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use shale_proto::record::{kafka_key, KEY_HEADER};
use shale_proto::Header;

/// The first field id of a decoded column: 1 to 8 are the record's own columns.
pub const FIRST_BODY_COLUMN_ID: i32 = 9;

/// Decoded columns a table has at most; fields appearing after that stay in `body`
/// only, so a stream of arbitrary keys cannot grow the schema without bound.
pub const MAX_BODY_COLUMNS: usize = 256;

/// The record's own columns: a body field of one of these names becomes `json_<name>`.
const RECORD_COLUMNS: [&str; 5] = ["stream", "seq_num", "timestamp", "headers", "body"];

/// How a decoded column's values are typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    Boolean,
    Long,
    Double,
    String,
    Binary,
}

/// One decoded column of a table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BodyColumn {
    /// The Iceberg field id (and the Parquet field id).
    pub id: i32,
    /// The column's name: the body field's, or `json_<field>` for a record column's name.
    pub name: String,
    /// The top-level body field it holds (empty for the key column).
    pub field: String,
    /// Set on the key column: its values are this header's, not a body field's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    pub column_type: ColumnType,
    /// The schema that added it.
    pub schema_id: i32,
}

/// One decoded value of a row.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Null,
    Boolean(bool),
    Long(i64),
    Double(f64),
    String(String),
    Binary(Bytes),
}

/// A body's top-level fields, when it is a JSON object.
pub fn decode(body: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(fields)) => Some(fields),
        _ => None,
    }
}

/// `columns` and, after them, a column under schema `schema_id` for each field of
/// `bodies` that has none yet, in the order the fields first appear (one body's fields
/// by name).
pub fn evolve<'a>(
    columns: &[BodyColumn],
    bodies: impl IntoIterator<Item = &'a [u8]>,
    schema_id: i32,
) -> Vec<BodyColumn> {
    let mut evolved = columns.to_vec();
    let mut new_fields: Vec<(String, ColumnType)> = Vec::new();
    for fields in bodies.into_iter().filter_map(decode) {
        for (field, value) in fields {
            let Some(kind) = kind_of(&value) else { continue };
            if evolved.iter().any(|c| c.field == field) {
                continue;
            }
            match new_fields.iter_mut().find(|(name, _)| *name == field) {
                Some((_, seen)) => *seen = widen(*seen, kind),
                None => new_fields.push((field, kind)),
            }
        }
    }
    let mut next_id = columns.iter().map(|c| c.id + 1).max().unwrap_or(FIRST_BODY_COLUMN_ID);
    for (field, column_type) in new_fields.into_iter().filter(|(field, _)| !field.is_empty()) {
        let name = match RECORD_COLUMNS.contains(&field.as_str()) {
            true => format!("json_{field}"),
            false => field.clone(),
        };
        if evolved.len() >= MAX_BODY_COLUMNS || evolved.iter().any(|c| c.name == name) {
            continue;
        }
        evolved.push(BodyColumn { id: next_id, name, field, column_type, schema_id, header: None });
        next_id += 1;
    }
    evolved
}

/// The key column's name, or `kafka_key` where a decoded body field already took `key`.
const KEY_COLUMN: [&str; 2] = ["key", "kafka_key"];

/// `columns` and, when they have none yet and a record of `records` has a key, the key
/// column under schema `schema_id`.
pub fn with_key_column<'a>(
    columns: Vec<BodyColumn>,
    mut records: impl Iterator<Item = &'a [Header]>,
    schema_id: i32,
) -> Vec<BodyColumn> {
    let has_key = |c: &BodyColumn| c.header.as_deref() == Some(key_header_name());
    if columns.iter().any(has_key) || !records.any(|headers| kafka_key(headers).is_some()) {
        return columns;
    }
    let Some(name) = KEY_COLUMN.into_iter().find(|name| !columns.iter().any(|c| c.name == *name)) else {
        return columns;
    };
    let id = columns.iter().map(|c| c.id + 1).max().unwrap_or(FIRST_BODY_COLUMN_ID);
    let mut columns = columns;
    columns.push(BodyColumn {
        id,
        name: name.to_string(),
        field: String::new(),
        column_type: ColumnType::Binary,
        schema_id,
        header: Some(key_header_name().to_string()),
    });
    columns
}

fn key_header_name() -> &'static str {
    std::str::from_utf8(KEY_HEADER).expect("the key header's name is ASCII")
}

/// A record's value in `column`: a header's value for the key column, else the body
/// field's (`fields` is the decoded body, if it is a JSON object).
pub fn cell_of(column: &BodyColumn, headers: &[Header], fields: Option<&Map<String, Value>>) -> Cell {
    match &column.header {
        Some(name) => headers
            .iter()
            .find(|h| h.name.as_ref() == name.as_bytes())
            .map_or(Cell::Null, |h| Cell::Binary(h.value.clone())),
        None => cell(column.column_type, fields.and_then(|fields| fields.get(&column.field))),
    }
}

/// The type a value alone would give its column; none for `null`.
fn kind_of(value: &Value) -> Option<ColumnType> {
    match value {
        Value::Null => None,
        Value::Bool(_) => Some(ColumnType::Boolean),
        Value::Number(n) if n.is_i64() => Some(ColumnType::Long),
        Value::Number(_) => Some(ColumnType::Double),
        Value::String(_) | Value::Array(_) | Value::Object(_) => Some(ColumnType::String),
    }
}

fn widen(a: ColumnType, b: ColumnType) -> ColumnType {
    use ColumnType::*;
    match (a, b) {
        (a, b) if a == b => a,
        (Long, Double) | (Double, Long) => Double,
        _ => String,
    }
}

/// A field's value in a column of `column_type`: null when absent or not of the type.
pub fn cell(column_type: ColumnType, value: Option<&Value>) -> Cell {
    match (column_type, value) {
        (_, None | Some(Value::Null)) => Cell::Null,
        (ColumnType::Boolean, Some(Value::Bool(b))) => Cell::Boolean(*b),
        (ColumnType::Long, Some(Value::Number(n))) => n.as_i64().map_or(Cell::Null, Cell::Long),
        (ColumnType::Double, Some(Value::Number(n))) => n.as_f64().map_or(Cell::Null, Cell::Double),
        (ColumnType::String, Some(Value::String(s))) => Cell::String(s.clone()),
        (ColumnType::String, Some(other)) => Cell::String(other.to_string()),
        _ => Cell::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evolved(columns: &[BodyColumn], bodies: &[&str], schema_id: i32) -> Vec<BodyColumn> {
        evolve(columns, bodies.iter().map(|b| b.as_bytes()), schema_id)
    }

    fn summary(columns: &[BodyColumn]) -> Vec<(i32, &str, &str, ColumnType, i32)> {
        columns.iter().map(|c| (c.id, c.name.as_str(), c.field.as_str(), c.column_type, c.schema_id)).collect()
    }

    /// Types come from every value of the pass; record column names are prefixed; null
    /// values and non-object bodies add nothing.
    #[test]
    fn new_fields_are_typed_by_every_value_they_have() {
        let columns = evolved(
            &[],
            &[
                r#"{"amount": 5, "ok": true, "name": "a", "n": null, "timestamp": 1}"#,
                r#"{"amount": 7.5, "tags": ["x"], "mixed": 1}"#,
                r#"{"mixed": "one", "ok": false}"#,
                "not json",
                "[1, 2]",
            ],
            1,
        );
        use ColumnType::*;
        assert_eq!(
            summary(&columns),
            [
                (9, "amount", "amount", Double, 1),
                (10, "name", "name", String, 1),
                (11, "ok", "ok", Boolean, 1),
                (12, "json_timestamp", "timestamp", Long, 1),
                (13, "mixed", "mixed", String, 1),
                (14, "tags", "tags", String, 1),
            ]
        );
    }

    /// A later pass keeps the columns as they are and adds the new field under the new
    /// schema with the next id.
    #[test]
    fn a_later_field_is_a_new_column_in_a_new_schema() {
        let first = evolved(&[], &[r#"{"amount": 5}"#], 1);
        let second = evolved(&first, &[r#"{"amount": "lots", "currency": "EUR"}"#], 2);
        assert_eq!(
            summary(&second),
            [(9, "amount", "amount", ColumnType::Long, 1), (10, "currency", "currency", ColumnType::String, 2)]
        );
        assert_eq!(evolved(&second, &[r#"{"amount": 1}"#], 3), second, "nothing new, nothing added");
    }

    #[test]
    fn columns_stop_at_the_bound() {
        let body = format!(
            "{{{}}}",
            (0..MAX_BODY_COLUMNS + 10).map(|i| format!("\"f{i}\": {i}")).collect::<Vec<_>>().join(",")
        );
        assert_eq!(evolved(&[], &[body.as_str()], 1).len(), MAX_BODY_COLUMNS);
    }

    /// The first keyed record adds `key` (binary, from the header); a later pass keeps
    /// it; a decoded field already named `key` moves it to `kafka_key`.
    #[test]
    fn a_keyed_record_adds_the_key_column_once() {
        let keyed = [Header { name: Bytes::from_static(KEY_HEADER), value: Bytes::from_static(b"k1") }];
        let plain: [Header; 0] = [];
        assert!(with_key_column(vec![], [&plain[..]].into_iter(), 1).is_empty(), "no key, no column");
        let columns = with_key_column(vec![], [&plain[..], &keyed[..]].into_iter(), 1);
        assert_eq!(summary(&columns), [(9, "key", "", ColumnType::Binary, 1)]);
        assert_eq!(with_key_column(columns.clone(), [&keyed[..]].into_iter(), 2), columns);
        let decoded = evolved(&[], &[r#"{"key": "x"}"#], 1);
        let both = with_key_column(decoded, [&keyed[..]].into_iter(), 2);
        assert_eq!(summary(&both)[1], (10, "kafka_key", "", ColumnType::Binary, 2));
        assert_eq!(cell_of(&both[1], &keyed, None), Cell::Binary(Bytes::from_static(b"k1")));
        assert_eq!(cell_of(&both[1], &plain, None), Cell::Null);
    }

    /// Values that do not fit the column's type are null there.
    #[test]
    fn cells_fit_the_column_or_are_null() {
        let v = |json: &str| serde_json::from_str::<Value>(json).unwrap();
        assert_eq!(cell(ColumnType::Long, Some(&v("42"))), Cell::Long(42));
        assert_eq!(cell(ColumnType::Long, Some(&v("4.5"))), Cell::Null);
        assert_eq!(cell(ColumnType::Long, Some(&v("\"42\""))), Cell::Null);
        assert_eq!(cell(ColumnType::Double, Some(&v("42"))), Cell::Double(42.0));
        assert_eq!(cell(ColumnType::Boolean, Some(&v("true"))), Cell::Boolean(true));
        assert_eq!(cell(ColumnType::String, Some(&v("{\"a\":1}"))), Cell::String("{\"a\":1}".into()));
        assert_eq!(cell(ColumnType::String, Some(&v("null"))), Cell::Null);
        assert_eq!(cell(ColumnType::String, None), Cell::Null);
    }
}
