//! Reads from the table tier: a basin with `"serve_reads": true` in its table config has
//! reads that start below a stream's trim point (records the log's retention or a trim
//! removed) served from its Parquet files, where tiering put them.
//!
//! A read looks at the committed state (one conditional GET, answered without a body
//! while the state is the one it read before) and the archives it names whose bounds
//! hold the stream and the read's start (each fetched once: they never change), then at
//! the files whose stream bounds include the stream. Each file's stream index (in its
//! footer, cached with the footer) says which rows hold which sequence numbers of which
//! stream, so the reader fetches only the pages of those rows. The records come back as the log had
//! them: sequence number, timestamp, headers, body.
//!
//! The read is dense from its start, as log reads are: it stops at the first gap and at
//! the log's trim point, after which the log serves. A start below everything the table
//! holds of the stream begins at the first record it holds, as a log read below the trim
//! point begins at the trim point.

use std::sync::Arc;

use object_store::{GetOptions, ObjectStore};
use shale_metadata_contract::MetadataApi;
use shale_reader::{History, HistoryOutput, HistoryRead, ReaderError};

use crate::archive::ArchiveCache;
use crate::file_reader::{load, read_rows, OpenedFile};
use crate::iceberg::{Bounds, DataFile};
use crate::parquet_file::StreamRun;
use crate::tiering::state_path;
use crate::{TableState, TablesError};

/// Footers (with their stream index) kept in memory.
const CACHED_FILES: u64 = 1024;

/// The fewest metered bytes a record has (S2's metering: 8 plus headers and body), so a
/// read bounded to `bytes` takes at most `bytes / 8 + 1` records.
const MIN_RECORD_BYTES: u64 = 8;

/// Basins whose committed table state is kept in memory.
const CACHED_STATES: u64 = 1024;

/// Archives (lists of closed days' files) kept in memory.
const CACHED_ARCHIVES: u64 = 4096;

/// The table tier as a [`History`] for readers.
pub struct TableHistory {
    metadata: Arc<dyn MetadataApi>,
    store: Arc<dyn ObjectStore>,
    files: moka::future::Cache<String, Arc<OpenedFile>>,
    /// Per basin, the committed state last read and its entity tag.
    states: moka::future::Cache<String, (Option<String>, Arc<TableState>)>,
    archives: ArchiveCache,
}

impl TableHistory {
    pub fn new(metadata: Arc<dyn MetadataApi>, store: Arc<dyn ObjectStore>) -> Self {
        Self {
            metadata,
            store,
            files: moka::future::Cache::new(CACHED_FILES),
            states: moka::future::Cache::new(CACHED_STATES),
            archives: ArchiveCache::new(CACHED_ARCHIVES),
        }
    }

    /// The basin's committed table state: fetched only when it changed since the last
    /// read (a conditional GET on its entity tag answers "not modified" otherwise).
    async fn committed_state(&self, basin: &str) -> Result<Arc<TableState>, TablesError> {
        let cached = self.states.get(basin).await;
        let if_none_match = cached.as_ref().and_then(|(e_tag, _)| e_tag.clone());
        let options = GetOptions { if_none_match, ..GetOptions::default() };
        match self.store.get_opts(&state_path(basin), options).await {
            Ok(found) => {
                let e_tag = found.meta.e_tag.clone();
                let state: Arc<TableState> = Arc::new(serde_json::from_slice(&found.bytes().await?)?);
                self.states.insert(basin.to_string(), (e_tag, state.clone())).await;
                Ok(state)
            }
            Err(object_store::Error::NotModified { .. }) if cached.is_some() => {
                Ok(cached.map(|(_, state)| state).unwrap_or_default())
            }
            Err(object_store::Error::NotFound { .. }) => Ok(Arc::default()),
            Err(e) => Err(e.into()),
        }
    }

    async fn read_table(&self, read: &HistoryRead) -> Result<HistoryOutput, TablesError> {
        let basin = self.metadata.basin(&read.basin).await?;
        if !basin.config.tables.is_some_and(|tables| tables.serve_reads) {
            return Ok(HistoryOutput::default());
        }
        let state = self.committed_state(&read.basin).await?;
        let mut output = HistoryOutput::default();
        let (mut next, mut bytes) = (read.from_seq, 0);
        let stream = read.stream.as_str();
        // The stream's runs in the files that may hold records from the start, in
        // sequence order: files are listed in commit order, and a rewritten file may
        // hold runs on both sides of another file's. A read takes at most `reach`
        // records, so a file whose lowest sequence number (of any stream) is past that
        // holds none of them, and is not opened: a read near the start of a long history
        // opens the files of its start, not every file of the stream, and fetches only
        // the archives (closed days' file lists) whose bounds may hold them. When the
        // start is below everything the table holds of the stream (the read moves up to
        // the first record held), every file holding the stream is opened.
        let reach = read.count.min(read.bytes / MIN_RECORD_BYTES + 1);
        let within = next.saturating_add(reach).min(read.before_seq);
        let near = self.files_holding(&state, stream, next, within).await?;
        let mut runs = self.runs_in(&near.iter().collect::<Vec<_>>(), read, next).await?;
        let all;
        if runs.first().is_none_or(|(_, _, run)| run.first_seq > next) {
            all = self.files_holding(&state, stream, next, u64::MAX).await?;
            if all.len() > near.len() {
                runs = self.runs_in(&all.iter().collect::<Vec<_>>(), read, next).await?;
            }
        }
        for (file, opened, run) in &runs {
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
            for record in read_rows(self.store.clone(), file, opened, first_row, wanted).await? {
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
        Ok(output)
    }

    /// The files of the committed `state` (its own and its archives') whose bounds may
    /// hold records of `stream` from `next` and below `within`: archives whose bounds
    /// cannot are not fetched.
    async fn files_holding(
        &self,
        state: &TableState,
        stream: &str,
        next: u64,
        within: u64,
    ) -> Result<Vec<DataFile>, TablesError> {
        let holding = |bounds: &Bounds| {
            bounds.stream.0.as_str() <= stream
                && stream <= bounds.stream.1.as_str()
                && bounds.seq_num.1 >= next
                && bounds.seq_num.0 < within
        };
        let mut files: Vec<DataFile> = state.files.iter().filter(|f| holding(&f.bounds)).cloned().collect();
        for archive in state.archives.iter().filter(|a| holding(&a.bounds)) {
            let archived = self.archives.files(self.store.as_ref(), &archive.path).await?;
            files.extend(archived.iter().filter(|f| holding(&f.bounds)).cloned());
        }
        Ok(files)
    }

    /// The runs of `read`'s stream in `files` that hold records from `next`, in sequence
    /// order, with their files.
    async fn runs_in<'a>(
        &self,
        files: &[&'a DataFile],
        read: &HistoryRead,
        next: u64,
    ) -> Result<Vec<(&'a DataFile, Arc<OpenedFile>, StreamRun)>, TablesError> {
        let opened = futures::future::try_join_all(
            files.iter().map(|file| async move { self.open(file).await.map(|opened| (*file, opened)) }),
        )
        .await?;
        let wanted = |run: &&StreamRun| {
            run.stream == read.stream && run.created_at_ms == read.created_at_ms && run.first_seq + run.rows > next
        };
        let mut runs: Vec<(&DataFile, Arc<OpenedFile>, StreamRun)> = opened
            .iter()
            .flat_map(|(file, opened)| {
                opened.runs.iter().filter(wanted).map(move |run| (*file, opened.clone(), run.clone()))
            })
            .collect();
        runs.sort_by_key(|(_, _, run)| run.first_seq);
        Ok(runs)
    }

    /// The file's footer and stream index, from the cache or the store (reads of the
    /// same file that miss together load it once).
    async fn open(&self, file: &DataFile) -> Result<Arc<OpenedFile>, TablesError> {
        self.files
            .try_get_with(file.path.clone(), async { load(self.store.clone(), file).await.map(Arc::new) })
            .await
            .map_err(|e: Arc<TablesError>| {
                match e.as_ref() {
                    // Already names the file.
                    TablesError::File(message) => TablesError::File(message.clone()),
                    other => TablesError::File(format!("{}: {other}", file.path)),
                }
            })
    }
}

#[async_trait::async_trait]
impl History for TableHistory {
    async fn read(&self, read: &HistoryRead) -> Result<HistoryOutput, ReaderError> {
        self.read_table(read).await.map_err(|e| ReaderError::History(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::{ArrayRef, Int64Array, RecordBatch};
    use object_store::memory::InMemory;
    use object_store::path::Path;
    use object_store::ObjectStoreExt;
    use parquet::arrow::ArrowWriter;

    use super::*;

    async fn history(store: Arc<dyn ObjectStore>) -> TableHistory {
        let clock = Arc::new(shale_storage::ManualClock::new(1_800_000_000_000));
        let metadata = shale_metadata::Metadata::open(store.clone(), "metadata", clock).await.unwrap();
        TableHistory::new(Arc::new(metadata), store)
    }

    /// A history over `store` with `basin` created, serving reads from its table.
    async fn serving(store: Arc<dyn ObjectStore>, basin: &str) -> TableHistory {
        use shale_metadata_contract::{BasinConfig, TablesConfig};
        let history = history(store).await;
        let tables = TablesConfig { serve_reads: true, ..TablesConfig::default() };
        let config = BasinConfig { tables: Some(tables), ..BasinConfig::default() };
        history.metadata.create_basin(basin, config).await.unwrap();
        history
    }

    /// Rows of stream `s` (created at 7) with sequence numbers `seqs`.
    fn rows(seqs: std::ops::Range<u64>) -> Vec<crate::TableRow> {
        seqs.map(|seq| crate::TableRow {
            stream: "s".into(),
            created_at_ms: 7,
            record: shale_proto::record::SequencedRecord {
                seq_num: seq,
                timestamp: seq,
                headers: Default::default(),
                body: seq.to_string().into(),
            },
        })
        .collect()
    }

    fn file(path: &str, size: usize) -> DataFile {
        DataFile { path: path.into(), day: 0, records: 1, size: size as u64, bounds: Bounds::default(), snapshot_id: 1 }
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

    /// A read near the start of a long history opens the files that may hold what it
    /// takes, not every file of the stream: here a later file that cannot be opened is
    /// left alone by a read of the first records, and reached (its error) by a read long
    /// enough to need it. A start below everything held opens every file.
    #[tokio::test]
    async fn a_read_opens_only_the_files_its_records_may_be_in() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let history = serving(store.clone(), "history-n").await;
        let rows = rows(100..110);
        let bounds = Bounds::of(&rows).unwrap();
        let parquet = crate::write_parquet(rows, &[]).unwrap();
        let first = DataFile {
            path: "t/first.parquet".into(),
            day: 0,
            records: 10,
            size: parquet.len() as u64,
            bounds,
            snapshot_id: 1,
        };
        store.put(&Path::from(first.path.as_str()), parquet.into()).await.unwrap();
        let late_bounds = Bounds { stream: ("s".into(), "s".into()), seq_num: (1000, 2000), timestamp_ms: (0, 0) };
        let late = DataFile {
            path: "t/late.parquet".into(),
            day: 1,
            records: 1000,
            size: 9,
            bounds: late_bounds,
            snapshot_id: 2,
        };
        store.put(&Path::from(late.path.as_str()), b"not a file".to_vec().into()).await.unwrap();
        let state = TableState { files: vec![first, late], ..TableState::default() };
        store.put(&state_path("history-n"), serde_json::to_vec(&state).unwrap().into()).await.unwrap();
        let read = |from_seq, count, bytes| HistoryRead {
            basin: "history-n".into(),
            stream: "s".into(),
            created_at_ms: 7,
            from_seq,
            before_seq: u64::MAX,
            count,
            bytes,
            until: None,
        };

        let records = history.read_table(&read(100, 100, u64::MAX)).await.unwrap().records;
        assert_eq!(records.iter().map(|r| r.seq_num).collect::<Vec<_>>(), (100..110).collect::<Vec<_>>());
        let records = history.read_table(&read(105, u64::MAX, 64)).await.unwrap().records;
        assert_eq!(records.first().map(|r| r.seq_num), Some(105), "a byte bound bounds the files too");
        let far = history.read_table(&read(100, 1000, u64::MAX)).await;
        assert!(far.is_err_and(|e| e.to_string().contains("t/late.parquet")), "a long read reaches the later file");
        let below = history.read_table(&read(0, 10, u64::MAX)).await;
        assert!(
            below.is_err_and(|e| e.to_string().contains("t/late.parquet")),
            "a start below everything opens every file"
        );
    }

    /// A rewritten file may hold a stream's runs on both sides of another file's: a read
    /// from the start returns them in sequence order, whatever order the state lists the
    /// files in.
    #[tokio::test]
    async fn runs_are_read_in_sequence_order_across_files() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let history = serving(store.clone(), "history-b").await;
        // The rewritten file holds 0..10 and 20..30, listed after the file holding 10..20.
        let mut state = TableState::default();
        for (path, rows) in [("t/b.parquet", rows(10..20)), ("t/a.parquet", [rows(0..10), rows(20..30)].concat())] {
            let bounds = Bounds::of(&rows).unwrap();
            let parquet = crate::write_parquet(rows, &[]).unwrap();
            let file =
                DataFile { path: path.into(), day: 0, records: 10, size: parquet.len() as u64, bounds, snapshot_id: 1 };
            store.put(&Path::from(path), parquet.into()).await.unwrap();
            state.files.push(file);
        }
        store.put(&state_path("history-b"), serde_json::to_vec(&state).unwrap().into()).await.unwrap();
        let read = |from_seq| HistoryRead {
            basin: "history-b".into(),
            stream: "s".into(),
            created_at_ms: 7,
            from_seq,
            before_seq: u64::MAX,
            count: 100,
            bytes: u64::MAX,
            until: None,
        };
        for from in [0, 5, 15, 25] {
            let records = history.read_table(&read(from)).await.unwrap().records;
            let seqs: Vec<u64> = records.iter().map(|r| r.seq_num).collect();
            assert_eq!(seqs, (from..30).collect::<Vec<_>>(), "from {from}");
        }
    }
}
