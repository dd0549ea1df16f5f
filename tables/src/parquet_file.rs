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

use bytes::Bytes;
use parquet::basic::{Compression, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use shale_proto::record::SequencedRecord;

use crate::TablesError;

/// Rows per row group at most: about 128 MiB of 1 KiB records, the size scan engines
/// read best, and small enough that statistics still prune a stream's range.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// The table's schema, with Iceberg field ids.
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
    pub record: SequencedRecord,
}

/// Writes `rows` (in any order) as one Parquet file, sorted by stream then sequence
/// number; see the module doc.
pub fn write_parquet(mut rows: Vec<TableRow>) -> Result<Bytes, TablesError> {
    rows.sort_by(|a, b| (&a.stream, a.record.seq_num).cmp(&(&b.stream, b.record.seq_num)));
    let schema = std::sync::Arc::new(parse_message_type(SCHEMA)?);
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_dictionary_enabled(false)
        .set_column_dictionary_enabled("stream".into(), true)
        .build();
    let mut writer = SerializedFileWriter::new(Vec::new(), schema, std::sync::Arc::new(properties))?;
    for group in rows.chunks(ROW_GROUP_ROWS) {
        let mut row_group = writer.next_row_group()?;
        let columns = Columns::of(group);
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
                _ => column.typed::<ByteArrayType>().write_batch(&columns.body, None, None)?,
            };
            column.close()?;
            index += 1;
        }
        row_group.close()?;
    }
    Ok(writer.into_inner()?.into())
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
        for TableRow { stream, record } in rows {
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
        TableRow { stream: stream.into(), record }
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
        let file = write_parquet(rows).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
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
