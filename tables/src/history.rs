//! Reads from the table tier: a basin with `"serve_reads": true` in its table config has
//! reads that start below a stream's trim point (records the log's retention or a trim
//! removed) served from its Parquet files, where tiering put them.
//!
//! A read looks at the committed state (one GET), then at the files whose stream bounds
//! include the stream, oldest first. Each file's stream index (in its footer, cached
//! with the footer) says which rows hold which sequence numbers of which stream, so the
//! reader fetches only the pages of those rows. The records come back as the log had
//! them: sequence number, timestamp, headers, body.
//!
//! The read is dense from its start, as log reads are: it stops at the first gap and at
//! the log's trim point, after which the log serves. A start below everything the table
//! holds of the stream begins at the first record it holds, as a log read below the trim
//! point begins at the trim point.

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
use shale_metadata_contract::MetadataApi;
use shale_proto::record::{Header, SequencedRecord};
use shale_reader::{History, HistoryOutput, HistoryRead, ReaderError};

use crate::iceberg::DataFile;
use crate::parquet_file::{StreamRun, STREAM_INDEX_KEY};
use crate::{read_state, TablesError};

/// Footers (with their stream index) kept in memory.
const CACHED_FILES: u64 = 1024;

/// The table tier as a [`History`] for readers.
pub struct TableHistory {
    metadata: Arc<dyn MetadataApi>,
    store: Arc<dyn ObjectStore>,
    files: moka::future::Cache<String, Arc<OpenedFile>>,
}

/// A data file's footer and stream index.
struct OpenedFile {
    metadata: ArrowReaderMetadata,
    runs: Vec<StreamRun>,
}

impl TableHistory {
    pub fn new(metadata: Arc<dyn MetadataApi>, store: Arc<dyn ObjectStore>) -> Self {
        Self { metadata, store, files: moka::future::Cache::new(CACHED_FILES) }
    }

    async fn read_table(&self, read: &HistoryRead) -> Result<HistoryOutput, TablesError> {
        let basin = self.metadata.basin(&read.basin).await?;
        if !basin.config.tables.is_some_and(|tables| tables.serve_reads) {
            return Ok(HistoryOutput::default());
        }
        let (state, _) = read_state(self.store.as_ref(), &read.basin).await?;
        let mut output = HistoryOutput::default();
        let (mut next, mut bytes) = (read.from_seq, 0);
        let stream = read.stream.as_str();
        let files =
            state.files.iter().filter(|f| f.bounds.stream.0.as_str() <= stream && stream <= f.bounds.stream.1.as_str());
        for file in files {
            let opened = self.open(file).await?;
            let runs = opened.runs.iter().filter(|r| r.stream == read.stream && r.created_at_ms == read.created_at_ms);
            for run in runs {
                if run.first_seq + run.rows <= next {
                    continue;
                }
                if run.first_seq > next {
                    // A gap: the start may move up to what the table holds, a read may not skip.
                    if !output.records.is_empty() {
                        return Ok(output);
                    }
                    next = run.first_seq;
                }
                let end = (run.first_seq + run.rows).min(read.before_seq);
                let wanted = (end.saturating_sub(next)).min(read.count - output.records.len() as u64);
                if wanted == 0 {
                    return Ok(output);
                }
                let first_row = run.first_row + (next - run.first_seq);
                for record in self.read_rows(file, &opened, first_row, wanted).await? {
                    if read.until.is_some_and(|until| record.timestamp >= until) {
                        output.reached_until = true;
                        return Ok(output);
                    }
                    bytes += record.metered_bytes();
                    if bytes > read.bytes && !output.records.is_empty() {
                        return Ok(output);
                    }
                    next = record.seq_num + 1;
                    output.records.push(record);
                }
                if output.records.len() as u64 >= read.count || next >= read.before_seq {
                    return Ok(output);
                }
            }
        }
        Ok(output)
    }

    /// The file's footer and stream index, from the cache or the store (reads of the
    /// same file that miss together load it once).
    async fn open(&self, file: &DataFile) -> Result<Arc<OpenedFile>, TablesError> {
        self.files.try_get_with(file.path.clone(), self.load(file)).await.map_err(|e: Arc<TablesError>| {
            match e.as_ref() {
                // Already names the file.
                TablesError::File(message) => TablesError::File(message.clone()),
                other => TablesError::File(format!("{}: {other}", file.path)),
            }
        })
    }

    async fn load(&self, file: &DataFile) -> Result<Arc<OpenedFile>, TablesError> {
        let mut reader = self.object_reader(file);
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
        Ok(Arc::new(OpenedFile { metadata, runs }))
    }

    fn object_reader(&self, file: &DataFile) -> StoreFile {
        StoreFile { store: self.store.clone(), path: Path::from(file.path.as_str()), size: file.size }
    }

    /// Rows `first_row..first_row + rows` of the file as records: only their pages are
    /// fetched.
    async fn read_rows(
        &self,
        file: &DataFile,
        opened: &OpenedFile,
        first_row: u64,
        rows: u64,
    ) -> Result<Vec<SequencedRecord>, TablesError> {
        let builder =
            ParquetRecordBatchStreamBuilder::new_with_metadata(self.object_reader(file), opened.metadata.clone());
        // seq_num, timestamp, headers, body: every column but the stream's name.
        let projection = ProjectionMask::roots(builder.parquet_schema(), [1, 2, 3, 4]);
        let selection =
            RowSelection::from(vec![RowSelector::skip(first_row as usize), RowSelector::select(rows as usize)]);
        let batches: Vec<RecordBatch> = builder
            .with_projection(projection)
            .with_row_selection(selection)
            .with_batch_size(rows as usize)
            .build()?
            .try_collect()
            .await?;
        let mut records = Vec::with_capacity(rows as usize);
        for batch in batches {
            records.extend(
                records_of(&batch).ok_or_else(|| TablesError::File(format!("{}: unexpected columns", file.path)))?,
            );
        }
        Ok(records)
    }
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

#[async_trait::async_trait]
impl History for TableHistory {
    async fn read(&self, read: &HistoryRead) -> Result<HistoryOutput, ReaderError> {
        self.read_table(read).await.map_err(|e| ReaderError::History(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::{ArrayRef, Int64Array};
    use object_store::memory::InMemory;
    use parquet::arrow::ArrowWriter;

    use super::*;
    use crate::iceberg::Bounds;

    async fn history(store: Arc<dyn ObjectStore>) -> TableHistory {
        let clock = Arc::new(shale_storage::ManualClock::new(1_800_000_000_000));
        let metadata = shale_metadata::Metadata::open(store.clone(), "metadata", clock).await.unwrap();
        TableHistory::new(Arc::new(metadata), store)
    }

    fn file(path: &str, size: usize) -> DataFile {
        DataFile { path: path.into(), day: 0, records: 1, size: size as u64, bounds: Bounds::default() }
    }

    /// A file that cannot be opened is named once in the error, whether the footer does not
    /// load or it lacks the stream index.
    #[tokio::test]
    async fn a_file_that_cannot_be_opened_is_named_once() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let batch = RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![1])) as ArrayRef)]).unwrap();
        let mut parquet = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut parquet, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let not_parquet = b"not a parquet file".to_vec();
        let (unindexed, garbage) =
            (file("t/unindexed.parquet", parquet.len()), file("t/garbage.parquet", not_parquet.len()));
        store.put(&Path::from(unindexed.path.as_str()), parquet.into()).await.unwrap();
        store.put(&Path::from(garbage.path.as_str()), not_parquet.into()).await.unwrap();
        let history = history(store).await;

        for (file, reason) in [(&unindexed, "no stream index"), (&garbage, "")] {
            let Err(error) = history.open(file).await else { panic!("{} opened", file.path) };
            let message = error.to_string();
            assert_eq!(message.matches(&file.path).count(), 1, "{message}");
            assert!(message.starts_with(&format!("table file {}: ", file.path)), "{message}");
            assert!(message.contains(reason), "{message}");
        }
    }
}
