//! One `shale serve` per local data directory: an advisory lock on `<dir>/shale.lock`
//! (holding the owner's pid), held for the life of the process. A second server on the
//! same directory would fence the first through SlateDB while the first kept answering
//! reads from its stale view, so it is refused; `--takeover` asks the owner to stop
//! (SIGTERM: it drains and closes cleanly) and starts once the lock is free.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::time::Duration;

/// How long `--takeover` waits for the owner to stop.
const TAKEOVER_WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

/// The held lock; released when dropped (or when the process ends, however it ends).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Locks the directory of a `file://` store; other stores need no lock.
pub async fn lock_store(url: &str, takeover: bool) -> anyhow::Result<Option<DirLock>> {
    let Some(dir) = url.strip_prefix("file://") else { return Ok(None) };
    lock_dir(Path::new(dir), takeover).await.map(Some)
}

async fn lock_dir(dir: &Path, takeover: bool) -> anyhow::Result<DirLock> {
    let path = dir.join("shale.lock");
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
    if !try_lock(&file, &path)? {
        let owner = owner_pid(&mut file);
        let who = owner.map(|pid| format!("process {pid}")).unwrap_or_else(|| "another process".into());
        if !takeover {
            anyhow::bail!(
                "{} is in use by {who} (another shale serve); stop it, or pass --takeover to stop it and take over",
                dir.display()
            );
        }
        let Some(pid) = owner else {
            anyhow::bail!("{} is in use by a process whose pid is unknown; stop it first", dir.display())
        };
        tracing::warn!(pid, dir = %dir.display(), "taking over: asking the current server to stop");
        terminate(pid)?;
        wait_for_lock(&file, &path, pid).await?;
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    file.flush()?;
    Ok(DirLock { _file: file })
}

fn try_lock(file: &File, path: &Path) -> anyhow::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(anyhow::anyhow!("locking {}: {e}", path.display())),
    }
}

fn owner_pid(file: &mut File) -> Option<i32> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

fn terminate(pid: i32) -> anyhow::Result<()> {
    // SAFETY: kill(2) with a pid read from the lock file and SIGTERM; it touches no memory.
    let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
    if sent != 0 {
        anyhow::bail!("cannot signal process {pid}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

async fn wait_for_lock(file: &File, path: &Path, pid: i32) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + TAKEOVER_WAIT;
    while tokio::time::Instant::now() < deadline {
        if try_lock(file, path)? {
            tracing::info!(pid, "previous server stopped; taking over");
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
    anyhow::bail!(
        "process {pid} did not stop within {TAKEOVER_WAIT:?}; stop it (kill -9 is safe: acked data is durable)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_lock_on_a_directory_is_refused_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_dir(dir.path(), false).await.unwrap();
        let refused = lock_dir(dir.path(), false).await.unwrap_err().to_string();
        assert!(refused.contains(&format!("process {}", std::process::id())), "{refused}");
        assert!(refused.contains("--takeover"), "{refused}");
        drop(first);
        lock_dir(dir.path(), false).await.unwrap();
    }
}
