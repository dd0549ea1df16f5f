//! `shale-commit-files-bench`: what the two durable files of one commit cost on a local
//! directory, through the store `shale serve` opens there (`file://`, fsync on by default).
//!
//! A commit on a local directory writes two new files one after the other: the segment
//! (its records, `--segment-bytes`) and then the metadata WAL object naming it
//! (`--wal-bytes`, written as SlateDB writes it: create-if-absent). Both are fsynced with
//! their directory entries before the next step. This program does exactly those writes
//! `--commits` times, one commit at a time, with nothing else running in the process, and
//! prints per commit its CPU time (user and system of every thread, from `getrusage`),
//! the times the process waited (voluntary context switches: a hand-off to the blocking
//! pool and back, and on ext4 without a journal one per synchronous disk request of an
//! fsync) and its wall time; then what that costs per GiB at `--commits-per-gib` (`s2
//! bench` at 50 MiB/s makes about 3,200 commits per GiB, one per client batch). While a
//! commit is two new durable files, this is a floor under the server's CPU per GiB: only
//! fewer commits per GiB (larger batches, so more latency) or a cheaper disk lowers it.
//!   cargo run --release -p shale-bench --bin shale-commit-files-bench -- --dir /tmp/x

use anyhow::Context;
use bytes::Bytes;
use clap::Parser;
use serde_json::json;
use shale_storage::object_store::path::Path;
use shale_storage::object_store::{ObjectStore, PutMode, PutPayload};
use shale_storage::PutInPlace;

#[derive(Debug, Parser)]
struct Args {
    /// An empty directory on the disk to measure (created if missing); its files stay.
    #[arg(long)]
    dir: std::path::PathBuf,
    /// Commits to write, one after another.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    commits: u64,
    /// Bytes of each segment (50 MiB/s in about 160 commits per second: 320 KiB).
    #[arg(long, default_value_t = 320 * 1024)]
    segment_bytes: usize,
    /// Bytes of each WAL object (a commit's index entries and outcome).
    #[arg(long, default_value_t = 4096)]
    wal_bytes: usize,
    /// Commits per GiB the per-GiB figure is computed for.
    #[arg(long, default_value_t = 3200.0)]
    commits_per_gib: f64,
    /// Without fsync (`store_fsync = false`).
    #[arg(long)]
    no_fsync: bool,
}

/// CPU seconds (user and system) and voluntary context switches of this process so far.
fn usage() -> (f64, i64) {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given (RUSAGE_SELF cannot fail); the
    // zeroed start is a valid rusage either way.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (seconds(usage.ru_utime) + seconds(usage.ru_stime), usage.ru_nvcsw)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let dir = args.dir.canonicalize()?;
    let store = shale_storage::open_store_with(&format!("file://{}", dir.display()), !args.no_fsync)?;
    let segment = Bytes::from(vec![7u8; args.segment_bytes]);
    let wal = Bytes::from(vec![9u8; args.wal_bytes]);
    // One commit first, so the directories exist and nothing first-time is counted.
    commit(&*store, 0, &segment, &wal).await?;
    let (cpu_before, waits_before) = usage();
    let started = tokio::time::Instant::now();
    for n in 1..=args.commits {
        commit(&*store, n, &segment, &wal).await?;
    }
    let wall = started.elapsed().as_secs_f64();
    let (cpu_after, waits_after) = usage();
    let commits = args.commits as f64;
    let cpu_us = (cpu_after - cpu_before) / commits * 1e6;
    println!(
        "{}",
        json!({
            "fsync": !args.no_fsync,
            "commits": args.commits,
            "segment_bytes": args.segment_bytes,
            "wal_bytes": args.wal_bytes,
            "cpu_us_per_commit": (cpu_us * 10.0).round() / 10.0,
            "waits_per_commit": ((waits_after - waits_before) as f64 / commits * 10.0).round() / 10.0,
            "wall_ms_per_commit": (wall / commits * 1e3 * 100.0).round() / 100.0,
            "commits_per_gib": args.commits_per_gib,
            "cpu_s_per_gib": (cpu_us * args.commits_per_gib / 1e6 * 100.0).round() / 100.0,
        })
    );
    Ok(())
}

/// One commit's two files, as `shale serve` writes them: the segment (in place), then the
/// WAL object.
async fn commit(store: &dyn ObjectStore, n: u64, segment: &Bytes, wal: &Bytes) -> anyhow::Result<()> {
    let segment_path = Path::from(format!("segments/{n:020}.seg"));
    store.put_opts(&segment_path, PutPayload::from_bytes(segment.clone()), PutInPlace::options()).await?;
    let wal_path = Path::from(format!("metadata/wal/{n:020}.sst"));
    store.put_opts(&wal_path, PutPayload::from_bytes(wal.clone()), PutMode::Create.into()).await?;
    Ok(())
}
