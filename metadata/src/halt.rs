//! Whether this instance may still serve: a newer instance fenced it, or a durable write
//! failed and its in-memory state can no longer be trusted. Both latch for good, and
//! both fire one signal the process waits on to stop serving and exit.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

use crate::{MetadataError, Result};

/// Why an instance stopped serving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HaltReason {
    /// A newer instance opened the database.
    Fenced,
    /// A durable write failed: what was applied after the last durable point is lost.
    WriteFailed,
}

#[derive(Debug)]
pub(crate) struct Halt {
    fenced: AtomicBool,
    stopped: AtomicBool,
    signal: watch::Sender<Option<HaltReason>>,
}

impl Default for Halt {
    fn default() -> Self {
        Self { fenced: AtomicBool::new(false), stopped: AtomicBool::new(false), signal: watch::Sender::new(None) }
    }
}

impl Halt {
    /// `Fenced` or `Stopped` once either latched; calls check this before doing anything.
    pub fn check(&self) -> Result<()> {
        if self.fenced.load(Ordering::SeqCst) {
            return Err(MetadataError::Fenced);
        }
        if self.stopped.load(Ordering::SeqCst) {
            return Err(MetadataError::Stopped);
        }
        Ok(())
    }

    pub fn is_fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    /// Whether a durable write failed (or the instance was closed): calls before may
    /// have been answered `indefinite`.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    pub fn is_halted(&self) -> bool {
        self.check().is_err()
    }

    pub fn fence(&self) {
        if !self.fenced.swap(true, Ordering::SeqCst) {
            tracing::error!("metadata fenced by a newer instance; refusing all further calls");
            self.signal.send_if_modified(|reason| first(reason, HaltReason::Fenced));
        }
    }

    /// Stops taking calls after a failed durable write.
    pub fn stop(&self, error: &str) {
        if !self.stopped.swap(true, Ordering::SeqCst) {
            tracing::error!(error, "durable write failed; metadata stops serving");
            self.signal.send_if_modified(|reason| first(reason, HaltReason::WriteFailed));
        }
    }

    /// Marks a clean close: later calls fail, nobody is told to exit.
    pub fn close(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    pub fn subscribe(&self) -> watch::Receiver<Option<HaltReason>> {
        self.signal.subscribe()
    }
}

/// Keeps the first reason an instance halted for.
fn first(slot: &mut Option<HaltReason>, reason: HaltReason) -> bool {
    if slot.is_some() {
        return false;
    }
    *slot = Some(reason);
    true
}
