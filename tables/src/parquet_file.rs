//! One Parquet file from records. The schema carries Iceberg field ids (1 to 8) so an
//! Iceberg table can name these files without a name mapping, and uses the types Iceberg
//! has: `seq_num` is a signed 64-bit integer (sequence numbers stay far below 2^63) and
//! `timestamp` is microseconds with a time zone (Iceberg's `timestamptz`; the values are
//! the records' millisecond timestamps, so the last three digits are always zero).
//!
//! Layout: rows sorted by `stream` then `seq_num`; row groups of at most
//! [`ROW_GROUP_ROWS`] rows, so a scan of one stream or time range skips the others by
//! their min/max statistics; zstd on every column; dictionary encoding on `stream`,
//! which repeats.
//!
//! A table with decoded JSON bodies has one more optional column per decoded field,
//! after `body`, with its Iceberg field id (see [`crate::body_columns`]).

use bytes::Bytes;
use std::sync::Arc;

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType, ZstdLevel};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::Type;
use serde::{Deserialize, Serialize};
use shale_proto::record::SequencedRecord;

use crate::body_columns::{self, BodyColumn, Cell, ColumnType};
use crate::TablesError;

/// Rows per row group at most: about 128 MiB of 1 KiB records, the size scan engines
/// read best, and small enough that statistics still prune a stream's range.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// The record's columns, with Iceberg field ids.
const SCHEMA: &str = "
message record {
  required binary stream (STRING) = 1;
  required int64 seq_num = 2;
  required int64 timestamp (TIMESTAMP(MICROS,true)) = 3;
  required group headers (LIST) = 4 {
    repeated group list {
      required group element = 5 {
        required binary key = 6;
        required binary value = 7;
      }
    }
  }
  required binary body = 8;
}
";

/// One record of one stream: a row of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableRow {
    pub stream: String,
    /// When the stream was created: a stream deleted and created again under the same
    /// name is another stream, told apart in the file's stream index.
    pub created_at_ms: u64,
    pub record: SequencedRecord,
}

/// The key of a file's stream index in its Parquet key-value metadata: a JSON array of
/// [`StreamRun`]s, so a reader of one stream's records reads only their rows.
pub const STREAM_INDEX_KEY: &str = "shale.streams";

/// Rows of one stream with dense sequence numbers: rows `first_row..first_row + rows`
/// of the file hold `first_seq..first_seq + rows`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamRun {
    pub stream: String,
    pub created_at_ms: u64,
    pub first_row: u64,
    pub first_seq: u64,
    pub rows: u64,
}

/// The runs of sorted `rows`.
fn stream_runs(rows: &[TableRow]) -> Vec<StreamRun> {
    let mut runs: Vec<StreamRun> = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        match runs.last_mut() {
            Some(run)
                if run.stream == row.stream
                    && run.created_at_ms == row.created_at_ms
                    && run.first_seq + run.rows == row.record.seq_num =>
            {
                run.rows += 1
            }
            _ => runs.push(StreamRun {
                stream: row.stream.clone(),
                created_at_ms: row.created_at_ms,
                first_row: index as u64,
                first_seq: row.record.seq_num,
                rows: 1,
            }),
        }
    }
    runs
}

/// Writes `rows` (in any order) as one Parquet file, sorted by stream then sequence
/// number, with a column for each of `body_columns`; see the module doc.
pub fn write_parquet(mut rows: Vec<TableRow>, body_columns: &[BodyColumn]) -> Result<Bytes, TablesError> {
    rows.sort_by(|a, b| {
        (&a.stream, a.created_at_ms, a.record.seq_num).cmp(&(&b.stream, b.created_at_ms, b.record.seq_num))
    });
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_dictionary_enabled(false)
        .set_column_dictionary_enabled("stream".into(), true)
        .build();
    let mut writer = SerializedFileWriter::new(Vec::new(), schema(body_columns)?, Arc::new(properties))?;
    let index = serde_json::to_string(&stream_runs(&rows))?;
    writer.append_key_value_metadata(KeyValue::new(STREAM_INDEX_KEY.to_string(), index));
    for group in rows.chunks(ROW_GROUP_ROWS) {
        let mut row_group = writer.next_row_group()?;
        let columns = Columns::of(group);
        let decoded = DecodedColumns::of(group, body_columns);
        let mut index = 0;
        while let Some(mut column) = row_group.next_column()? {
            match index {
                0 => column.typed::<ByteArrayType>().write_batch(&columns.stream, None, None)?,
                1 => column.typed::<Int64Type>().write_batch(&columns.seq_num, None, None)?,
                2 => column.typed::<Int64Type>().write_batch(&columns.timestamp, None, None)?,
                3 => column.typed::<ByteArrayType>().write_batch(
                    &columns.header_keys,
                    Some(&columns.header_definitions),
                    Some(&columns.header_repetitions),
                )?,
                4 => column.typed::<ByteArrayType>().write_batch(
                    &columns.header_values,
                    Some(&columns.header_definitions),
                    Some(&columns.header_repetitions),
                )?,
                5 => column.typed::<ByteArrayType>().write_batch(&columns.body, None, None)?,
                _ => decoded.write(index - 6, column.untyped())?,
            };
            column.close()?;
            index += 1;
        }
        row_group.close()?;
    }
    Ok(writer.into_inner()?.into())
}

/// The record's columns and then one optional column per decoded body field.
fn schema(body_columns: &[BodyColumn]) -> Result<Arc<Type>, TablesError> {
    let record = parse_message_type(SCHEMA)?;
    let mut fields = record.get_fields().to_vec();
    for column in body_columns {
        let (physical, logical) = match column.column_type {
            ColumnType::Boolean => (PhysicalType::BOOLEAN, None),
            ColumnType::Long => (PhysicalType::INT64, None),
            ColumnType::Double => (PhysicalType::DOUBLE, None),
            ColumnType::String => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
            ColumnType::Binary => (PhysicalType::BYTE_ARRAY, None),
        };
        let field = Type::primitive_type_builder(&column.name, physical)
            .with_repetition(Repetition::OPTIONAL)
            .with_logical_type(logical)
            .with_id(Some(column.id))
            .build()?;
        fields.push(Arc::new(field));
    }
    Ok(Arc::new(Type::group_type_builder(record.name()).with_fields(fields).build()?))
}

/// A row group's decoded body fields, column by column: the present values and one
/// definition level per row (1 present, 0 null).
struct DecodedColumns<'a> {
    columns: &'a [BodyColumn],
    cells: Vec<Vec<Cell>>,
}

impl<'a> DecodedColumns<'a> {
    fn of(rows: &[TableRow], columns: &'a [BodyColumn]) -> Self {
        let mut cells = vec![Vec::with_capacity(rows.len()); columns.len()];
        // Only decode bodies when a column reads them (the key column alone does not).
        let reads_bodies = columns.iter().any(|c| c.header.is_none());
        if !columns.is_empty() {
            for row in rows {
                let fields = match reads_bodies {
                    true => body_columns::decode(&row.record.body),
                    false => None,
                };
                for (column, cells) in columns.iter().zip(cells.iter_mut()) {
                    cells.push(body_columns::cell_of(column, &row.record.headers, fields.as_ref()));
                }
            }
        }
        Self { columns, cells }
    }

    fn write(&self, index: usize, writer: &mut ColumnWriter<'_>) -> Result<usize, TablesError> {
        let cells = &self.cells[index];
        let definitions: Vec<i16> = cells.iter().map(|c| i16::from(*c != Cell::Null)).collect();
        let written = match (self.columns[index].column_type, writer) {
            (ColumnType::Boolean, ColumnWriter::BoolColumnWriter(w)) => {
                let values: Vec<bool> =
                    cells.iter().filter_map(|c| if let Cell::Boolean(b) = c { Some(*b) } else { None }).collect();
                w.write_batch(&values, Some(&definitions), None)?
            }
            (ColumnType::Long, ColumnWriter::Int64ColumnWriter(w)) => {
                let values: Vec<i64> =
                    cells.iter().filter_map(|c| if let Cell::Long(l) = c { Some(*l) } else { None }).collect();
                w.write_batch(&values, Some(&definitions), None)?
            }
            (ColumnType::Double, ColumnWriter::DoubleColumnWriter(w)) => {
                let values: Vec<f64> =
                    cells.iter().filter_map(|c| if let Cell::Double(d) = c { Some(*d) } else { None }).collect();
                w.write_batch(&values, Some(&definitions), None)?
            }
            (ColumnType::String, ColumnWriter::ByteArrayColumnWriter(w)) => {
                let values: Vec<ByteArray> = cells
                    .iter()
                    .filter_map(|c| {
                        if let Cell::String(s) = c {
                            Some(ByteArray::from(s.as_bytes().to_vec()))
                        } else {
                            None
                        }
                    })
                    .collect();
                w.write_batch(&values, Some(&definitions), None)?
            }
            (ColumnType::Binary, ColumnWriter::ByteArrayColumnWriter(w)) => {
                let values: Vec<ByteArray> = cells
                    .iter()
                    .filter_map(|c| if let Cell::Binary(b) = c { Some(ByteArray::from(b.clone())) } else { None })
                    .collect();
                w.write_batch(&values, Some(&definitions), None)?
            }
            _ => {
                return Err(
                    parquet::errors::ParquetError::General("column type out of step with the schema".into()).into()
                )
            }
        };
        Ok(written)
    }
}

/// A row group's values column by column, with the levels of the nested headers: a
/// record without headers is one empty list entry (definition 0); each header of a
/// record is one entry (definition 1), the first starting a new row (repetition 0).
#[derive(Default)]
struct Columns {
    stream: Vec<ByteArray>,
    seq_num: Vec<i64>,
    timestamp: Vec<i64>,
    header_keys: Vec<ByteArray>,
    header_values: Vec<ByteArray>,
    header_definitions: Vec<i16>,
    header_repetitions: Vec<i16>,
    body: Vec<ByteArray>,
}

impl Columns {
    fn of(rows: &[TableRow]) -> Self {
        let mut columns = Columns::default();
        for TableRow { stream, record, .. } in rows {
            columns.stream.push(ByteArray::from(stream.as_bytes().to_vec()));
            columns.seq_num.push(record.seq_num as i64);
            columns.timestamp.push((record.timestamp as i64).saturating_mul(1000));
            columns.body.push(ByteArray::from(record.body.clone()));
            if record.headers.is_empty() {
                columns.header_definitions.push(0);
                columns.header_repetitions.push(0);
            }
            for (i, header) in record.headers.iter().enumerate() {
                columns.header_keys.push(ByteArray::from(header.name.clone()));
                columns.header_values.push(ByteArray::from(header.value.clone()));
                columns.header_definitions.push(1);
                columns.header_repetitions.push(i16::from(i > 0));
            }
        }
        columns
    }
}

#[cfg(test)]
mod tests {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    use shale_proto::record::Header;

    use super::*;

    fn row(stream: &str, seq_num: u64, headers: &[(&str, &str)], body: &[u8]) -> TableRow {
        let headers = headers
            .iter()
            .map(|(k, v)| Header { name: Bytes::from(k.to_string()), value: Bytes::from(v.to_string()) })
            .collect();
        let record = SequencedRecord {
            seq_num,
            timestamp: 1_700_000_000_000 + seq_num,
            headers,
            body: Bytes::copy_from_slice(body),
        };
        TableRow { stream: stream.into(), created_at_ms: 1, record }
    }

    /// The file reads back as the rows, sorted by stream then sequence number, headers
    /// (none, one, several) and binary bodies intact; zstd on every column; statistics
    /// on stream, seq_num and timestamp.
    #[test]
    fn rows_read_back_sorted_with_headers_and_statistics() {
        let rows = vec![
            row("b", 1, &[], b"\x00\xff"),
            row("a", 0, &[("k", "v")], b"first"),
            row("b", 0, &[("x", "1"), ("y", "2")], b""),
        ];
        let file = write_parquet(rows, &[]).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
        let index = reader.metadata().file_metadata().key_value_metadata().unwrap();
        let runs = index.iter().find(|kv| kv.key == STREAM_INDEX_KEY).unwrap().value.clone().unwrap();
        assert_eq!(
            serde_json::from_str::<Vec<StreamRun>>(&runs).unwrap(),
            [
                StreamRun { stream: "a".into(), created_at_ms: 1, first_row: 0, first_seq: 0, rows: 1 },
                StreamRun { stream: "b".into(), created_at_ms: 1, first_row: 1, first_seq: 0, rows: 2 },
            ],
            "one dense run per stream"
        );
        let mut read = Vec::new();
        for row in reader.get_row_iter(None).unwrap() {
            let fields: Vec<(String, Field)> =
                row.unwrap().get_column_iter().map(|(n, f)| (n.clone(), f.clone())).collect();
            read.push(fields.iter().map(|(n, f)| format!("{n}={f}")).collect::<Vec<_>>().join(" "));
        }
        let time = "2023-11-14 22:13:20";
        assert_eq!(
            read,
            [
                format!("stream=\"a\" seq_num=0 timestamp={time}.000000 +00:00 headers=[{{key: [107], value: [118]}}] body=[102, 105, 114, 115, 116]"),
                format!("stream=\"b\" seq_num=0 timestamp={time}.000000 +00:00 headers=[{{key: [120], value: [49]}}, {{key: [121], value: [50]}}] body=[]"),
                format!("stream=\"b\" seq_num=1 timestamp={time}.001000 +00:00 headers=[] body=[0, 255]"),
            ]
        );
        let group = reader.metadata().row_group(0);
        for column in group.columns() {
            assert_eq!(column.compression(), Compression::ZSTD(ZstdLevel::default()), "{}", column.column_path());
        }
        for name in ["stream", "seq_num", "timestamp"] {
            let column = group.columns().iter().find(|c| c.column_path().string() == name).unwrap();
            assert!(column.statistics().is_some_and(|s| s.min_bytes_opt().is_some()), "{name} has min/max");
        }
    }
}
