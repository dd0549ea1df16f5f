//! Puts a local directory may write under the object's own name.
//!
//! A directory store publishes a file atomically: it writes a temporary file, makes it
//! durable, renames it into place and makes the directory durable again. A reader then
//! never sees half a file. Some objects are never read before a later write names them:
//! a segment is read only through the index entries its commit adds, and the commit is
//! sent after the segment's put returns. For such a put, marked with [`PutInPlace`] in
//! its options' extensions, [`crate::SyncedDir`] creates the file under its own name,
//! writes it and makes it durable: no temporary file, no rename, one directory change
//! fewer per commit. A put cut short (a crash, a full disk) leaves at most a partial
//! file that nothing names: the write reports the error and removes it, a crash leaves
//! it to the orphan collector, as it leaves a whole segment whose commit never came.
//!
//! Only a new file is written in place: an existing one may be mapped by a reader, so
//! an overwrite takes the atomic path, and a create-if-absent put finds it and fails.
//! Other stores ignore the mark (an S3 object appears whole anyway).

use std::io::Write;
use std::time::SystemTime;

use object_store::{PutMode, PutPayload};

/// Marks a put whose object nothing reads until something written after the put
/// returns names it; see the module doc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PutInPlace;

impl PutInPlace {
    /// Options of a put (overwriting, as a plain put) carrying the mark.
    pub fn options() -> object_store::PutOptions {
        let mut opts = object_store::PutOptions::default();
        opts.extensions.insert(PutInPlace);
        opts
    }
}

/// Whether `opts` asks for, and its mode allows, a write in place.
pub(crate) fn wanted(opts: &object_store::PutOptions) -> bool {
    opts.extensions.get::<PutInPlace>().is_some() && matches!(opts.mode, PutMode::Overwrite | PutMode::Create)
}

/// What writing a new file in place came to.
pub(crate) enum Written {
    /// The file is written (and synced when asked); its e-tag as the directory store
    /// computes it.
    Done { e_tag: String },
    /// A file of that name exists: nothing was written.
    Exists,
}

/// Creates `file` (its parent must exist), writes `payload` and, when `sync` is set,
/// fsyncs it. On an error after the create the partial file is removed.
pub(crate) fn write_new(file: &std::path::Path, payload: &PutPayload, sync: bool) -> std::io::Result<Written> {
    let mut opened = match std::fs::OpenOptions::new().write(true).create_new(true).open(file) {
        Ok(opened) => opened,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => return Ok(Written::Exists),
        Err(error) => return Err(error),
    };
    let written = (|| {
        for chunk in payload.iter() {
            opened.write_all(chunk)?;
        }
        if sync {
            opened.sync_all()?;
        }
        opened.metadata()
    })();
    match written {
        Ok(metadata) => Ok(Written::Done { e_tag: e_tag(&metadata) }),
        Err(error) => {
            drop(opened);
            if let Err(removing) = std::fs::remove_file(file) {
                tracing::warn!(file = %file.display(), error = %removing, "a partial file written in place stays");
            }
            Err(error)
        }
    }
}

/// The e-tag object_store's directory store gives a file: inode, modification time in
/// microseconds and size, in hexadecimal, quoted.
fn e_tag(metadata: &std::fs::Metadata) -> String {
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(metadata);
    #[cfg(not(unix))]
    let inode = 0u64;
    let modified = metadata
        .modified()
        .ok()
        .and_then(|mtime| mtime.duration_since(SystemTime::UNIX_EPOCH).ok())
        .unwrap_or_default()
        .as_micros();
    format!("\"{inode:x}-{modified:x}-{:x}\"", metadata.len())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use object_store::local::LocalFileSystem;
    use object_store::path::Path;
    use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions};

    use super::*;
    use crate::SyncedDir;

    fn synced(dir: &tempfile::TempDir, fsync: bool) -> SyncedDir {
        let local = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).expect("local store"));
        if fsync {
            SyncedDir::new(local, dir.path())
        } else {
            SyncedDir::without_fsync(local, dir.path())
        }
    }

    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("list")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn a_put_in_place_is_the_file_under_its_own_name_synced_with_its_directory() {
        for fsync in [true, false] {
            let dir = tempfile::tempdir().expect("temp dir");
            let store = synced(&dir, fsync);
            let path = Path::from("segments/a.seg");
            let payload = PutPayload::from_iter([Bytes::from_static(b"one "), Bytes::from_static(b"two")]);
            let put = store.put_opts(&path, payload, PutInPlace::options()).await.expect("put");
            assert_eq!(names(&dir.path().join("segments")), ["a.seg"], "no temporary file beside it");
            assert_eq!(store.get(&path).await.expect("get").bytes().await.expect("bytes"), "one two");
            let head = store.head(&path).await.expect("head");
            assert_eq!(put.e_tag, head.e_tag, "the directory store's own e-tag");
            // The file, its new directory and that directory's entry in the root.
            assert_eq!(store.syncs(), if fsync { 3 } else { 0 });
            let next = Path::from("segments/b.seg");
            store.put_opts(&next, PutPayload::from_static(b"b"), PutInPlace::options()).await.expect("put");
            assert_eq!(store.syncs(), if fsync { 5 } else { 0 }, "then the file and its directory");
        }
    }

    #[tokio::test]
    async fn an_existing_file_is_never_written_in_place() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = synced(&dir, true);
        let path = Path::from("segments/b.seg");
        store.put(&path, PutPayload::from_static(b"first")).await.expect("first put");
        let mapped = std::fs::read(dir.path().join("segments/b.seg")).expect("read");

        let mut create = PutInPlace::options();
        create.mode = PutMode::Create;
        let refused = store.put_opts(&path, PutPayload::from_static(b"second"), create).await;
        assert!(matches!(refused, Err(object_store::Error::AlreadyExists { .. })), "{refused:?}");
        assert_eq!(std::fs::read(dir.path().join("segments/b.seg")).expect("read"), mapped, "left as it was");

        // An overwrite replaces it, through a new file renamed over it (a reader's mapping
        // of the old one keeps the old bytes).
        let inode = |p: &std::path::Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).expect("stat"));
        let before = inode(&dir.path().join("segments/b.seg"));
        store.put_opts(&path, PutPayload::from_static(b"third"), PutInPlace::options()).await.expect("overwrite");
        assert_eq!(store.get(&path).await.expect("get").bytes().await.expect("bytes"), "third");
        assert_ne!(inode(&dir.path().join("segments/b.seg")), before, "a new file, not the old one rewritten");
    }

    #[tokio::test]
    async fn a_mark_on_an_update_or_another_store_changes_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = synced(&dir, true);
        let path = Path::from("manifest");
        let first = store.put(&path, PutPayload::from_static(b"v1")).await.expect("put");
        let mut update = PutInPlace::options();
        update.mode = PutMode::Update(object_store::UpdateVersion { e_tag: first.e_tag, version: None });
        assert!(!wanted(&update), "a conditional update is never written in place");
        store.put_opts(&path, PutPayload::from_static(b"v2"), update).await.expect("update");

        let memory = object_store::memory::InMemory::new();
        memory.put_opts(&path, PutPayload::from_static(b"v1"), PutInPlace::options()).await.expect("memory put");
        assert!(wanted(&PutInPlace::options()) && !wanted(&PutOptions::default()));
    }
}
