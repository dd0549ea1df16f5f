//! Durable writes on the local filesystem: object_store's `LocalFileSystem` writes and
//! renames files but never fsyncs, so an acked write could vanish in a power loss.
//! [`SyncedDir`] fsyncs every file it writes (puts, completed multipart uploads, copies)
//! and the directory entry that names it before the write returns, and each directory
//! the first time it is seen, up to the root. Only the writer of a file pays: reads,
//! lists and deletes pass through. A put of at most one step ([`WRITE_OUT_STEP`]: a
//! segment at 50 MiB/s, a WAL object) goes through a `LocalFileSystem` that fsyncs
//! itself: the file is written, fsynced on the handle it was written with, renamed and
//! its directory fsynced in one blocking task, not a write task and then a sync task that
//! opens the file again (a thread hand-off less per store write: about 12% fewer context
//! switches under a paced producer). A larger file (a compacted object) goes to the disk
//! a step at a time before its fsync: an fsync waits for everything the disk holds in
//! flight, so a 64 MiB object sent at once would hold every append's commit behind it.
//!
//! It also gives the directory the conditional update (`PutMode::Update`, S3's
//! `If-Match`) that `LocalFileSystem` lacks and SlateDB's garbage collector needs: updates
//! are serialised by one lock, and each compares the current e-tag before it writes. That
//! is atomic only among writers in this process, which is enough because one process owns
//! a data directory (`shale serve` holds its lock file). With fsync off
//! (`store_fsync = false`, [`SyncedDir::without_fsync`]) it still gives that conditional
//! update, without the syncs.
//!
//! Range reads of at least [`crate::MAPPED_READ_MIN`] map the file ([`crate::mapped`]): a
//! block read is then the page cache's bytes, not a copy in this process's memory.
//!
//! A directory keeps no object attributes, and `LocalFileSystem` refuses a write that
//! carries some; SlateDB tags each conditional write with an id it reads back only to
//! settle an ambiguous failure (a timeout after the write may have landed), which a local
//! write does not have. So a write's attributes are dropped here rather than the write
//! refused and sent again without them: one request, not two (each of which
//! `--store-delay` delays, and `/metrics` counts).

use std::collections::HashSet;
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::in_place::{self, Written};
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result, UploadPart,
};

/// The most of one file's data sent to the disk at once before its fsync.
const WRITE_OUT_STEP: u64 = 1024 * 1024;

/// A local-directory store whose writes are on disk when they return.
#[derive(Debug)]
pub struct SyncedDir {
    inner: Arc<dyn ObjectStore>,
    /// The same directory through a `LocalFileSystem` that fsyncs its own writes: puts of
    /// at most [`WRITE_OUT_STEP`] go there (none with fsync off).
    small_puts: Option<LocalFileSystem>,
    syncer: Arc<Syncer>,
    /// Serialises conditional updates: check the e-tag, then write.
    updates: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct Syncer {
    root: PathBuf,
    /// Directories whose own entry is already durable in their parent.
    known_dirs: Mutex<HashSet<PathBuf>>,
    /// fsync calls made, for tests: a put of at most one step counts two (its file and
    /// the directory naming it; directories it creates are synced but not counted).
    syncs: AtomicU64,
    /// Steps large files were sent to the disk in before their fsync.
    write_out_steps: AtomicU64,
    /// Off: writes return without fsync (only the conditional update remains).
    enabled: bool,
}

impl SyncedDir {
    /// `inner` must be a `LocalFileSystem` rooted at `root`.
    pub fn new(inner: Arc<dyn ObjectStore>, root: impl Into<PathBuf>) -> Self {
        Self::with_syncs(inner, root.into(), true)
    }

    /// The same directory store without fsync: writes may be lost in a power loss, and
    /// conditional updates still work.
    pub fn without_fsync(inner: Arc<dyn ObjectStore>, root: impl Into<PathBuf>) -> Self {
        Self::with_syncs(inner, root.into(), false)
    }

    fn with_syncs(inner: Arc<dyn ObjectStore>, root: PathBuf, enabled: bool) -> Self {
        let small_puts = if enabled { fsyncing_local(&root) } else { None };
        let syncer = Syncer {
            root,
            known_dirs: Mutex::default(),
            syncs: AtomicU64::new(0),
            write_out_steps: AtomicU64::new(0),
            enabled,
        };
        Self { inner, small_puts, syncer: Arc::new(syncer), updates: tokio::sync::Mutex::new(()) }
    }

    /// A put marked [`crate::PutInPlace`]: the new file written under its own name; `None` when
    /// one of that name exists and the put overwrites (then it takes the atomic path).
    async fn put_in_place(&self, location: &Path, payload: &PutPayload, mode: &PutMode) -> Result<Option<PutResult>> {
        let (syncer, payload) = (self.syncer.clone(), payload.clone());
        let file = self.syncer.root.join(location.as_ref());
        let written = tokio::task::spawn_blocking(move || syncer.write_in_place(&file, &payload))
            .await
            .map_err(|e| generic(format!("write task failed: {e}")))?
            .map_err(|e| generic(format!("write of {} failed: {e}", location.as_ref())))?;
        match written {
            Written::Done { e_tag } => {
                Ok(Some(PutResult { e_tag: Some(e_tag), version: None, extensions: Default::default() }))
            }
            Written::Exists if matches!(mode, PutMode::Create) => Err(object_store::Error::AlreadyExists {
                path: location.to_string(),
                source: "a file of that name exists".into(),
            }),
            Written::Exists => Ok(None),
        }
    }

    /// fsync calls made so far.
    pub fn syncs(&self) -> u64 {
        self.syncer.syncs.load(Ordering::Relaxed)
    }

    /// Steps large files were sent to the disk in so far.
    pub fn write_out_steps(&self) -> u64 {
        self.syncer.write_out_steps.load(Ordering::Relaxed)
    }
}

/// `root` through a `LocalFileSystem` that fsyncs its own writes; `None` (logged) if it
/// cannot be opened, and every put then takes the write-then-sync path: as durable, a
/// hand-off dearer.
fn fsyncing_local(root: &std::path::Path) -> Option<LocalFileSystem> {
    match LocalFileSystem::new_with_prefix(root) {
        Ok(local) => Some(local.with_fsync(true)),
        Err(error) => {
            tracing::warn!(root = %root.display(), %error, "small puts take the write-then-sync path");
            None
        }
    }
}

impl Syncer {
    /// Makes the file at `location` and the entries naming it durable.
    async fn sync(self: &Arc<Self>, location: &Path) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let syncer = self.clone();
        let file = self.root.join(location.as_ref());
        tokio::task::spawn_blocking(move || syncer.sync_blocking(&file))
            .await
            .map_err(|e| generic(format!("fsync task failed: {e}")))?
            .map_err(|e| generic(format!("fsync of {} failed: {e}", location.as_ref())))
    }

    fn sync_blocking(&self, file: &std::path::Path) -> std::io::Result<()> {
        let opened = std::fs::File::open(file)?;
        self.write_out_in_steps(&opened)?;
        opened.sync_all()?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.sync_directories(file)
    }

    /// Writes a new `file` under its own name (see [`crate::in_place`]), its parent
    /// directories made first if missing; with fsync on, the file and the entries naming
    /// it are durable when this returns.
    fn write_in_place(&self, file: &std::path::Path, payload: &PutPayload) -> std::io::Result<Written> {
        let written = match in_place::write_new(file, payload, self.enabled) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                if let Some(parent) = file.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                in_place::write_new(file, payload, self.enabled)?
            }
            other => other?,
        };
        if self.enabled && matches!(written, Written::Done { .. }) {
            self.syncs.fetch_add(1, Ordering::Relaxed);
            self.sync_directories(file)?;
        }
        Ok(written)
    }

    /// fsyncs the directories naming `file`: its own, and each of its ancestors the first
    /// time a directory below it is seen.
    fn sync_directories(&self, file: &std::path::Path) -> std::io::Result<()> {
        let mut dir = file.parent();
        while let Some(current) = dir {
            std::fs::File::open(current)?.sync_all()?;
            self.syncs.fetch_add(1, Ordering::Relaxed);
            let mut known = self.known_dirs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            // The first time a directory is seen, its own entry in its parent is synced too.
            if current == self.root || !known.insert(current.to_path_buf()) {
                break;
            }
            dir = current.parent();
        }
        Ok(())
    }

    /// Sends a large file's dirty data to the disk a step at a time, each waited for, so
    /// an fsync of another file meanwhile (each commit fsyncs a segment and a WAL object)
    /// waits behind at most one step of it instead of all of it. The fsync that follows
    /// finds the data written and has only the file's metadata and the disk's cache left
    /// to flush.
    fn write_out_in_steps(&self, file: &std::fs::File) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let len = file.metadata()?.len();
            if len <= WRITE_OUT_STEP {
                return Ok(());
            }
            let flags =
                libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
            let mut offset = 0;
            while offset < len {
                let step = WRITE_OUT_STEP.min(len - offset);
                let (start, count) = (i64::try_from(offset), i64::try_from(step));
                let (Ok(start), Ok(count)) = (start, count) else { break };
                // SAFETY: sync_file_range reads only its integer arguments and the open fd.
                if unsafe { libc::sync_file_range(file.as_raw_fd(), start, count, flags) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                self.write_out_steps.fetch_add(1, Ordering::Relaxed);
                offset += step;
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = file;
        Ok(())
    }
}

fn precondition(location: &Path, why: &str) -> object_store::Error {
    object_store::Error::Precondition { path: location.to_string(), source: why.to_string().into() }
}

fn generic(message: String) -> object_store::Error {
    object_store::Error::Generic { store: "SyncedDir", source: message.into() }
}

impl fmt::Display for SyncedDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Synced({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for SyncedDir {
    async fn put_opts(&self, location: &Path, payload: PutPayload, mut opts: PutOptions) -> Result<PutResult> {
        opts.attributes = Attributes::new();
        if in_place::wanted(&opts) {
            if let Some(result) = self.put_in_place(location, &payload, &opts.mode).await? {
                return Ok(result);
            }
        }
        let _update = match &opts.mode {
            PutMode::Update(expected) => {
                let guard = self.updates.lock().await;
                let current = match self.inner.head(location).await {
                    Ok(meta) => meta,
                    Err(object_store::Error::NotFound { .. }) => {
                        return Err(precondition(location, "the object does not exist"));
                    }
                    Err(e) => return Err(e),
                };
                if current.e_tag != expected.e_tag {
                    return Err(precondition(location, "the object changed"));
                }
                opts.mode = PutMode::Overwrite;
                Some(guard)
            }
            _ => None,
        };
        if let Some(small_puts) = self.small_puts.as_ref().filter(|_| payload.content_length() as u64 <= WRITE_OUT_STEP)
        {
            let result = small_puts.put_opts(location, payload, opts).await?;
            // The file and the directory naming it (more when it made directories).
            self.syncer.syncs.fetch_add(2, Ordering::Relaxed);
            return Ok(result);
        }
        let result = self.inner.put_opts(location, payload, opts).await?;
        self.syncer.sync(location).await?;
        Ok(result)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        mut opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        opts.attributes = Attributes::new();
        let upload = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(SyncedUpload { inner: upload, location: location.clone(), syncer: self.syncer.clone() }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    /// Ranges of at least [`crate::MAPPED_READ_MIN`] are mapped, in one blocking task; the
    /// rest, and anything mapping refuses, are read by the directory store.
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        if crate::mapped::worth_mapping(ranges) {
            let (file, wanted) = (self.syncer.root.join(location.as_ref()), ranges.to_vec());
            let mapped = tokio::task::spawn_blocking(move || crate::mapped::map_ranges(&file, &wanted))
                .await
                .map_err(|e| generic(format!("mapping task failed: {e}")))?;
            if let Some(mapped) = mapped {
                return Ok(mapped);
            }
        }
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await?;
        self.syncer.sync(to).await
    }
}

/// A multipart upload whose completed file is synced before `complete` returns.
#[derive(Debug)]
struct SyncedUpload {
    inner: Box<dyn MultipartUpload>,
    location: Path,
    syncer: Arc<Syncer>,
}

#[async_trait]
impl MultipartUpload for SyncedUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let result = self.inner.complete().await?;
        self.syncer.sync(&self.location).await?;
        Ok(result)
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use object_store::local::LocalFileSystem;
    use object_store::ObjectStoreExt;

    use super::*;

    #[tokio::test]
    async fn every_write_is_synced_with_the_entries_that_name_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let local = LocalFileSystem::new_with_prefix(dir.path()).expect("local store");
        let store = SyncedDir::new(Arc::new(local), dir.path());
        let large = || PutPayload::from(vec![1u8; WRITE_OUT_STEP as usize + 1]);
        store.put(&Path::from("a/b/one"), large()).await.expect("put");
        // The file, a/b, a (first time seen) and the root.
        assert_eq!(store.syncs(), 4);
        store.put(&Path::from("a/b/two"), large()).await.expect("put");
        assert_eq!(store.syncs(), 6, "known directories are not synced again up the tree");
        let mut upload = store.put_multipart(&Path::from("a/big")).await.expect("multipart");
        upload.put_part(PutPayload::from_static(b"part")).await.expect("part");
        upload.complete().await.expect("complete");
        assert_eq!(store.syncs(), 8);
        store.copy(&Path::from("a/big"), &Path::from("a/copy")).await.expect("copy");
        assert_eq!(store.syncs(), 10);
        let bytes = store.get(&Path::from("a/copy")).await.expect("get").bytes().await.expect("bytes");
        assert_eq!(&bytes[..], b"part");
        // A small put is synced by the directory store that writes it, file and directory.
        store.put(&Path::from("c/d/small"), PutPayload::from_static(b"s")).await.expect("put");
        assert_eq!(store.syncs(), 12);
        let bytes = store.get(&Path::from("c/d/small")).await.expect("get").bytes().await.expect("bytes");
        assert_eq!(&bytes[..], b"s");
    }

    /// A small put's e-tag is the one the directory reports for the file, so a
    /// conditional update can start from either.
    #[tokio::test]
    async fn a_small_put_answers_the_e_tag_a_read_reports() {
        let dir = tempfile::tempdir().expect("temp dir");
        let local = LocalFileSystem::new_with_prefix(dir.path()).expect("local store");
        let store = SyncedDir::new(Arc::new(local), dir.path());
        let path = Path::from("manifest/1");
        let put = store.put(&path, PutPayload::from_static(b"1")).await.expect("put");
        let head = store.head(&path).await.expect("head");
        assert!(put.e_tag.is_some());
        assert_eq!(put.e_tag, head.e_tag);
        let version = object_store::UpdateVersion { e_tag: put.e_tag, version: None };
        store.put_opts(&path, PutPayload::from_static(b"2"), PutMode::Update(version).into()).await.expect("update");
    }

    /// SlateDB's conditional writes carry an id attribute: the directory takes them in
    /// one request (`LocalFileSystem` alone refuses them, and SlateDB writes again).
    #[tokio::test]
    async fn a_write_with_attributes_is_one_request() {
        let dir = tempfile::tempdir().expect("temp dir");
        let local = LocalFileSystem::new_with_prefix(dir.path()).expect("local store");
        let counted = crate::InstrumentedStore::new(Arc::new(local));
        let counters = counted.counters();
        // Without fsync every put goes through the store given (counted here); with it,
        // small puts take the same attribute-free options (below).
        let store = SyncedDir::without_fsync(Arc::new(counted), dir.path());
        let mut attributes = Attributes::new();
        attributes.insert(object_store::Attribute::Metadata("put-id".into()), "01ABC".into());
        let opts = PutOptions { mode: PutMode::Create, attributes: attributes.clone(), ..PutOptions::default() };
        store.put_opts(&Path::from("wal/1.sst"), PutPayload::from_static(b"wal"), opts.clone()).await.expect("put");
        assert_eq!(counters.puts.load(Ordering::Relaxed), 1, "one request reached the directory");
        let again = store.put_opts(&Path::from("wal/1.sst"), PutPayload::from_static(b"other"), opts).await;
        assert!(matches!(again, Err(object_store::Error::AlreadyExists { .. })), "create still fences: {again:?}");
        let bytes = store.get(&Path::from("wal/1.sst")).await.expect("get").bytes().await.expect("bytes");
        assert_eq!(&bytes[..], b"wal");
        let multipart = PutMultipartOptions { attributes: attributes.clone(), ..PutMultipartOptions::default() };
        let mut upload = store.put_multipart_opts(&Path::from("big"), multipart).await.expect("multipart");
        upload.put_part(PutPayload::from_static(b"part")).await.expect("part");
        upload.complete().await.expect("complete");

        let synced = SyncedDir::new(Arc::new(LocalFileSystem::new_with_prefix(dir.path()).expect("local")), dir.path());
        let opts = PutOptions { mode: PutMode::Create, attributes, ..PutOptions::default() };
        synced.put_opts(&Path::from("wal/2.sst"), PutPayload::from_static(b"wal"), opts.clone()).await.expect("put");
        let again = synced.put_opts(&Path::from("wal/2.sst"), PutPayload::from_static(b"other"), opts).await;
        assert!(matches!(again, Err(object_store::Error::AlreadyExists { .. })), "create still fences: {again:?}");
        let bytes = synced.get(&Path::from("wal/2.sst")).await.expect("get").bytes().await.expect("bytes");
        assert_eq!(&bytes[..], b"wal");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_large_file_goes_to_the_disk_in_steps_before_its_fsync() {
        let dir = tempfile::tempdir().expect("temp dir");
        let local = LocalFileSystem::new_with_prefix(dir.path()).expect("local store");
        let store = SyncedDir::new(Arc::new(local), dir.path());
        store.put(&Path::from("small"), PutPayload::from(vec![1u8; 64 * 1024])).await.expect("put");
        assert_eq!(store.write_out_steps(), 0, "a file of one step or less goes with its fsync");
        let large = vec![7u8; 5 * WRITE_OUT_STEP as usize + 10];
        store.put(&Path::from("large"), PutPayload::from(large.clone())).await.expect("put");
        assert_eq!(store.write_out_steps(), 6);
        let read = store.get(&Path::from("large")).await.expect("get").bytes().await.expect("bytes");
        assert_eq!(read.len(), large.len());
        assert!(read.iter().all(|b| *b == 7));
        let unsynced = SyncedDir::without_fsync(
            Arc::new(LocalFileSystem::new_with_prefix(dir.path()).expect("local store")),
            dir.path(),
        );
        unsynced.put(&Path::from("large"), PutPayload::from(large)).await.expect("put");
        assert_eq!(unsynced.write_out_steps(), 0, "nothing is forced to the disk with fsync off");
    }

    /// What SlateDB's garbage collector and table commits need, with fsync on and off
    /// (`store_fsync = false` opens the directory without it, with no fsync at all): an
    /// update wins only against the version it read; of racing updaters from one
    /// version, exactly one wins.
    #[tokio::test]
    async fn conditional_updates_win_only_against_the_version_they_read() {
        for fsync in [true, false] {
            conditional_updates(fsync).await;
        }
    }

    async fn conditional_updates(fsync: bool) {
        let dir = tempfile::tempdir().expect("temp dir");
        let local = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).expect("local store"));
        let store = Arc::new(if fsync {
            SyncedDir::new(local, dir.path())
        } else {
            SyncedDir::without_fsync(local, dir.path())
        });
        let path = Path::from("gc/boundary");
        let missing = object_store::UpdateVersion { e_tag: Some("none".into()), version: None };
        let refused = store.put_opts(&path, PutPayload::from_static(b"0"), PutMode::Update(missing).into()).await;
        assert!(matches!(refused, Err(object_store::Error::Precondition { .. })), "{refused:?}");
        let first = store.put(&path, PutPayload::from_static(b"1")).await.expect("put");
        let version = object_store::UpdateVersion { e_tag: first.e_tag, version: first.version };
        let racers = (0..8).map(|n| {
            let (store, path, version) = (store.clone(), path.clone(), version.clone());
            tokio::spawn(async move {
                let payload = PutPayload::from(format!("racer {n}"));
                store.put_opts(&path, payload, PutMode::Update(version).into()).await
            })
        });
        let mut winners = 0;
        for racer in racers {
            match racer.await.expect("task") {
                Ok(_) => winners += 1,
                Err(object_store::Error::Precondition { .. }) => {}
                Err(e) => panic!("unexpected error {e}"),
            }
        }
        assert_eq!(winners, 1);
        let stale = store.put_opts(&path, PutPayload::from_static(b"late"), PutMode::Update(version).into()).await;
        assert!(matches!(stale, Err(object_store::Error::Precondition { .. })), "{stale:?}");
        assert_eq!(store.syncs() == 0, !fsync, "fsync {fsync}: {} syncs", store.syncs());
    }

    /// Range reads answer the same bytes whether mapped (long ranges) or read (short
    /// ones, or a call with any short one), and a missing object is `NotFound` either way.
    #[tokio::test]
    #[allow(clippy::single_range_in_vec_init)] // a list of one range, as `get_ranges` takes
    async fn long_and_short_range_reads_answer_the_same_bytes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let local = LocalFileSystem::new_with_prefix(dir.path()).expect("local store");
        let store = SyncedDir::new(Arc::new(local), dir.path());
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let path = Path::from("segments/one");
        store.put(&path, PutPayload::from(bytes.clone())).await.expect("put");
        let long = 1000..200_000u64;
        let short = 10..20u64;
        let mapped = store.get_ranges(&path, &[long.clone(), 200_000..300_000]).await.expect("mapped read");
        assert_eq!(&mapped[0][..], &bytes[1000..200_000]);
        assert_eq!(&mapped[1][..], &bytes[200_000..]);
        let mixed = store.get_ranges(&path, &[long, short]).await.expect("read");
        assert_eq!(&mixed[0][..], &bytes[1000..200_000]);
        assert_eq!(&mixed[1][..], &bytes[10..20]);
        let past_end = store.get_ranges(&path, &[200_000..300_001]).await;
        assert!(past_end.is_err(), "a range past the end is refused as the directory store refuses it");
        for ranges in [vec![0..100_000u64], vec![0..10]] {
            let missing = store.get_ranges(&Path::from("segments/none"), &ranges).await;
            assert!(matches!(missing, Err(object_store::Error::NotFound { .. })), "{missing:?}");
        }
    }
}
