//! Range reads of a local directory's files through memory maps: the bytes a reader
//! gets are the kernel's page cache, mapped, not a copy in the process's own memory.
//!
//! A segment just written is in the page cache already. Read into a buffer of its own,
//! it is a second copy, and one the block cache keeps: a fresh server's first GiB of
//! blocks cost a GiB of newly touched memory (about 310,000 first-touch page faults per
//! GiB under `s2 bench`). Mapped, the block cache holds mappings of the same pages, the
//! process's heap does not grow with it, and a read costs an open, a stat, a map and a
//! close.
//!
//! Only ranges of at least [`MAPPED_READ_MIN`] are mapped (so a block cache of 1 GiB,
//! the most its default gives, holds at most 16,384 mappings, well inside Linux's
//! default 65,530 per process); anything else, and any range a map is refused for (a
//! larger cache past that limit), is read as before.
//! Files in a store directory are written once under a temporary name, fsynced and then
//! renamed or linked into place, or (a put marked [`crate::PutInPlace`]) written under
//! their own name before anything names them; never changed once written. A deleted file stays readable
//! through the mappings that exist. A file truncated by another program while mapped,
//! or a disk error under a mapped page, ends the process (`SIGBUS`), as a crash does:
//! what was acked is on disk either way.

use std::ops::Range;

use bytes::Bytes;

/// The least a range must span to be mapped rather than read.
pub const MAPPED_READ_MIN: u64 = 64 * 1024;

/// Each of `ranges` of `file`, mapped (with its pages mapped in at once, off the async
/// runtime); `None` when the call is better served by reading: a range shorter than
/// [`MAPPED_READ_MIN`] or past the file's end, an unopenable file (the read then
/// reports why) or a map the system refuses.
pub fn map_ranges(file: &std::path::Path, ranges: &[Range<u64>]) -> Option<Vec<Bytes>> {
    if !worth_mapping(ranges) {
        return None;
    }
    let opened = std::fs::File::open(file).ok()?;
    let len = opened.metadata().ok()?.len();
    if ranges.iter().any(|range| range.end > len) {
        return None;
    }
    ranges.iter().map(|range| map_range(&opened, range)).collect()
}

/// Whether a read of `ranges` is one to map: each spans at least [`MAPPED_READ_MIN`]
/// (and the system is one where a mapped file can still be deleted).
pub fn worth_mapping(ranges: &[Range<u64>]) -> bool {
    cfg!(unix)
        && !ranges.is_empty()
        && ranges.iter().all(|range| range.end >= range.start.saturating_add(MAPPED_READ_MIN))
}

fn map_range(file: &std::fs::File, range: &Range<u64>) -> Option<Bytes> {
    let len = usize::try_from(range.end - range.start).ok()?;
    // SAFETY: the mapping is read only, and the files of a store directory are never
    // changed in place once they have their name (see the module doc); a file
    // truncated underneath by another program faults the process instead of reading.
    let map = unsafe { memmap2::MmapOptions::new().offset(range.start).len(len).populate().map(file) };
    match map {
        Ok(map) => Some(Bytes::from_owner(map)),
        Err(error) => {
            tracing::debug!(%error, "mapping refused, reading instead");
            None
        }
    }
}

#[cfg(all(test, unix))]
// One range is a list of ranges here: `get_ranges` takes lists.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    fn file_of(len: usize) -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("object");
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).expect("write");
        (dir, path, bytes)
    }

    #[test]
    fn mapped_ranges_hold_the_files_bytes_at_any_offset() {
        let min = MAPPED_READ_MIN as usize;
        let (_dir, path, bytes) = file_of(3 * min + 123);
        // Offsets that are not page aligned, and a range that ends at the file's end.
        let ranges = [5..5 + min as u64, (min + 4097) as u64..(3 * min + 123) as u64];
        let got = map_ranges(&path, &ranges).expect("mapped");
        assert_eq!(&got[0][..], &bytes[5..5 + min]);
        assert_eq!(&got[1][..], &bytes[min + 4097..]);
    }

    #[test]
    fn short_ranges_ranges_past_the_end_and_missing_files_are_left_to_reads() {
        let min = MAPPED_READ_MIN;
        let (dir, path, _) = file_of(2 * min as usize);
        assert!(map_ranges(&path, &[0..min - 1]).is_none(), "shorter than the least mapped");
        assert!(map_ranges(&path, &[0..min, 0..10]).is_none(), "one short range: the call is read");
        assert!(map_ranges(&path, &[min..2 * min + 1]).is_none(), "past the end: the read reports it");
        assert!(map_ranges(&dir.path().join("missing"), &[0..min]).is_none());
        assert!(map_ranges(&path, &[min..2 * min]).is_some());
    }

    #[test]
    fn a_mapping_outlives_the_files_deletion() {
        let min = MAPPED_READ_MIN as usize;
        let (_dir, path, bytes) = file_of(min);
        let got = map_ranges(&path, &[0..min as u64]).expect("mapped");
        std::fs::remove_file(&path).expect("delete");
        assert_eq!(&got[0][..], &bytes[..]);
    }
}
