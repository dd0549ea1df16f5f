//! Reading the table's Parquet files from the store: a file's footer and stream index,
//! then only the pages of the rows wanted (history reads), or every row with its stream
//! (a rewrite of small files).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, RowSelection, RowSelector};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::errors::ParquetError;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use shale_proto::record::{Header, SequencedRecord};

use crate::iceberg::DataFile;
use crate::parquet_file::{StreamRun, STREAM_INDEX_KEY};
use crate::{TableRow, TablesError};

/// A data file's footer and stream index.
pub(crate) struct OpenedFile {
    pub(crate) metadata: ArrowReaderMetadata,
    pub(crate) runs: Vec<StreamRun>,
}

/// Every row of `file`, with its stream (for a rewrite of small files into one).
pub(crate) async fn file_rows(store: Arc<dyn ObjectStore>, file: &DataFile) -> Result<Vec<TableRow>, TablesError> {
    let opened = load(store.clone(), file).await?;
    let mut rows = Vec::with_capacity(file.records as usize);
    for run in &opened.runs {
        let records = read_rows(store.clone(), file, &opened, run.first_row, run.rows).await?;
        rows.extend(records.into_iter().map(|record| TableRow {
            stream: run.stream.clone(),
            created_at_ms: run.created_at_ms,
            record,
        }));
    }
    Ok(rows)
}

fn object_reader(store: Arc<dyn ObjectStore>, file: &DataFile) -> StoreFile {
    StoreFile { store, path: Path::from(file.path.as_str()), size: file.size }
}

/// A data file's footer and stream index.
pub(crate) async fn load(store: Arc<dyn ObjectStore>, file: &DataFile) -> Result<OpenedFile, TablesError> {
    let mut reader = object_reader(store, file);
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
    let metadata = ArrowReaderMetadata::load_async(&mut reader, options).await?;
    let index = metadata
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kvs| kvs.iter().find(|kv| kv.key == STREAM_INDEX_KEY))
        .and_then(|kv| kv.value.clone())
        .ok_or_else(|| TablesError::File(format!("{}: no stream index", file.path)))?;
    let runs = serde_json::from_str(&index)?;
    Ok(OpenedFile { metadata, runs })
}

/// Rows `first_row..first_row + rows` of the file as records: only their pages are
/// fetched.
pub(crate) async fn read_rows(
    store: Arc<dyn ObjectStore>,
    file: &DataFile,
    opened: &OpenedFile,
    first_row: u64,
    rows: u64,
) -> Result<Vec<SequencedRecord>, TablesError> {
    let builder =
        ParquetRecordBatchStreamBuilder::new_with_metadata(object_reader(store, file), opened.metadata.clone());
    // seq_num, timestamp, headers, body: every column but the stream's name.
    let projection = ProjectionMask::roots(builder.parquet_schema(), [1, 2, 3, 4]);
    let selection = RowSelection::from(vec![RowSelector::skip(first_row as usize), RowSelector::select(rows as usize)]);
    let batches: Vec<RecordBatch> = builder
        .with_projection(projection)
        .with_row_selection(selection)
        .with_batch_size(rows as usize)
        .build()?
        .try_collect()
        .await?;
    let mut records = Vec::with_capacity(rows as usize);
    for batch in batches {
        records
            .extend(records_of(&batch).ok_or_else(|| TablesError::File(format!("{}: unexpected columns", file.path)))?);
    }
    Ok(records)
}

/// A data file on the store, read by byte ranges.
struct StoreFile {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
}

impl AsyncFileReader for StoreFile {
    fn get_bytes(&mut self, range: std::ops::Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move { self.store.get_range(&self.path, range).await.map_err(|e| ParquetError::External(Box::new(e))) }
            .boxed()
    }

    /// The column chunks of a read at once: the store merges ranges close together into
    /// one request.
    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move { self.store.get_ranges(&self.path, &ranges).await.map_err(|e| ParquetError::External(Box::new(e))) }
            .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let reader = ParquetMetaDataReader::new().with_arrow_reader_options(options);
            Ok(Arc::new(reader.load_and_finish(self, size).await?))
        }
        .boxed()
    }
}

/// A batch of (seq_num, timestamp, headers, body) as records; none if the columns are not
/// of those types.
fn records_of(batch: &RecordBatch) -> Option<Vec<SequencedRecord>> {
    let seq_nums = batch.column(0).as_primitive_opt::<Int64Type>()?;
    let timestamps = batch.column(1).as_primitive_opt::<TimestampMicrosecondType>()?;
    let headers = batch.column(2).as_list_opt::<i32>()?;
    let bodies = batch.column(3).as_binary_opt::<i32>()?;
    let mut records = Vec::with_capacity(batch.num_rows());
    for row in 0..batch.num_rows() {
        let pairs = headers.value(row);
        let pairs = pairs.as_struct_opt()?;
        let (keys, values) = (pairs.column(0).as_binary_opt::<i32>()?, pairs.column(1).as_binary_opt::<i32>()?);
        let headers = (0..pairs.len())
            .map(|i| Header {
                name: Bytes::copy_from_slice(keys.value(i)),
                value: Bytes::copy_from_slice(values.value(i)),
            })
            .collect();
        records.push(SequencedRecord {
            seq_num: seq_nums.value(row) as u64,
            timestamp: (timestamps.value(row) / 1000) as u64,
            headers,
            body: Bytes::copy_from_slice(bodies.value(row)),
        });
    }
    Some(records)
}
