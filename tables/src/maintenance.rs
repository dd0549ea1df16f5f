//! Keeping a table's state bounded as passes accumulate. Every pass adds a data file per
//! day it touched, a manifest and a snapshot; left alone, the commit record and the
//! manifest list would grow with every pass forever. So:
//!
//! - **Small files are rewritten** into larger ones, size-tiered: within one day's
//!   partition, [`Maintenance::rewrite_fanout`] files below the target size of about the
//!   same size (the same power of the fanout) are merged into one. A row is rewritten
//!   about log(target / pass size) times, and a day keeps fewer than `fanout` small
//!   files per size class; once a later day has files, a day's small files become one.
//! - **Manifests are merged**: a rewrite, or more than [`Maintenance::max_manifests`]
//!   manifests, makes one `replace` snapshot whose single manifest names every live file
//!   (and, as deleted, the files it rewrote).
//! - **Snapshots expire**: the table keeps the newest [`KEPT_SNAPSHOTS`] and any that
//!   stopped being current less than [`Maintenance::snapshot_retention`] ago, so a reader
//!   that opened the current snapshot has at least that long to finish.
//! - **Garbage is collected**: what only expired snapshots named (their manifest lists
//!   and metadata files, merged manifests, rewritten data files) is listed in the commit
//!   record as [`Garbage`], deleted by a later pass once every snapshot naming it has
//!   expired, and dropped from the list by the commit after that.

use std::collections::BTreeMap;
use std::time::Duration;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde::{Deserialize, Serialize};

use crate::iceberg::{self, DataFile, KEPT_SNAPSHOTS};
use crate::{TableState, TablesError};

/// How a table is kept bounded (`[tables]` in the server's TOML sets these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Maintenance {
    /// How long a snapshot stays in the table after it stopped being current.
    pub snapshot_retention: Duration,
    /// Files at least this large are left as they are.
    pub target_file_bytes: u64,
    /// Files of one size class merged at once, and the ratio between size classes.
    pub rewrite_fanout: usize,
    /// Manifests the current snapshot may name before they are merged into one.
    pub max_manifests: usize,
}

impl Default for Maintenance {
    fn default() -> Self {
        Self {
            snapshot_retention: Duration::from_secs(600),
            target_file_bytes: 64 * 1024 * 1024,
            rewrite_fanout: 8,
            max_manifests: 8,
        }
    }
}

/// A key on the store that no snapshot the table still keeps names once the snapshots
/// before `unreferenced_from` have expired.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Garbage {
    pub path: String,
    pub unreferenced_from: i64,
}

impl Maintenance {
    /// The small files to merge now, oldest day first: every small file of a day before
    /// the newest (a closed day: its files will not grow, so they become one), else the
    /// files of one day and size class once the class is full. At most `max_bytes` of
    /// them, so a rewrite holds no more than a pass in memory.
    pub fn files_to_rewrite(&self, state: &TableState, max_bytes: u64) -> Vec<DataFile> {
        let fanout = self.rewrite_fanout.max(2);
        let newest_day = state.files.iter().map(|f| f.day).max().unwrap_or(0);
        let mut groups: BTreeMap<(i32, u32), Vec<&DataFile>> = BTreeMap::new();
        for file in state.files.iter().filter(|f| f.size < self.target_file_bytes) {
            let class = match file.day < newest_day {
                true => 0,
                false => size_class(file.size, fanout as u64),
            };
            groups.entry((file.day, class)).or_default().push(file);
        }
        let full = |((day, _), files): &((i32, u32), Vec<&DataFile>)| match *day < newest_day {
            true => files.len() >= 2,
            false => files.len() >= fanout,
        };
        let Some((_, group)) = groups.into_iter().find(full) else { return Vec::new() };
        let (mut chosen, mut bytes) = (Vec::new(), 0);
        for file in group {
            if bytes + file.size > max_bytes {
                break;
            }
            bytes += file.size;
            chosen.push(file.clone());
        }
        // One file rewritten alone is the same file.
        if chosen.len() < 2 {
            chosen.clear();
        }
        chosen
    }

    /// Whether the current snapshot names more manifests than it may.
    pub fn manifests_to_merge(&self, state: &TableState) -> bool {
        state.manifests.len() > self.max_manifests
    }

    /// Expires the oldest snapshots of `state` beyond [`KEPT_SNAPSHOTS`] that stopped
    /// being current (their successor was committed) at least the retention before
    /// `now_ms`; their manifest lists and metadata files become garbage.
    pub fn expire_snapshots(&self, state: &mut TableState, table_root: &str, now_ms: u64) {
        let retention_ms = self.snapshot_retention.as_millis() as u64;
        while state.snapshots.len() > KEPT_SNAPSHOTS {
            let (oldest, successor) = (&state.snapshots[0], &state.snapshots[1]);
            if successor.timestamp_ms.saturating_add(retention_ms) > now_ms {
                break;
            }
            let unreferenced_from = oldest.id + 1;
            state.garbage.push(Garbage { path: oldest.manifest_list.clone(), unreferenced_from });
            state
                .garbage
                .push(Garbage { path: iceberg::metadata_file(table_root, oldest.id as u64), unreferenced_from });
            state.snapshots.remove(0);
        }
    }
}

/// A file size's class: the power of `fanout` it falls under.
fn size_class(size: u64, fanout: u64) -> u32 {
    size.max(1).ilog(fanout)
}

/// The garbage a pass deleted: what was collectable under the committed state it read,
/// named by that state's oldest kept snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Collected {
    oldest_kept: Option<i64>,
}

impl Collected {
    /// What may be deleted under `state`.
    pub fn under(state: &TableState) -> Self {
        Self { oldest_kept: state.snapshots.first().map(|s| s.id) }
    }

    /// Whether `garbage` is of it: every snapshot that named it has expired.
    pub fn covers(&self, garbage: &Garbage) -> bool {
        self.oldest_kept.is_none_or(|oldest| oldest >= garbage.unreferenced_from)
    }
}

/// Whether `garbage` may be deleted under the committed `state`.
pub fn collectable(state: &TableState, garbage: &Garbage) -> bool {
    Collected::under(state).covers(garbage)
}

/// Deletes the garbage of the committed `state` that may go (a key already gone is
/// fine); the next commit drops it from the list.
pub async fn collect_garbage(store: &dyn ObjectStore, state: &TableState) -> Result<Collected, TablesError> {
    let collected = Collected::under(state);
    for garbage in state.garbage.iter().filter(|g| collected.covers(g)) {
        match store.delete(&Path::from(garbage.path.as_str())).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(collected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iceberg::{Bounds, Snapshot};

    fn file(day: i32, size: u64, n: i64) -> DataFile {
        DataFile { path: format!("f{n}"), day, records: 1, size, bounds: Bounds::default(), snapshot_id: n }
    }

    fn snapshot(id: i64, timestamp_ms: u64) -> Snapshot {
        Snapshot {
            id,
            timestamp_ms,
            manifest_list: format!("snap-{id}"),
            schema_id: 0,
            added_files: 1,
            added_rows: 1,
            operation: Default::default(),
            deleted_files: 0,
            deleted_rows: 0,
        }
    }

    #[test]
    fn a_full_size_class_or_a_closed_day_is_rewritten_and_nothing_else() {
        let m = Maintenance { target_file_bytes: 1 << 20, rewrite_fanout: 4, ..Maintenance::default() };
        // Day 2, the newest: four files of about 1 KiB (a full class), one of 100 KiB
        // (another class), one at the target size.
        let mut files: Vec<DataFile> = (4..8).map(|n| file(2, 1024 + n as u64, n)).collect();
        files.push(file(2, 100_000, 8));
        files.push(file(2, 1 << 20, 9));
        let mut state = TableState { files, ..TableState::default() };
        let chosen = |state: &TableState, budget| -> Vec<i64> {
            m.files_to_rewrite(state, budget).iter().map(|f| f.snapshot_id).collect()
        };
        assert_eq!(chosen(&state, u64::MAX), [4, 5, 6, 7]);
        assert!(chosen(&state, 1100).is_empty(), "a budget that holds one file merges nothing");
        state.files.remove(0);
        assert!(chosen(&state, u64::MAX).is_empty(), "three of a class of four");
        // Day 1 is closed (day 2 has files): its small files become one, whatever their
        // sizes, before anything of a later day.
        state.files.extend([file(1, 1000, 1), file(1, 200_000, 2)]);
        assert_eq!(chosen(&state, u64::MAX), [1, 2]);
    }

    #[test]
    fn snapshots_expire_after_the_retention_and_beyond_the_kept_count_only() {
        let m = Maintenance { snapshot_retention: Duration::from_secs(10), ..Maintenance::default() };
        let mut state = TableState::default();
        let count = KEPT_SNAPSHOTS as i64 + 5;
        state.snapshots = (1..=count).map(|id| snapshot(id, id as u64 * 1000)).collect();
        // At 13 s, snapshots 1 and 2 were replaced (by 2 at 2 s and 3 at 3 s) at least
        // 10 s before; 3 was replaced at 4 s.
        m.expire_snapshots(&mut state, "t", 13_000);
        assert_eq!(state.snapshots.first().map(|s| s.id), Some(3));
        let paths: Vec<&str> = state.garbage.iter().map(|g| g.path.as_str()).collect();
        assert_eq!(paths, ["snap-1", "t/metadata/v1.metadata.json", "snap-2", "t/metadata/v2.metadata.json"]);
        assert!(state.garbage.iter().all(|g| collectable(&state, g)));
        // Much later, the kept count bounds what expires.
        m.expire_snapshots(&mut state, "t", u64::MAX / 2);
        assert_eq!(state.snapshots.len(), KEPT_SNAPSHOTS);
        // Garbage a later snapshot made waits for the ones before it.
        let later = Garbage { path: "x".into(), unreferenced_from: count };
        assert!(!collectable(&state, &later));
    }
}
