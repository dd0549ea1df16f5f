//! A basin table's commit record (`tables/<basin>/state.json`), where it and the version
//! hint live, and what it says of a stream: how far the table holds its history.

use std::collections::BTreeMap;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, UpdateVersion};
use serde::{Deserialize, Serialize};
use shale_metadata_contract::MetadataApi;

use crate::archive::Archive;
use crate::body_columns::BodyColumn;
use crate::iceberg::{DataFile, Manifest, Snapshot};
use crate::maintenance::Garbage;
use crate::TablesError;

/// A basin table's commit record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableState {
    /// Passes committed.
    pub pass: u64,
    /// Per stream, where tiering goes on from.
    pub positions: BTreeMap<String, StreamPosition>,
    /// Rows in the committed files.
    pub rows: u64,
    /// The committed files not archived, oldest first.
    pub files: Vec<DataFile>,
    /// The Iceberg table's id.
    #[serde(default)]
    pub table_uuid: String,
    /// The decoded body columns, in the order they were added.
    #[serde(default)]
    pub body_columns: Vec<BodyColumn>,
    /// Every manifest, oldest first: the current snapshot's manifest list names them all.
    #[serde(default)]
    pub manifests: Vec<Manifest>,
    /// The snapshots not yet expired, oldest first (`maintenance`).
    #[serde(default)]
    pub snapshots: Vec<Snapshot>,
    /// Keys only expired (or soon expired) snapshots name, to delete.
    #[serde(default)]
    pub garbage: Vec<Garbage>,
    /// Closed days' files, moved out of this record, oldest first (`archive`).
    #[serde(default)]
    pub archives: Vec<Archive>,
}

impl TableState {
    /// Whether this commit record names `key`: a data file, manifest or manifest list,
    /// live or waiting in its garbage.
    pub fn names(&self, key: &str) -> bool {
        self.files.iter().any(|f| f.path == key)
            || self.manifests.iter().any(|m| m.path == key)
            || self.snapshots.iter().any(|s| s.manifest_list == key)
            || self.garbage.iter().any(|g| g.path == key)
            || self.archives.iter().any(|a| a.path == key || a.manifest.path == key)
    }

    /// The manifests the current snapshot's manifest list names: the archives', then
    /// the record's own.
    pub fn listed_manifests(&self) -> Vec<Manifest> {
        self.archives.iter().map(|a| a.manifest.clone()).chain(self.manifests.iter().cloned()).collect()
    }
}

/// Where tiering goes on from in one stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamPosition {
    /// The stream's creation time: a stream deleted and created again under the same
    /// name is another stream, tiered from its start.
    pub created_at_ms: u64,
    /// The sequence number of the next record to tier.
    pub next_seq: u64,
}

/// Where a basin's table lives.
pub fn table_root(basin: &str) -> String {
    format!("tables/{basin}")
}

pub(crate) fn state_path(basin: &str) -> Path {
    Path::from(format!("{}/state.json", table_root(basin)))
}

/// The key engines follow to the current table metadata (Iceberg's file-system catalog
/// convention): the number `N` of `v<N>.metadata.json`.
pub fn version_hint_path(basin: &str) -> String {
    format!("{}/metadata/version-hint.text", table_root(basin))
}

/// A basin table's committed state on `store`, and the version a commit must replace
/// (none before the first commit).
pub async fn read_state(
    store: &dyn ObjectStore,
    basin: &str,
) -> Result<(TableState, Option<UpdateVersion>), TablesError> {
    match store.get(&state_path(basin)).await {
        Ok(found) => {
            let version = UpdateVersion { e_tag: found.meta.e_tag.clone(), version: found.meta.version.clone() };
            let state = serde_json::from_slice(&found.bytes().await?)?;
            Ok((state, Some(version)))
        }
        Err(object_store::Error::NotFound { .. }) => Ok((TableState::default(), None)),
        Err(e) => Err(e.into()),
    }
}

/// Where the table holds a stream's history through: `Some(seq)` when its basin has the
/// table tier on (records below `seq` are in the committed table; 0 before its first
/// pass reached the stream), `None` when the basin does not tier.
pub async fn tiered_through(
    metadata: &dyn MetadataApi,
    store: &dyn ObjectStore,
    basin: &str,
    stream: &str,
    created_at_ms: u64,
) -> Result<Option<u64>, TablesError> {
    if metadata.basin(basin).await?.config.tables.is_none() {
        return Ok(None);
    }
    let (state, _) = read_state(store, basin).await?;
    let position = state.positions.get(stream).filter(|p| p.created_at_ms == created_at_ms);
    Ok(Some(position.map_or(0, |p| p.next_seq)))
}
