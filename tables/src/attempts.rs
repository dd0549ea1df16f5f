//! A pass's attempt at its commit: the names of what it writes, declared before it writes
//! them, and the sweep that deletes what attempts that did not commit left behind.
//!
//! Every attempt names its files by the pass number and an id of its own
//! (`pass-<N>-<id>.parquet`, `pass-<N>-<id>-manifest.avro`, `snap-<N>-<id>.avro`), so no
//! attempt ever overwrites another's: not a retry after a failed commit, and not a tierer
//! paused past a takeover that wakes to write the pass another tierer has committed (the
//! table tier's model, `model/src/tiering.rs`, found that pass-only names let such a
//! tierer replace a committed file). Before writing, an attempt PUTs
//! `attempts/<N>-<id>.json` (beside `state.json`, outside what engines read) listing its
//! keys. After a commit, the committer lists
//! those declarations: ones of committed passes that are not its own are attempts that
//! can never commit (the commit record's version has moved past them), so their keys are
//! deleted, except any the commit record names; its own declaration goes too. A paused
//! attempt may still write after that, so another attempt's declaration stays, and its
//! keys are deleted again at every commit, for [`DECLARATION_GRACE_MS`] after it was
//! written. Passes above the committed one are left alone: they may still commit.

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use shale_storage::Clock;

use crate::TablesError;

/// How long another attempt's declaration is kept, its keys deleted again at every
/// commit: longer than a pass takes, so a paused attempt's late writes are found.
pub const DECLARATION_GRACE_MS: u64 = 10 * 60 * 1000;

/// An attempt's declaration: when it was written, and every key it may write.
#[derive(serde::Serialize, serde::Deserialize)]
struct Declaration {
    written_at_ms: u64,
    keys: Vec<String>,
}

/// One attempt at pass `pass` of a table under `root`.
#[derive(Clone)]
pub(crate) struct Attempt {
    root: String,
    /// `<pass, 12 digits>-<id>`: what every key of the attempt carries.
    tag: String,
}

impl Attempt {
    pub fn new(root: &str, pass: u64, clock: &dyn Clock) -> Self {
        let id = shale_storage::ids::unique_id(clock).random() as u64;
        Attempt { root: root.to_string(), tag: format!("{pass:012}-{id:016x}") }
    }

    /// The table's root key.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// A data file's key relative to the table root, for the day named `day`.
    pub fn data_file(&self, day: &str) -> String {
        format!("data/timestamp_day={day}/pass-{}.parquet", self.tag)
    }

    pub fn manifest(&self) -> String {
        format!("{}/metadata/pass-{}-manifest.avro", self.root, self.tag)
    }

    /// The archive object's key relative to the table root (`archive`).
    pub fn archive(&self) -> String {
        format!("metadata/archive-{}.json", self.tag)
    }

    /// The archive's manifest's key relative to the table root.
    pub fn archive_manifest(&self) -> String {
        format!("metadata/archive-{}-manifest.avro", self.tag)
    }

    pub fn manifest_list(&self) -> String {
        format!("{}/metadata/snap-{}.avro", self.root, self.tag)
    }

    fn declaration(&self) -> Path {
        Path::from(format!("{}/attempts/{}.json", self.root, self.tag))
    }

    /// Declares the attempt's keys (`keys` relative to the root: its data files and any
    /// archive, plus its manifest and manifest list) before any is written.
    pub async fn declare(
        &self,
        store: &dyn ObjectStore,
        keys: &[String],
        clock: &dyn Clock,
    ) -> Result<(), TablesError> {
        let mut keys: Vec<String> = keys.iter().map(|f| format!("{}/{f}", self.root)).collect();
        keys.extend([self.manifest(), self.manifest_list()]);
        let declaration = Declaration { written_at_ms: clock.now_ms(), keys };
        store.put(&self.declaration(), Bytes::from(serde_json::to_vec(&declaration)?).into()).await?;
        Ok(())
    }

    /// After this attempt committed pass `committed_pass`: deletes what other attempts at
    /// passes up to it declared, unless the commit record names it (`named`), and their
    /// declarations once [`DECLARATION_GRACE_MS`] old; and this attempt's declaration.
    /// Returns the keys deleted (or found gone).
    pub async fn sweep(
        &self,
        store: &dyn ObjectStore,
        committed_pass: u64,
        named: impl Fn(&str) -> bool,
        now_ms: u64,
    ) -> Result<usize, TablesError> {
        let prefix = Path::from(format!("{}/attempts", self.root));
        let listed: Vec<_> = store.list(Some(&prefix)).try_collect().await?;
        let mut deleted = 0;
        for meta in listed {
            let Some(tag) = meta.location.filename().and_then(|n| n.strip_suffix(".json")) else { continue };
            let pass = tag.split('-').next().and_then(|p| p.parse::<u64>().ok());
            if pass.is_none_or(|pass| pass > committed_pass) {
                continue;
            }
            if tag != self.tag {
                let declaration: Declaration = match store.get(&meta.location).await {
                    Ok(found) => serde_json::from_slice(&found.bytes().await?)?,
                    Err(object_store::Error::NotFound { .. }) => continue,
                    Err(e) => return Err(e.into()),
                };
                for key in declaration.keys.iter().filter(|key| !named(key)) {
                    delete(store, &Path::from(key.as_str())).await?;
                    deleted += 1;
                }
                if now_ms.saturating_sub(declaration.written_at_ms) < DECLARATION_GRACE_MS {
                    continue;
                }
            }
            delete(store, &meta.location).await?;
        }
        Ok(deleted)
    }
}

async fn delete(store: &dyn ObjectStore, key: &Path) -> Result<(), TablesError> {
    match store.delete(key).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
