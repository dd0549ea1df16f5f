//! Closed days, archived: the commit record names one archive per [`ARCHIVE_FILES`]
//! files of closed days instead of every file of every day.
//!
//! A day is an Iceberg partition, so each day of history keeps at least one data file,
//! and a commit record listing them all would grow with the days held, as would every
//! history read that fetches it. Once no small file waits to be rewritten and at least
//! [`ARCHIVE_FILES`] files are of days before the newest (each such day's small files
//! already merged into one), a maintenance commit moves them out of the commit record
//! into one immutable object, `metadata/archive-<N>-<id>.json` (`{"files": [...]}`, the
//! shape of the commit record's own `files`, so one `read_json` reads both), named with
//! the union of its files' bounds and its own Iceberg manifest (every snapshot's
//! manifest list names it). A history read fetches only the archives whose bounds hold
//! its stream and start, once each (they never change).
//!
//! [`ARCHIVE_FILES`] archives of one level are merged, as size-tiered compaction does,
//! into one archive of the next level (the old objects become garbage), so the commit
//! record holds the newest day's files, fewer than [`ARCHIVE_FILES`] files of closed
//! days and fewer than [`ARCHIVE_FILES`] archives per level: a year of daily history is
//! at most 12 archive entries (about 0.6 KiB each) where it was 365 files, ten years at
//! most 21.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde::{Deserialize, Serialize};

use crate::iceberg::{Bounds, DataFile, Manifest};
use crate::{TableState, TablesError};

/// Files of closed days gathered into one archive.
pub const ARCHIVE_FILES: usize = 8;

/// Files moved out of the commit record into an immutable object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Archive {
    /// The object listing the files (`{"files": [...]}`).
    pub path: String,
    /// The Iceberg manifest naming them, as already in the table.
    pub manifest: Manifest,
    /// The union of their bounds.
    pub bounds: Bounds,
    /// 0 for closed days' files; `n + 1` for [`ARCHIVE_FILES`] archives of level `n`
    /// merged into one.
    #[serde(default)]
    pub level: u32,
}

/// An archive object's content.
#[derive(Serialize, Deserialize)]
struct Archived {
    files: Vec<DataFile>,
}

/// The files of `state` to archive now: every file of a day before the newest, once
/// there are at least [`ARCHIVE_FILES`] of them; none otherwise. Asked only when no file
/// waits to be rewritten, so each closed day holds one small file at most.
pub fn files_to_archive(state: &TableState) -> Vec<DataFile> {
    let newest_day = state.files.iter().map(|f| f.day).max().unwrap_or(0);
    let closed: Vec<DataFile> = state.files.iter().filter(|f| f.day < newest_day).cloned().collect();
    match closed.len() >= ARCHIVE_FILES {
        true => closed,
        false => Vec::new(),
    }
}

/// The archives of `state` to merge into one now: the oldest [`ARCHIVE_FILES`] of the
/// lowest level that has that many; none otherwise. So the commit record holds fewer
/// than [`ARCHIVE_FILES`] archives per level, and a level-`n` archive holds about
/// `ARCHIVE_FILES^(n+1)` closed days.
pub fn archives_to_merge(state: &TableState) -> Vec<Archive> {
    let levels: std::collections::BTreeSet<u32> = state.archives.iter().map(|a| a.level).collect();
    for level in levels {
        let of_level: Vec<Archive> = state.archives.iter().filter(|a| a.level == level).cloned().collect();
        if of_level.len() >= ARCHIVE_FILES {
            return of_level.into_iter().take(ARCHIVE_FILES).collect();
        }
    }
    Vec::new()
}

/// The union of `files`' bounds (the default when there are none).
pub fn union_bounds(files: &[DataFile]) -> Bounds {
    let mut files = files.iter();
    let Some(first) = files.next() else { return Bounds::default() };
    files.fold(first.bounds.clone(), |mut union, file| {
        let b = &file.bounds;
        if b.stream.0 < union.stream.0 {
            union.stream.0 = b.stream.0.clone();
        }
        if b.stream.1 > union.stream.1 {
            union.stream.1 = b.stream.1.clone();
        }
        union.seq_num = (union.seq_num.0.min(b.seq_num.0), union.seq_num.1.max(b.seq_num.1));
        union.timestamp_ms = (union.timestamp_ms.0.min(b.timestamp_ms.0), union.timestamp_ms.1.max(b.timestamp_ms.1));
        union
    })
}

/// Writes the archive object of `files` at `path`.
pub async fn write(store: &dyn ObjectStore, path: &str, files: &[DataFile]) -> Result<(), TablesError> {
    let body = serde_json::to_vec(&Archived { files: files.to_vec() })?;
    store.put(&Path::from(path), Bytes::from(body).into()).await?;
    Ok(())
}

/// The files of the archive object at `path`.
pub async fn read(store: &dyn ObjectStore, path: &str) -> Result<Vec<DataFile>, TablesError> {
    let found = store.get(&Path::from(path)).await?;
    let archived: Archived = serde_json::from_slice(&found.bytes().await?)?;
    Ok(archived.files)
}

/// Archives read, kept in memory: they never change, so each is fetched once.
pub(crate) struct ArchiveCache {
    cache: moka::future::Cache<String, Arc<Vec<DataFile>>>,
}

impl ArchiveCache {
    pub fn new(capacity: u64) -> Self {
        Self { cache: moka::future::Cache::new(capacity) }
    }

    /// The files of the archive at `path`.
    pub async fn files(&self, store: &dyn ObjectStore, path: &str) -> Result<Arc<Vec<DataFile>>, TablesError> {
        self.cache
            .try_get_with(path.to_string(), async { read(store, path).await.map(Arc::new) })
            .await
            .map_err(|e: Arc<TablesError>| TablesError::File(format!("archive {path}: {e}")))
    }

    /// The keys of every file `state`'s archives hold.
    pub async fn archived_keys(
        &self,
        store: &dyn ObjectStore,
        state: &TableState,
    ) -> Result<HashSet<String>, TablesError> {
        let mut keys = HashSet::new();
        for archive in &state.archives {
            keys.extend(self.files(store, &archive.path).await?.iter().map(|f| f.path.clone()));
        }
        Ok(keys)
    }
}

/// Every file the committed `state` names: its own, then its archives' (one GET each).
pub async fn all_files(store: &dyn ObjectStore, state: &TableState) -> Result<Vec<DataFile>, TablesError> {
    let mut files = state.files.clone();
    for archive in &state.archives {
        files.extend(read(store, &archive.path).await?);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(day: i32, seqs: (u64, u64), stream: &str) -> DataFile {
        let bounds = Bounds { stream: (stream.into(), stream.into()), seq_num: seqs, timestamp_ms: seqs };
        DataFile { path: format!("f{day}-{stream}"), day, records: 1, size: 1, bounds, snapshot_id: 1 }
    }

    /// An archive's manifest at `path` (its counts do not matter here).
    fn manifest(path: &str) -> Manifest {
        Manifest {
            path: path.into(),
            length: 1,
            snapshot_id: 1,
            files: 0,
            rows: 0,
            days: (0, 0),
            existing_files: 1,
            existing_rows: 1,
            deleted_files: 0,
            deleted_rows: 0,
            min_sequence: 1,
        }
    }

    #[test]
    fn closed_days_are_archived_once_there_are_enough_of_them() {
        let files = (0..ARCHIVE_FILES as i32).map(|day| file(day, (0, 1), "s")).collect();
        let mut state = TableState { files, ..TableState::default() };
        assert!(files_to_archive(&state).is_empty(), "the newest day stays, so one closed file short");
        state.files.push(file(ARCHIVE_FILES as i32, (2, 3), "s"));
        let days: Vec<i32> = files_to_archive(&state).iter().map(|f| f.day).collect();
        assert_eq!(days, (0..ARCHIVE_FILES as i32).collect::<Vec<_>>(), "every closed day, not the newest");
        // A late file of an old day is closed too.
        state.files.push(file(0, (4, 5), "t"));
        assert_eq!(files_to_archive(&state).len(), ARCHIVE_FILES + 1);
    }

    #[test]
    fn a_full_level_of_archives_is_merged_oldest_first() {
        let archive = |n: u64, level: u32| Archive {
            path: format!("a{n}"),
            manifest: manifest(&format!("m{n}")),
            bounds: Bounds::default(),
            level,
        };
        let n = ARCHIVE_FILES as u64;
        let mut state = TableState { archives: (0..n - 1).map(|i| archive(i, 0)).collect(), ..TableState::default() };
        assert!(archives_to_merge(&state).is_empty(), "one short of a full level");
        state.archives.insert(0, archive(100, 1));
        state.archives.push(archive(n, 0));
        state.archives.push(archive(n + 1, 0));
        let merged: Vec<String> = archives_to_merge(&state).into_iter().map(|a| a.path).collect();
        let oldest: Vec<String> = (0..n - 1).chain([n]).map(|i| format!("a{i}")).collect();
        assert_eq!(merged, oldest, "level 0's oldest eight, not level 1's");
    }

    #[test]
    fn an_archive_is_bounded_by_the_union_of_its_files() {
        let union = union_bounds(&[file(0, (5, 9), "m"), file(1, (2, 4), "z"), file(2, (7, 30), "b")]);
        assert_eq!(union.stream, ("b".to_string(), "z".to_string()));
        assert_eq!(union.seq_num, (2, 30));
        assert_eq!(union.timestamp_ms, (2, 30));
        assert_eq!(union_bounds(&[]), Bounds::default());
    }

    #[tokio::test]
    async fn an_archive_reads_back_the_files_written() {
        let store = object_store::memory::InMemory::new();
        let files = vec![file(0, (0, 1), "s"), file(1, (2, 3), "s")];
        write(&store, "t/metadata/archive-1.json", &files).await.unwrap();
        assert_eq!(read(&store, "t/metadata/archive-1.json").await.unwrap(), files);
        let archive = Archive {
            path: "t/metadata/archive-1.json".into(),
            manifest: manifest("m"),
            bounds: union_bounds(&files),
            level: 0,
        };
        let state = TableState { files: vec![file(2, (4, 5), "s")], archives: vec![archive], ..TableState::default() };
        let paths: Vec<String> = all_files(&store, &state).await.unwrap().into_iter().map(|f| f.path).collect();
        assert_eq!(paths, ["f2-s", "f0-s", "f1-s"]);
    }
}
