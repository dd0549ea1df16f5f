//! Who may use a local data directory: an advisory lock on `<dir>/shale.lock` (holding
//! the pid and command of the process that took it last), held for the life of the
//! process. `shale serve` holds it alone: a second server, or any role, on its directory
//! would fence it through SlateDB (or write where it does not look) while it kept
//! answering from its stale view, so they are refused. The separate roles (`metadata`,
//! `gateway`, `reader`, `compactor`) share it with each other, as they share a store, and
//! keep `serve` off. `--takeover` asks a `serve` owner to stop (SIGTERM: it drains and
//! closes cleanly) and starts once the lock is free.

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

/// Which command takes the lock: `serve` alone, or one of the separate roles, which
/// share it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    Serve,
    Role(&'static str),
}

impl Holder {
    fn command(self) -> &'static str {
        match self {
            Holder::Serve => "serve",
            Holder::Role(name) => name,
        }
    }
}

/// Locks the directory of a `file://` store; other stores need no lock. Nothing is
/// created when the lock is refused (the lock file exists wherever a holder runs).
pub async fn lock_store(url: &str, holder: Holder, takeover: bool) -> anyhow::Result<Option<DirLock>> {
    let Some(dir) = url.strip_prefix("file://") else { return Ok(None) };
    lock_dir(Path::new(dir), holder, takeover).await.map(Some)
}

async fn lock_dir(dir: &Path, holder: Holder, takeover: bool) -> anyhow::Result<DirLock> {
    let path = dir.join("shale.lock");
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("opening {}: {e}", path.display()))?;
    if !try_lock(&file, &path, holder)? {
        let owner = owner(&mut file);
        let who = match &owner {
            Some((pid, command)) => format!("process {pid} (shale {command})"),
            None => "another shale process".into(),
        };
        let serving = owner.as_ref().filter(|(_, command)| command == "serve").map(|(pid, _)| *pid);
        let dir = dir.display();
        match (holder, serving) {
            (Holder::Serve, Some(pid)) if takeover => {
                tracing::warn!(pid, %dir, "taking over: asking the current server to stop");
                terminate(pid)?;
                wait_for_lock(&file, &path, pid).await?;
            }
            (Holder::Serve, Some(_)) => {
                anyhow::bail!("{dir} is in use by {who}; stop it, or pass --takeover to stop it and take over")
            }
            (Holder::Serve, None) => anyhow::bail!(
                "{dir} is in use by {who}; `shale serve` needs a directory of its own: stop the roles using it, \
                 or give serve another --data-dir"
            ),
            (Holder::Role(_), _) => anyhow::bail!(
                "{dir} is in use by {who}; a role cannot share a directory `shale serve` holds: stop it, or run \
                 every role apart on this directory"
            ),
        }
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{} {}", std::process::id(), holder.command())?;
    file.flush()?;
    Ok(DirLock { _file: file })
}

fn try_lock(file: &File, path: &Path, holder: Holder) -> anyhow::Result<bool> {
    let locked = match holder {
        Holder::Serve => file.try_lock(),
        Holder::Role(_) => file.try_lock_shared(),
    };
    match locked {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(anyhow::anyhow!("locking {}: {e}", path.display())),
    }
}

/// The pid and command written by the process that took the lock last.
fn owner(file: &mut File) -> Option<(i32, String)> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut text).ok()?;
    let mut words = text.split_whitespace();
    let pid = words.next()?.parse().ok()?;
    // A lock file of an older version holds the pid alone, written by `serve`.
    Some((pid, words.next().unwrap_or("serve").to_string()))
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
        if try_lock(file, path, Holder::Serve)? {
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
        let first = lock_dir(dir.path(), Holder::Serve, false).await.unwrap();
        let refused = lock_dir(dir.path(), Holder::Serve, false).await.unwrap_err().to_string();
        assert!(refused.contains(&format!("process {} (shale serve)", std::process::id())), "{refused}");
        assert!(refused.contains("--takeover"), "{refused}");
        let role = lock_dir(dir.path(), Holder::Role("metadata"), false).await.unwrap_err().to_string();
        assert!(role.contains("(shale serve)") && !role.contains("--takeover"), "{role}");
        drop(first);
        lock_dir(dir.path(), Holder::Serve, false).await.unwrap();
    }

    #[tokio::test]
    async fn roles_share_a_directory_and_keep_serve_off_it() {
        let dir = tempfile::tempdir().unwrap();
        let metadata = lock_dir(dir.path(), Holder::Role("metadata"), false).await.unwrap();
        let gateway = lock_dir(dir.path(), Holder::Role("gateway"), false).await.unwrap();
        let refused = lock_dir(dir.path(), Holder::Serve, true).await.unwrap_err().to_string();
        assert!(refused.contains("(shale gateway)") && refused.contains("directory of its own"), "{refused}");
        drop((metadata, gateway));
        lock_dir(dir.path(), Holder::Serve, false).await.unwrap();
    }
}
