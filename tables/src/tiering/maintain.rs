//! The maintenance commit a pass makes when its table needs one: small files of one size
//! class rewritten into one, closed days' files archived, a full level of archives merged,
//! and the record's manifests merged into one (`maintenance` decides which).

use object_store::path::Path;
use object_store::ObjectStoreExt;
use shale_metadata_contract::BasinRecord;

use super::{table_root, Change, TableState, Tierer, MAX_PASS_BYTES};
use crate::archive::{self, Archive};
use crate::attempts::Attempt;
use crate::body_columns::BodyColumn;
use crate::iceberg::{self, Bounds, DataFile, EntryStatus, Operation};
use crate::maintenance::{Collected, Garbage};
use crate::{write_parquet, TablesError};

impl Tierer {
    /// The replace commit `state` needs, written but not committed: the small files of
    /// one size class rewritten into one, or closed days' files archived, or a full level
    /// of archives merged into one; and every manifest of the record merged into one.
    /// None when nothing needs it.
    pub(super) async fn maintain(
        &self,
        basin: &BasinRecord,
        state: &TableState,
        collected: Collected,
    ) -> Result<Option<(TableState, Attempt)>, TablesError> {
        let rewritten = self.maintenance.files_to_rewrite(state, MAX_PASS_BYTES);
        let archived = match rewritten.is_empty() {
            true => archive::files_to_archive(state),
            false => Vec::new(),
        };
        let merging = match rewritten.is_empty() && archived.is_empty() {
            true => archive::archives_to_merge(state),
            false => Vec::new(),
        };
        if rewritten.is_empty()
            && archived.is_empty()
            && merging.is_empty()
            && !self.maintenance.manifests_to_merge(state)
        {
            return Ok(None);
        }
        let root = table_root(&basin.name);
        let pass = state.pass + 1;
        let snapshot_id = pass as i64;
        let attempt = Attempt::new(&root, pass, self.clock.as_ref());
        // The rewritten files are of one day: the merged file's key is known before it is.
        let merged_path = rewritten.first().map(|f| attempt.data_file(&iceberg::day_name(f.day)));
        let mut keys: Vec<String> = merged_path.iter().cloned().collect();
        if !archived.is_empty() || !merging.is_empty() {
            keys.extend([attempt.archive(), attempt.archive_manifest()]);
        }
        attempt.declare(self.store.as_ref(), &keys, self.clock.as_ref()).await?;
        let merged = match merged_path {
            None => Vec::new(),
            Some(path) => vec![self.rewrite(&root, &path, pass, &rewritten, &state.body_columns).await?],
        };
        let schema_id = iceberg::current_schema_id(&state.body_columns);
        let (archives, mut garbage) = self.next_archives(&root, &attempt, state, &archived, &merging).await?;
        let unreferenced_from = snapshot_id;
        let removed = |f: &DataFile| rewritten.iter().chain(&archived).any(|r| r.path == f.path);
        let files: Vec<DataFile> =
            state.files.iter().filter(|f| !removed(f)).cloned().chain(merged.iter().cloned()).collect();
        let entries: Vec<_> = files
            .iter()
            .map(|f| (if f.snapshot_id == snapshot_id { EntryStatus::Added } else { EntryStatus::Existing }, f))
            .chain(rewritten.iter().map(|f| (EntryStatus::Deleted, f)))
            .collect();
        let manifest = self.write_manifest(attempt.manifest(), pass, &entries, schema_id, &state.body_columns).await?;
        garbage.extend(state.manifests.iter().map(|m| Garbage { path: m.path.clone(), unreferenced_from }));
        garbage.extend(rewritten.iter().map(|f| Garbage { path: f.path.clone(), unreferenced_from }));
        let next = TableState { pass, files, manifests: vec![manifest], garbage, archives, ..state.clone() };
        let change = Change {
            operation: Operation::Replace,
            schema_id,
            added: (merged.len() as u64, merged.iter().map(|f| f.records).sum()),
            deleted: (rewritten.len() as u64, rewritten.iter().map(|f| f.records).sum()),
        };
        Ok(Some((self.add_snapshot(next, change, collected, &attempt).await?, attempt)))
    }

    /// The archives after `attempt` (pass `state.pass + 1`) archives the files `archived`
    /// or merges the archives `merging` into one of the next level, and the garbage then
    /// (the merged archives' objects and manifests added to `state`'s).
    async fn next_archives(
        &self,
        root: &str,
        attempt: &Attempt,
        state: &TableState,
        archived: &[DataFile],
        merging: &[Archive],
    ) -> Result<(Vec<Archive>, Vec<Garbage>), TablesError> {
        let (pass, columns) = (state.pass + 1, &state.body_columns);
        let schema_id = iceberg::current_schema_id(columns);
        let mut archives = state.archives.clone();
        let mut garbage = state.garbage.clone();
        if !archived.is_empty() {
            archives.push(self.archive(root, attempt, (pass, 0), archived, schema_id, columns).await?);
        }
        if let Some(first) = merging.first() {
            let mut files = Vec::new();
            for merged in merging {
                files.extend(self.archives.files(self.store.as_ref(), &merged.path).await?.iter().cloned());
            }
            let archive = self.archive(root, attempt, (pass, first.level + 1), &files, schema_id, columns).await?;
            let at = archives.iter().position(|a| a.path == first.path).unwrap_or(0);
            archives.retain(|a| !merging.iter().any(|m| m.path == a.path));
            archives.insert(at, archive);
            let unreferenced_from = pass as i64;
            for merged in merging {
                garbage.push(Garbage { path: merged.path.clone(), unreferenced_from });
                garbage.push(Garbage { path: merged.manifest.path.clone(), unreferenced_from });
            }
        }
        Ok((archives, garbage))
    }

    /// Writes `attempt`'s archive of `files` (pass and level `at`) and its manifest, and
    /// returns it as the commit record names it.
    async fn archive(
        &self,
        root: &str,
        attempt: &Attempt,
        (pass, level): (u64, u32),
        files: &[DataFile],
        schema_id: i32,
        body_columns: &[BodyColumn],
    ) -> Result<Archive, TablesError> {
        let path = format!("{root}/{}", attempt.archive());
        archive::write(self.store.as_ref(), &path, files).await?;
        let entries: Vec<_> = files.iter().map(|f| (EntryStatus::Existing, f)).collect();
        let manifest_path = format!("{root}/{}", attempt.archive_manifest());
        let manifest = self.write_manifest(manifest_path, pass, &entries, schema_id, body_columns).await?;
        Ok(Archive { path, manifest, bounds: archive::union_bounds(files), level })
    }

    /// Pass `pass`'s file at `path` (relative to `root`) holding the rows of `files`
    /// (small files of one day).
    async fn rewrite(
        &self,
        root: &str,
        path: &str,
        pass: u64,
        files: &[DataFile],
        body_columns: &[BodyColumn],
    ) -> Result<DataFile, TablesError> {
        let mut rows = Vec::new();
        for file in files {
            rows.extend(crate::file_reader::file_rows(self.store.clone(), file).await?);
        }
        let day = files.first().map_or(0, |f| f.day);
        let (count, bounds) = (rows.len() as u64, Bounds::of(&rows).unwrap_or_default());
        let body_columns = body_columns.to_vec();
        let parquet = tokio::task::spawn_blocking(move || write_parquet(rows, &body_columns))
            .await
            .map_err(|e| TablesError::File(format!("rewriting for pass {pass}: {e}")))??;
        let path = format!("{root}/{path}");
        let size = parquet.len() as u64;
        self.store.put(&Path::from(path.clone()), parquet.into()).await?;
        Ok(DataFile { path, day, records: count, size, bounds, snapshot_id: pass as i64 })
    }
}
